"""torch.compile(backend="tpu"): whole ATen graphs as one StableHLO module each.

Dynamo captures the graph; AOTAutograd functionalizes it and splits forward from backward,
decomposing only the operators that have no lowering rule; each resulting graph becomes a
graph spec (graph_spec.py) that the C++ driver lowers through the eager lowering table into one
module, compiles (memory + disk cache, AOT check) and runs. Mutated inputs (buffers, KV caches,
optimizer state) are written back by the module itself through donated outputs.
"""
import os

import torch
import torch.fx

from .. import _C
from . import graph_spec as _spec
from . import stats as _stats
from .partition import split_unsupported


class CompileError(RuntimeError):
    """A graph that torch-tpu cannot compile as a whole (fullgraph=True)."""


def _fullgraph_requested():
    """fullgraph=True of the torch.compile call being traced (read while dynamo's translator runs)."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator
        tx = InstructionTranslator.current_tx()
    except Exception:
        return False
    return bool(getattr(tx, "one_graph", False) or getattr(tx, "error_on_graph_break", False))


def decompositions():
    """PyTorch's core ATen decompositions of the operators we have no rule for."""
    from torch._decomp import core_aten_decompositions
    return {op: fn for op, fn in core_aten_decompositions().items()
            if isinstance(op, torch._ops.OpOverload) and not _spec.rule_name(op)}


def _graph_label(gm):
    """"file.py:12" of the first traced node: names the graph in metrics and errors."""
    for node in gm.graph.nodes:
        where = _spec.source_line(node) if node.op == "call_function" else ""
        if where:
            return where.split(" in ")[0]
    return type(gm).__name__


def _lift_constants(gm):
    """get_attr tensors become trailing inputs (returned so each call can pass them)."""
    constants = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node in list(gm.graph.nodes):
        if node.op != "get_attr":
            continue
        value = getattr(gm, node.target)
        if not isinstance(value, torch.Tensor):
            continue
        anchor = placeholders[-1] if placeholders else next(iter(gm.graph.nodes))
        with gm.graph.inserting_after(anchor):
            ph = gm.graph.placeholder(f"_constant_{len(constants)}")
        ph.meta["val"] = node.meta.get("val", value)
        node.replace_all_uses_with(ph)
        gm.graph.erase_node(node)
        placeholders.append(ph)
        constants.append(value)
    gm.recompile()
    return constants


class CompiledGraph:
    """The boxed callable AOTAutograd runs: one _C._GraphExecutable per graph."""

    def __init__(self, spec, constants, options):
        self._boxed_call = True  # an instance attribute: functools.wraps copies it to wrappers
        self.executable = _C._GraphExecutable(spec)
        self.skipped = set(spec["skipped_inputs"])
        self.constants = constants
        self.options = options
        self._device_constants = None

    def _constants_on(self, device):
        if self._device_constants is None:
            self._device_constants = [c.to(device) if c.device.type != "tpu" and c.dim() > 0 else c
                                      for c in self.constants]
        return self._device_constants

    def __call__(self, args):
        inputs = [a for i, a in enumerate(args) if i not in self.skipped] if self.skipped else list(args)
        args.clear()  # boxed convention: let the caller's references go early
        device = next((t.device for t in inputs if isinstance(t, torch.Tensor) and t.device.type == "tpu"), None)
        if self.constants:
            inputs += self._constants_on(device or "tpu")
        if device is not None:
            # CPU tensors other than 0-d scalars (e.g. CPU index tensors, which PyTorch accepts
            # for device tensors) are copied to the device; 0-d ones are runtime scalars.
            inputs = [t.to(device) if isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.dim() > 0 else t
                      for t in inputs]
        compiles_before = self.executable.compiles
        outputs = self.executable.run(inputs)
        if self.executable.compiles != compiles_before:
            _stats.note_module(self.executable, self.options)
        return outputs


def compile_graph(gm: torch.fx.GraphModule, example_inputs, kind: str, options: dict, fullgraph: bool,
                  label: str = ""):
    """AOTAutograd's compiler for one forward, backward or inference graph."""
    constants = _lift_constants(gm)
    name = f"compiled {kind} graph ({label or _graph_label(gm)})"
    try:
        spec = _spec.graph_spec(gm, name, example_inputs)
    except _spec.Unsupported as e:
        node = e.node
        where = _spec.source_line(node) if node is not None else ""
        what = _spec.op_label(node.target) if node is not None and node.op == "call_function" else "graph"
        if fullgraph or node is None or node.op != "call_function":
            raise CompileError(f"torch.compile(backend='tpu'): cannot compile {what}: {e.why}"
                               + (f"\n  at {where}" if where else "")
                               + ("\n  (fullgraph=True asks for one graph; without it the graph is split "
                                  "around such ops)" if fullgraph else "")) from None
        return split_unsupported(gm, lambda sub, sub_name: compile_graph(sub, None, sub_name, options, True, label),
                                 kind)
    _stats.note_graph(kind)
    return CompiledGraph(spec, constants, options)


def _has_symbolic_shapes(gm):
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        value = node.meta.get("example_value", node.meta.get("val"))
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return True
        if isinstance(value, torch.Tensor) and any(not isinstance(d, int) for d in (*value.shape, *value.stride())):
            return True
    return False


def _input_key(args):
    return tuple((tuple(a.shape), tuple(a.stride()), a.dtype, a.device.type, a.requires_grad)
                 if isinstance(a, torch.Tensor) else (type(a).__name__, a) for a in args)


class SpecializedPerShape:
    """A dynamic-shape graph (dynamic=True, or dynamo's automatic dynamic after a shape change):
    XLA compiles static shapes, so each distinct input shape is traced and compiled once, at its
    first call, from the same dynamo graph; dynamo itself does not recompile."""

    def __init__(self, gm, compile_static, label):
        self.gm = gm
        self.compile_static = compile_static
        self.label = label
        self.compiled = {}
        self.last_key = None

    def __call__(self, *args):
        key = _input_key(args)
        fn = self.compiled.get(key)
        if fn is None:
            if self.last_key is not None:
                _stats.note_shape_specialization(self.label, self.last_key, key)
            fn = self.compile_static(self.gm, list(args))
            self.compiled[key] = fn
        self.last_key = key
        return fn(*args)


def tpu_backend(gm: torch.fx.GraphModule, example_inputs, options=None, mode=None, **_ignored):
    """The dynamo backend `tpu`. `options`: {"dump_dir": path} writes each graph's module."""
    from torch._dynamo.backends.common import aot_autograd

    options = dict(options or {})
    if os.environ.get("TORCH_TPU_DUMP_GRAPHS"):
        options.setdefault("dump_dir", os.environ["TORCH_TPU_DUMP_GRAPHS"])
    fullgraph = _fullgraph_requested()
    label = _graph_label(gm)
    _stats.note_dynamo_graph(gm, example_inputs, label)

    def compiler(kind):
        return lambda g, inputs: compile_graph(g, inputs, kind, options, fullgraph, label)

    def compile_static(graph, inputs):
        return aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                            inference_compiler=compiler("inference"), decompositions=decompositions,
                            keep_inference_input_mutations=True)(graph, inputs)

    if _has_symbolic_shapes(gm):
        return SpecializedPerShape(gm, compile_static, label)
    return compile_static(gm, example_inputs)
