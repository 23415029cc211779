"""Dynamic-shape graphs (dynamic=True, or Dynamo's automatic dynamic after a shape change).

XLA compiles static shapes: the symbolic graph is traced and compiled once per distinct input
shape at its first call, and Dynamo itself does not recompile (docs/compile.md).
"""
import torch

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
