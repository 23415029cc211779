"""fullgraph=False: the graph is split around nodes without a lowering rule.

Maximal groups of lowerable nodes become compiled sub-graphs (one module each); the remaining
nodes run eagerly on the tpu (the eager engine, or its CPU fallback), and each one is counted in
the metrics as a graph split.
"""
import torch
import torch.fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupport

from . import graph_spec as _spec
from . import stats as _stats


class _Lowerable(OperatorSupport):
    def is_node_supported(self, submodules, node):
        return node.op == "call_function" and _spec.unsupported_reason(node) is None


class _CompiledPart(torch.nn.Module):
    def __init__(self, compiled, single_output):
        super().__init__()
        self.compiled = compiled
        self.single_output = single_output

    def forward(self, *args):
        outs = self.compiled(list(args))
        return outs[0] if self.single_output else tuple(outs)


def split_unsupported(gm: torch.fx.GraphModule, compile_part, kind: str):
    """A boxed callable running `gm` with its lowerable parts compiled by compile_part(sub, kind)."""
    partitioner = CapabilityBasedPartitioner(gm, _Lowerable(), allows_single_node_partition=True)
    fused = partitioner.fuse_partitions(partitioner.propose_partitions())
    for node in fused.graph.nodes:
        reason = _spec.unsupported_reason(node) if node.op == "call_function" else None
        if reason is not None:
            _stats.note_split(_spec.op_label(node.target), "collective" if reason == _spec.COLLECTIVE else reason,
                              on_host=reason == _spec.HOST_OP)
        if node.op != "call_module":
            continue
        sub = getattr(fused, node.target)
        placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
        for ph, arg in zip(placeholders, node.args):
            ph.meta["val"] = arg.meta.get("val")
        out = next(n for n in sub.graph.nodes if n.op == "output")
        single = not isinstance(out.args[0], (tuple, list))
        setattr(fused, node.target, _CompiledPart(compile_part(sub, f"{kind} part"), single))
    fused.recompile()

    def run(args):
        inputs = list(args)
        args.clear()
        return fused(*inputs)

    run._boxed_call = True
    return run
