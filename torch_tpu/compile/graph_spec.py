"""FX graph (ATen, functionalized) -> the plain-data spec the C++ graph driver lowers.

Every value (graph input or node result) gets an id and its meta (dtype, sizes, strides) from
the FakeTensor PyTorch traced; every node names its lowering rule and its schema-normalised
arguments, referring to values by id (csrc/engine/graph/graph_spec.h).
"""
import operator

import torch
import torch.fx

from .. import _C

# Random ops whose schema has no Generator argument but that draw from the generator anyway.
_RANDOM_BASE_NAMES = {"native_dropout", "rand", "randn", "rand_like", "randn_like", "randint",
                      "randint_like", "bernoulli", "normal", "uniform", "exponential", "randperm",
                      "multinomial", "random"}


# unsupported_reason() of a node whose results live on the host (e.g. an optimizer's CPU step
# counters): it runs eagerly on the CPU between compiled parts, which is where it belongs.
HOST_OP = "computes on CPU tensors"

# node.meta key set by lift_host_scalar_math(): CPU 0-d math the module computes itself.
_LIFTED = "tpu_lifted_host_scalar"


# unsupported_reason() of a functional collective (_c10d_functional.all_reduce, wait_tensor, ...;
# what DTensor and tensor-parallel plans trace to): it runs eagerly through the tpu c10d backend
# between compiled parts, also under fullgraph=True. On the XLA CPU plugin the bytes cross
# processes by the host transport, which no executable can call (docs/parallel.md); on a TPU the
# collective belongs inside the module (csrc/hlo/collectives.cc), not built yet.
COLLECTIVE = "a collective: runs through the tpu c10d backend between compiled parts"


def is_collective(target):
    return isinstance(target, torch._ops.OpOverload) and target.namespace == "_c10d_functional"


class Unsupported(Exception):
    """A node the driver cannot lower; carries the node for messages and graph splitting."""

    def __init__(self, node, why):
        super().__init__(why)
        self.node = node
        self.why = why


def source_line(node):
    """The user's source line that produced `node` ("file.py:12 in forward: y = x.exp()")."""
    trace = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in trace.strip().splitlines()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("File "):
            where = lines[i][5:].replace('", line ', ":").replace('"', "").replace(", in ", " in ")
            code = lines[i + 1] if i + 1 < len(lines) else ""
            return f"{where}: {code}" if code else where
    return ""


def rule_name(target):
    """Lowering rule for an aten OpOverload ("" if none)."""
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten":
        return ""
    overload = target._overloadname
    base = target._schema.name.split("::", 1)[1]
    rule = _C._rule_for(base if overload == "default" else f"{base}.{overload}")
    if not rule and "Scalar" in overload:
        # mul.Scalar(self, other): eager PyTorch redispatches to mul.Tensor with a wrapped
        # number; the graph does the same with the Tensor overload's rule (same argument order).
        rule = _C._rule_for(f"{base}.{overload.replace('Scalar', 'Tensor')}")
    return rule


def op_label(target):
    if isinstance(target, torch._ops.OpOverload):
        return f"{target._schema.name}.{target._overloadname}"
    return getattr(target, "__name__", str(target))


def _is_random(target):
    schema = target._schema
    if any("Generator" in str(a.type) for a in schema.arguments):
        return True
    return schema.name.split("::", 1)[1].rstrip("_") in _RANDOM_BASE_NAMES


def _writes_first_arg(target):
    args = target._schema.arguments
    return bool(args) and args[0].alias_info is not None and args[0].alias_info.is_write and not args[0].kwarg_only


