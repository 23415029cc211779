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

from . import graph_spec as _spec
from . import stats as _stats
from .compiled_graph import CompiledGraph, lift_constants
from .fused_attention import DECOMPOSITIONS as FUSED_ATTENTION
from .grouped_attention import drop_repeated_kv
from .bucketed_graphs import BucketedGraph
from .trace_comparison import Bucketing, NotBucketable, compare_traces
from .dynamic_shapes import SpecializedPerShape, has_symbolic_shapes
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
    """PyTorch's core ATen decompositions of the operators we have no rule for, and the fused
    attention ops rewritten to the ones we have rules for (fused_attention.py)."""
    from torch._decomp import core_aten_decompositions
    table = {op: fn for op, fn in core_aten_decompositions().items()
             if isinstance(op, torch._ops.OpOverload) and not _spec.rule_name(op)}
    table.update(FUSED_ATTENTION)
    table[_inductor_fma()] = _fma
    return table


def _inductor_fma():
    # Dynamo itself rewrites `t.addcmul_(a, b, value=v)` and `t.add_(x, alpha=tensor)` to
    # prims.fma (torch._inductor.inductor_prims), so graphs of plain optimizer code carry it.
    from torch._inductor import inductor_prims
    return inductor_prims.fma


def _fma(a, b, c):
    """prims.fma as a * b + c: the product is rounded before the add (StableHLO has no fused
    multiply-add), so a result may differ from a fused one by the product's rounding."""
    return torch.ops.aten.add.Tensor(torch.ops.aten.mul.Tensor(a, b), c)


def _only_collectives_unsupported(gm):
    reasons = {_spec.unsupported_reason(n) for n in gm.graph.nodes if n.op == "call_function"} - {None}
    return reasons == {_spec.COLLECTIVE}


def _graph_label(gm):
    """"file.py:12" of the first traced node: names the graph in metrics and errors."""
    for node in gm.graph.nodes:
        where = _spec.source_line(node) if node.op == "call_function" else ""
        if where:
            return where.split(" in ")[0]
    return type(gm).__name__


def compile_graph(gm: torch.fx.GraphModule, example_inputs, kind: str, options: dict, fullgraph: bool,
                  label: str = "", bucketing: Bucketing = None):
    """AOTAutograd's compiler for one forward, backward or inference graph (`bucketing`: an
    inference graph traced at a bucket's capacity, compiled once for the bucket)."""
    constants = lift_constants(gm)
    _spec.lift_host_scalar_math(gm)
    drop_repeated_kv(gm)
    name = f"compiled {kind} graph ({label or _graph_label(gm)})"
    try:
        spec = _spec.graph_spec(gm, name, example_inputs, bucketing)
    except _spec.Unsupported as e:
        if bucketing is not None:
            raise NotBucketable(f"an op without a lowering: {e.why}") from None
        node = e.node
        where = _spec.source_line(node) if node is not None else ""
        what = _spec.op_label(node.target) if node is not None and node.op == "call_function" else "graph"
        # Collectives split the graph even under fullgraph=True (graph_spec.COLLECTIVE); any other
        # op without a rule is still an error there.
        fullgraph = fullgraph and not _only_collectives_unsupported(gm)
        if fullgraph or node is None or node.op != "call_function":
            raise CompileError(f"torch.compile(backend='tpu'): cannot compile {what}: {e.why}"
                               + (f"\n  at {where}" if where else "")
                               + ("\n  (fullgraph=True asks for one graph; without it the graph is split "
                                  "around such ops)" if fullgraph else "")) from None
        return split_unsupported(gm, lambda sub, sub_name: compile_graph(sub, None, sub_name, options, True, label),
                                 kind)
    _stats.note_graph(kind)
    return CompiledGraph(spec, constants, options, _spec.graph_device(gm),
                         runtime_length=bucketing.length if bucketing else None)


KNOWN_OPTIONS = {"dump_dir": "a folder; every compiled module is written there"}


def tpu_backend(gm: torch.fx.GraphModule, example_inputs, options=None, mode=None, **_ignored):
    """The dynamo backend `tpu`. `options`: {"dump_dir": path} writes each graph's module."""
    from torch._dynamo.backends.common import aot_autograd

    options = dict(options or {})
    unknown = sorted(set(options) - set(KNOWN_OPTIONS))
    if unknown:  # a misspelt option silently doing nothing is worse than an error (Inductor raises too)
        raise RuntimeError(f"torch.compile(backend='tpu'): unknown option(s) {unknown}; known options: "
                           + ", ".join(f"{k!r} ({v})" for k, v in KNOWN_OPTIONS.items()))
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

    def aot_inference(graph, inputs, inference_compiler):
        def needs_gradients(g, _inputs):
            raise NotBucketable("the graph needs gradients")
        try:
            return aot_autograd(fw_compiler=needs_gradients, bw_compiler=needs_gradients,
                                inference_compiler=inference_compiler, decompositions=decompositions,
                                keep_inference_input_mutations=True)(graph, inputs)
        except NotBucketable:
            raise
        except Exception as e:  # a trace that fails at a size the user did not call with
            raise NotBucketable(f"tracing failed: {type(e).__name__}: {str(e)[:200]}") from None

    def trace_inference(graph, inputs):
        """The inference ATen graph AOTAutograd makes for `inputs` (compared, never run)."""
        captured = []
        aot_inference(graph, inputs, lambda g, _inputs: captured.append(g) or g)
        return captured[0]

    def compile_bucket(graph, capacity_inputs, true_graph, length, capacity):
        made = []

        def inference(g, example):
            made.append(compare_traces(true_graph, g, length, capacity))
            return compile_graph(g, example, "inference", options, True, label, bucketing=made[0])
        fn = aot_inference(graph, capacity_inputs, inference)
        _stats.note_bucketed_graph(capacity)
        return fn, made[0]

    if has_symbolic_shapes(gm):
        return SpecializedPerShape(gm, compile_static, label,
                                   BucketedGraph.for_graph(gm, trace_inference, compile_bucket, label))
    return compile_static(gm, example_inputs)
