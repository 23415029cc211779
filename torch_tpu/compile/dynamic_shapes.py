"""Dynamic-shape graphs (dynamic=True, or Dynamo's automatic dynamic after a shape change).

XLA compiles static shapes: a graph whose inputs vary in one size runs over that size's bucket
where that is exact (bucketed_graphs.py); otherwise the symbolic graph is traced and compiled
once per distinct input shape at its first call. Dynamo itself does not recompile
(docs/compile.md).
"""
import copy

import torch
import torch.fx

from . import bucketed_graphs as _bucketed
from . import stats as _stats


def has_symbolic_shapes(gm):
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        value = node.meta.get("example_value", node.meta.get("val"))
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return True
        if isinstance(value, torch.Tensor) and any(not isinstance(d, int) for d in (*value.shape, *value.stride())):
            return True
    return False


def _reads_number(node):
    return ((node.op == "call_method" and node.target == "item")
            or (node.op == "call_function" and node.target in (torch.ops.aten._local_scalar_dense.default,
                                                                torch.ops.aten.item.default)))


def _number_inputs(gm):
    """Positions of inputs the graph reads as numbers (x.item()). With dynamic=True Dynamo passes
    Python floats it does not specialise (an RMSNorm's eps) as 0-d tensors read by .item(), which
    has no value at static shapes; like a shape, each distinct value is compiled once."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return [i for i, ph in enumerate(placeholders) if any(_reads_number(u) for u in ph.users)]


def _with_numbers(gm, positions, args):
    """A copy of gm whose .item() reads of args[positions] are those values."""
    graph = copy.deepcopy(gm.graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for i in positions:
        value = args[i].item()
        for read in [u for u in placeholders[i].users if _reads_number(u)]:
            for user in list(read.users):
                user.args = torch.fx.node.map_arg(user.args, lambda a: value if a is read else a)
                user.kwargs = torch.fx.node.map_arg(user.kwargs, lambda a: value if a is read else a)
            graph.erase_node(read)
    return torch.fx.GraphModule(gm, graph)


class SpecializedPerShape:
    """A dynamic-shape graph (dynamic=True, or dynamo's automatic dynamic after a shape change):
    XLA compiles static shapes, so each distinct input shape is traced and compiled once, at its
    first call, from the same dynamo graph; dynamo itself does not recompile."""

    def __init__(self, gm, compile_static, label, bucketed=None):
        self.gm = gm
        self.bucketed = bucketed  # the per-bucket path (bucketed_graphs.py), tried first
        self.compile_static = compile_static
        self.label = label
        self.compiled = {}
        self.last_key = None
        self.number_inputs = _number_inputs(gm)
        self.with_numbers = {}  # number values -> graph

    def __call__(self, *args):
        numbers = tuple(args[i].item() for i in self.number_inputs)
        if self.bucketed is not None:
            outputs = self.bucketed.call(args, numbers, lambda: self._graph_with(numbers, args))
            if outputs is not _bucketed.NOT_TAKEN:
                return outputs
        key = _bucketed.input_key(args) + numbers
        fn = self.compiled.get(key)
        if fn is None:
            if self.last_key is not None:
                _stats.note_shape_specialization(self.label, self.last_key, key)
            fn = self.compile_static(self._graph_with(numbers, args), list(args))
            self.compiled[key] = fn
        self.last_key = key
        return fn(*args)

    def _graph_with(self, numbers, args):
        """The graph with its .item() reads of number inputs replaced by `numbers`."""
        if not self.number_inputs:
            return self.gm
        gm = self.with_numbers.get(numbers)
        if gm is None:
            gm = self.with_numbers[numbers] = _with_numbers(self.gm, self.number_inputs, args)
        return gm