def unsupported_reason(node):
    """Why `node` cannot be lowered, or None."""
    if node.op != "call_function":
        return None
    if node.target is operator.getitem:
        return None
    if is_collective(node.target):
        return COLLECTIVE
    if not isinstance(node.target, torch._ops.OpOverload):
        return f"{op_label(node.target)} is not an ATen operator"
    if not rule_name(node.target):
        return f"{op_label(node.target)} has no lowering rule"
    for value in flat_values(node.meta.get("val")):
        if value is not None and not isinstance(value, torch.Tensor):
            return f"{op_label(node.target)} returns {type(value).__name__} (data-dependent or symbolic)"
        if isinstance(value, torch.Tensor) and value.device.type not in ("tpu", "meta") and not node.meta.get(_LIFTED):
            return HOST_OP
    if node.target is torch.ops.aten.as_strided.default:
        base = node.args[0].meta.get("val")
        if base is None or not base.is_contiguous() or base.storage_offset() != 0:
            return "as_strided of a non-contiguous value"
    return None


def _on_device(node):
    values = [v for v in flat_values(node.meta.get("val")) if isinstance(v, torch.Tensor)]
    return bool(values) and all(v.device.type == "tpu" for v in values)


def _host_scalars(node):
    return all(isinstance(v, torch.Tensor) and v.device.type == "cpu" and v.dim() == 0
               for v in flat_values(node.meta.get("val")))


def lift_host_scalar_math(gm: torch.fx.GraphModule):
    """Marks the CPU 0-d nodes whose results only feed the device, so the module computes them.

    A non-capturable optimizer keeps its step counters on the CPU; its graph then computes the
    bias corrections (pow, sub, div, sqrt of each counter) on CPU 0-d tensors. Run eagerly between
    compiled parts, that is about a hundred host ops per AdamW step: about 250 us here, as much
    as the whole update of a small model. Only the counter increments and their write-back,
    which the host needs, stay on the host; the rest enters the module through the counters'
    runtime scalars."""
    for node in reversed(gm.graph.nodes):
        if node.op != "call_function" or _on_device(node):
            continue
        if not _host_scalars(node):
            continue
        if node.target is not operator.getitem:
            if not isinstance(node.target, torch._ops.OpOverload) or not rule_name(node.target):
                continue
            if _is_random(node.target) or _writes_first_arg(node.target):
                continue
            tensor_args = [a for a in flat_values(list(node.args) + list(node.kwargs.values()))
                           if isinstance(a, torch.fx.Node)]
            if not all(_host_scalars(a) or _on_device(a) for a in tensor_args):
                continue
        if all(user.op == "call_function" and (_on_device(user) or user.meta.get(_LIFTED)) for user in node.users):
            node.meta[_LIFTED] = True


def flat_values(val):
    """Nested lists/tuples (multi-output values, a graph's outputs) as one flat list."""
    if isinstance(val, (list, tuple)):
        out = []
        for v in val:
            out.extend(flat_values(v))
        return out
    return [val]


def _data_dependent(val) -> bool:
    """Whether a shape, stride or number depends on tensor data (an unbacked symbol: nonzero,
    x[mask], .item() sizes), which no dynamic= setting makes static."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    return bool(free_unbacked_symbols(val))


def _static_only(what, shown) -> str:
    """Why a symbolic `shown` (a shape or number) cannot compile, and what helps."""
    if _data_dependent(shown):
        return (f"{what} has a data-dependent shape or value {shown} (known only once the data is computed); "
                "torch-tpu compiles static shapes, and dynamic=False does not change that: without "
                "fullgraph=True the graph is split around the op, or use a fixed-size form (torch.where on "
                "a mask, nonzero_static, a padded size)")
    return f"{what} has a symbolic shape {shown}; torch-tpu compiles static shapes: use torch.compile(..., dynamic=False)"


def _check_static(val, what):
    for s in list(val.shape) + list(val.stride()):
        if not isinstance(s, int):
            raise Unsupported(None, _static_only(what, tuple(val.shape)))


class SpecWriter:
    def __init__(self, gm: torch.fx.GraphModule, name: str, example_inputs=None, bucketing=None):
        self.gm = gm
        self.bucketing = bucketing  # a graph compiled per bucket (bucketed_graphs.Bucketing)
        self.node_index = {}  # fx.Node -> its position in self.nodes
        self.name = name
        self.example_inputs = example_inputs
        self.constants = {}   # fx.Node -> Python number (an int input of a graph specialised per shape)
        self.skipped = []     # positions of such inputs (the caller drops them)
        self.constant_outputs = {}  # output position -> Python number returned as is
        self.values = []      # (scalar_type, sizes, strides)
        self.ids = {}         # fx.Node -> value id, or list of ids for multi-output nodes
        self.nodes = []

    def new_value(self, val, what):
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise Unsupported(None, _static_only(f"{what} (a {type(val).__name__})", val))
        if not isinstance(val, torch.Tensor):
            raise Unsupported(None, f"{what} is a {type(val).__name__}, not a tensor")
        _check_static(val, what)
        self.values.append((_C._scalar_type_index(val.dtype), list(val.shape), list(val.stride())))
        return len(self.values) - 1

    def ref(self, node):
        value = self.ids.get(node)
        if not isinstance(value, int):
            raise Unsupported(node, f"{node.name} is not a single tensor")
        return value

    def encode(self, value, arg_type, node):
        type_text = str(arg_type).replace("number", "Scalar")
        if value is None:
            return ("none", 0)
        if isinstance(value, torch.fx.Node) and value in self.constants:
            value = self.constants[value]
        if isinstance(value, torch.fx.Node):
            return ("ref", self.ref(value))
        if isinstance(value, (list, tuple)):
            if any(isinstance(v, torch.fx.Node) for v in value) or "Tensor" in type_text:
                return ("ref_list", [-1 if v is None else self.ref(v) for v in value])
            if "Scalar" in type_text:
                return ("number_list", list(value))
            if all(isinstance(v, bool) for v in value):
                return ("int_list", [int(v) for v in value])
            if all(isinstance(v, int) for v in value):
                return ("int_list", list(value))
            raise Unsupported(node, f"argument of type {type_text} = {value!r}")
        if isinstance(value, torch.dtype):
            return ("scalar_type", _C._scalar_type_index(value))
        if ("Scalar" in type_text or "Tensor" in type_text) and isinstance(value, (bool, int, float)):
            # A Python number given where a Tensor or Scalar goes: a wrapped (weakly typed) scalar.
            return ("number", value)
        if isinstance(value, bool):
            return ("bool", value)
        if isinstance(value, int):
            return ("int", value)
        if isinstance(value, float):
            return ("double", value)
        if isinstance(value, str):
            return ("string", value)
        if isinstance(value, (torch.device, torch.layout, torch.memory_format)):
            return ("none", 0)  # results' placement and layout come from the meta values
        if isinstance(value, torch.SymInt):
            raise Unsupported(node, _static_only("a size argument", value))
        raise Unsupported(node, f"argument of type {type_text} = {value!r}")

    def add_node(self, node):
        target = node.target
        schema = target._schema
        args = []
        for i, a in enumerate(schema.arguments):
            if i < len(node.args) and not a.kwarg_only:
                value = node.args[i]
            elif a.name in node.kwargs:
                value = node.kwargs[a.name]
            elif a.has_default_value():
                value = a.default_value
            else:
                value = None
            args.append(self.encode(value, a.type, node))
        val = node.meta.get("val")
        if isinstance(val, (list, tuple)):
            outs = [-1 if v is None else self.new_value(v, f"output of {node.name}") for v in val]
            self.ids[node] = outs
        else:
            outs = [self.new_value(val, f"output of {node.name}")]
            self.ids[node] = outs[0]
        rule = rule_name(target)
        if self.bucketing is not None and node in self.bucketing.appends:
            # cat(padded, rows) over a bucket: rows written after the true rows (bucketed_graphs.py)
            rule = "cat_at_length"
            args = [args[0], args[1], ("ref", self.length_id), ("int", self.bucketing.appends[node])]
        if self.bucketing is not None and node in self.bucketing.from_end:
            # x[..., -n:] of a padded dim: read at a runtime start (bucketed_graphs.py)
            dim, offset, rows = self.bucketing.from_end[node]
            rule = "slice_at_length"
            args = [args[0], ("int", dim), ("ref", self.length_id), ("int", offset), ("int", rows)]
        self.node_index[node] = len(self.nodes)
        self.nodes.append((op_label(target), rule, source_line(node), args, outs,
                           _is_random(target), _writes_first_arg(target)))

    def write(self):
        inputs, outputs = [], []
        if self.bucketing is not None:  # the true length: the last input
            self.length_id = len(self.values)
            self.values.append((_C._scalar_type_index(torch.int64), [], []))
        position = 0
        for node in self.gm.graph.nodes:
            try:
                if node.op == "placeholder":
                    example = (self.example_inputs[position]
                               if self.example_inputs is not None and position < len(self.example_inputs) else None)
                    position += 1
                    if isinstance(example, (int, float, bool)) and not isinstance(node.meta.get("val"), torch.Tensor):
                        self.constants[node] = example  # fixed for this executable (specialised per value)
                        self.skipped.append(position - 1)
                        continue
                    if not node.users and not isinstance(node.meta.get("val"), torch.Tensor):
                        # An unused opaque input: the DeviceMesh objects of a tensor-parallel model.
                        self.skipped.append(position - 1)
                        continue
                    self.ids[node] = self.new_value(node.meta.get("val"), f"graph input {node.name}")
                    inputs.append(self.ids[node])
                elif node.op == "get_attr":
                    raise Unsupported(node, "get_attr constants are lifted as inputs by the backend")
                elif node.op == "call_function":
                    reason = unsupported_reason(node)
                    if reason:
                        raise Unsupported(node, reason)
                    if node.target is operator.getitem:
                        source, index = node.args
                        self.ids[node] = self.ids[source][index]
                    else:
                        self.add_node(node)
                elif node.op == "output":
                    for position, out in enumerate(flat_values(node.args[0])):
                        if isinstance(out, (int, float, bool)) and not isinstance(out, torch.fx.Node):
                            # A number the graph returns (the new value of a Python int attribute
                            # the traced code updates, specialised for this executable).
                            self.constant_outputs[position] = out
                            continue
                        outputs.append(-1 if out is None else self.ref(out))
                else:
                    raise Unsupported(node, f"FX node kind {node.op}")
            except Unsupported as e:
                if e.node is None:
                    e.node = node
                raise
        spec = {"name": self.name, "values": self.values, "inputs": inputs, "outputs": outputs,
                "nodes": self.nodes, "skipped_inputs": self.skipped, "constant_outputs": self.constant_outputs}
        if self.bucketing is not None:
            spec["runtime_dims"] = self.runtime_dim_entries(inputs)
            spec["static_operand_nodes"] = sorted(self.node_index[n] for n in self.bucketing.static_operands
                                                  if n in self.node_index)
        return spec

    def runtime_dim_entries(self, inputs):
        """(value id, dim, length id, offset) of every padded dim; the length is the last input."""
        length = self.length_id
        inputs.append(length)
        entries = set()
        for node, per_result in self.bucketing.padded.items():
            if node.target is operator.getitem or node not in self.ids:
                continue
            ids = self.ids[node] if isinstance(self.ids[node], list) else [self.ids[node]]
            for value, dims in zip(ids, per_result):
                # Folded dims (multiple > 1) keep their places with no runtime size.
                entries.update((value, d, length, k) for d, k, m in dims if value >= 0 and m == 1)
        return sorted(entries)


def graph_device(gm: torch.fx.GraphModule):
    """The tpu device the graph's values live on, or None. A graph whose inputs are all on the
    CPU can still compute on the tpu (it moves them there itself, e.g. a RoPE table kept on the
    CPU and moved with .to(device) inside the compiled region)."""
    for node in gm.graph.nodes:
        for value in flat_values(node.meta.get("val")):
            if isinstance(value, torch.Tensor) and value.device.type == "tpu":
                return value.device
    return None


def graph_spec(gm: torch.fx.GraphModule, name: str, example_inputs=None, bucketing=None) -> dict:
    """The spec of `gm`; raises Unsupported naming the first node that cannot be lowered.
    Number inputs with a concrete example value become constants ("skipped_inputs").
    `bucketing` (bucketed_graphs.Bucketing) makes a graph compiled per bucket: its last input is
    the true length."""
    return SpecWriter(gm, name, example_inputs, bucketing).write()
