"""backend="inductor" on tpu tensors: Inductor's graph runs as one of our compiled graphs.

Inductor generates no code for `tpu` (PyTorch's own `tpu` generator is Pallas, for JAX), but it
takes an out-of-tree device's graph pass (`register_backend_for_device(..., device_custom_pass=)`,
see torch_tpu/_inductor_device.py). The pass gets the post-grad graph (functional ATen, with
`copy_` into mutated inputs) of every graph that holds tpu tensors; here it is compiled by our
backend (backend.compile_graph) and the graph's body replaced by one call of a custom op that
runs it. Inductor then has only that call to emit (an extern kernel in its Python wrapper), so
the user's torch.compile(backend="inductor"), Transformers' CompileConfig() default included,
runs on tpu unchanged.

Compiled graphs live in this process: the pass's cache id is unique per process, so Inductor's
on-disk FX graph cache never hands a later process a wrapper whose graph it does not hold.
"""
import itertools
import operator
import os
import threading
import warnings

import torch
import torch.fx

from .backend import compile_graph

_lock = threading.Lock()
_graphs = {}  # key -> (CompiledGraph, [(sizes, strides, dtype, device)] of its results)
_keys = itertools.count()
PROCESS_ID = f"torch_tpu.inductor_graphs.{os.getpid()}.{id(_graphs)}"


class UnsupportedInductorGraph(RuntimeError):
    """An Inductor graph on tpu that this path does not take (non-tensor inputs or results)."""


class _PerShape:
    """A graph with symbolic sizes or integer inputs (Dynamo's dynamic shapes and ints: dynamic=True,
    or dynamic=None after a shape changed): traced with the call's sizes and values and compiled
    once per distinct tuple of input shapes and ints, as backend="tpu" does (dynamic_shapes.py)."""

    def __init__(self, gm, positions):
        self.gm = gm
        self.positions = positions  # where the ints go among the graph's inputs
        self.compiled = {}

    def __call__(self, tensors, ints):
        args = list(tensors)
        for position, value in zip(self.positions, ints):
            args.insert(position, int(value))
        key = (tuple(int(i) for i in ints),
               tuple((tuple(t.shape), tuple(t.stride()), t.dtype) for t in tensors))
        fn = self.compiled.get(key)
        if fn is None:
            from torch.fx.experimental.proxy_tensor import make_fx

            # Traced on fake tensors (a real trace would run the graph, writes included); sizes
            # and ints become constants of a static graph.
            traced = make_fx(self.gm, tracing_mode="fake")(*args)
            fn = compile_graph(traced, args, "inductor", {}, False)  # it skips the int inputs
            self.compiled[key] = fn
        return fn(args)


def _run(key, inputs, ints):
    compiled, _ = _graphs[key]
    outputs = list(compiled(list(inputs), list(ints)) if isinstance(compiled, _PerShape) else compiled(list(inputs)))
    # A custom op's results may not alias its inputs (nor each other): copy any that do.
    seen = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor) and t.numel()}
    for i, t in enumerate(outputs):
        if isinstance(t, torch.Tensor) and t.numel():
            ptr = t.untyped_storage().data_ptr()
            if ptr in seen:
                outputs[i] = t.clone()
            else:
                seen.add(ptr)
    return outputs


def _fake(key, inputs, ints):
    _, results = _graphs[key]
    return [torch.empty_strided(sizes, strides, dtype=dtype, device=device) for sizes, strides, dtype, device in results]


@torch.library.custom_op("torch_tpu::inductor_graph", mutates_args=())
def inductor_graph(key: int, inputs: list[torch.Tensor], ints: list[int]) -> list[torch.Tensor]:
    return _run(key, inputs, ints)


inductor_graph.register_fake(_fake)

# A graph that writes into its inputs (a KV cache, a buffer) runs as two calls, as Inductor takes
# no custom op that both mutates and returns a list: the first runs the graph, writes the inputs
# and keeps the results; the second, reading the written inputs (so Inductor orders it after),
# hands the results over.
_held = threading.local()


@torch.library.custom_op("torch_tpu::inductor_graph_writes", mutates_args=("inputs",))
def inductor_graph_writes(key: int, inputs: list[torch.Tensor], ints: list[int]) -> None:
    if not hasattr(_held, "results"):
        _held.results = {}
    _held.results[key] = _run(key, inputs, ints)


@torch.library.custom_op("torch_tpu::inductor_graph_results", mutates_args=())
def inductor_graph_results(key: int, written: list[torch.Tensor], ints: list[int]) -> list[torch.Tensor]:
    return _held.results.pop(key)


@inductor_graph_writes.register_fake
def _(key, inputs, ints):
    return None


inductor_graph_results.register_fake(_fake)


def _static_tensor(value):
    return isinstance(value, torch.Tensor) and not any(isinstance(s, torch.SymInt) for s in (*value.shape, *value.stride()))


def _mutates_an_input(gm):
    placeholders = {n for n in gm.graph.nodes if n.op == "placeholder"}
    return any(n.op == "call_function" and n.target is torch.ops.aten.copy_.default and n.args[0] in placeholders
               for n in gm.graph.nodes)


_announced = False


def _announce_once():
    global _announced
    if not _announced:
        _announced = True
        warnings.warn("torch-tpu: backend=\"inductor\" on tpu tensors compiles with torch-tpu's compiler after "
                      "Inductor's graph passes (Inductor has no tpu code generator). backend=\"tpu\" skips those "
                      "passes; TORCH_TPU_INDUCTOR=error makes this an error instead.", stacklevel=2)


def _host_int_expression(node):
    """Whether `node` is integer arithmetic on the graph's int inputs (no tensor in it)."""
    if node.op == "placeholder":
        return isinstance(node.meta.get("val"), torch.SymInt)
    if node.op != "call_function" or not isinstance(node.meta.get("val"), (torch.SymInt, int)):
        return False
    return all(_host_int_expression(a) for a in node.all_input_nodes)


def _copy_expression(graph, node, env):
    if node not in env:
        for a in node.all_input_nodes:
            _copy_expression(graph, a, env)
        env[node] = graph.node_copy(node, lambda a: env[a])
    return env[node]


def replace_with_compiled_graph(gm: torch.fx.GraphModule) -> None:
    """Compiles `gm` (Inductor's post-grad graph) with our backend and makes its body one call
    of the compiled graph."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    output = next(n for n in gm.graph.nodes if n.op == "output")
    results = list(output.args[0]) if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
    values = [n.meta.get("val") for n in placeholders]
    int_positions = [i for i, v in enumerate(values) if isinstance(v, torch.SymInt)]
    if not all(isinstance(v, torch.Tensor) for i, v in enumerate(values) if i not in int_positions):
        raise UnsupportedInductorGraph(
            "backend=\"inductor\" on tpu tensors takes graphs of tensor and int inputs only (this one has "
            f"{[type(v).__name__ for v in values]}): compile with backend=\"tpu\"")
    symbolic = bool(int_positions) or not all(_static_tensor(v) for i, v in enumerate(values) if i not in int_positions)
    # Results computed by the graph (each once); inputs returned as they are stay graph inputs.
    computed, host_ints = [], []
    for r in results:
        if isinstance(r, torch.fx.Node) and r.op != "placeholder" and r not in computed:
            if _host_int_expression(r):  # a size computed from the ints: Inductor's wrapper computes it
                host_ints.append(r)
                continue
            if not isinstance(r.meta.get("val"), torch.Tensor):
                raise UnsupportedInductorGraph(
                    f"backend=\"inductor\" on tpu tensors: graph result {r.name} is not a tensor; "
                    "compile with backend=\"tpu\"")
            computed.append(r)
        elif r is not None and not isinstance(r, torch.fx.Node):
            raise UnsupportedInductorGraph(f"backend=\"inductor\" on tpu tensors: unsupported graph result {r!r}")
    body, copies = torch.fx.Graph(), {}
    body.graph_copy(gm.graph, copies)  # every node but the output
    body.output(tuple(copies[r] for r in computed))
    if symbolic:
        compiled = _PerShape(torch.fx.GraphModule(gm, body), int_positions)
    else:
        compiled = compile_graph(torch.fx.GraphModule(gm, body), values, "inductor", {}, False)
    with _lock:
        key = next(_keys)
        _graphs[key] = (compiled, [(tuple(v.shape), tuple(v.stride()), v.dtype, v.device)
                                   for v in (r.meta["val"] for r in computed)])
    graph = torch.fx.Graph()
    env = {}
    for n in placeholders:
        env[n] = graph.placeholder(n.name)
        env[n].meta = dict(n.meta)
    inputs = [env[n] for i, n in enumerate(placeholders) if i not in int_positions]
    ints = [env[placeholders[i]] for i in int_positions]
    if _mutates_an_input(gm):
        graph.call_function(inductor_graph_writes._opoverload, (key, inputs, ints))
        call = graph.call_function(inductor_graph_results._opoverload, (key, inputs, ints))
    else:
        call = graph.call_function(inductor_graph._opoverload, (key, inputs, ints))
    for r in host_ints:
        _copy_expression(graph, r, env)
    call.meta["val"] = [r.meta["val"] for r in computed]
    for i, r in enumerate(computed):
        env[r] = graph.call_function(operator.getitem, (call, i))
        env[r].meta = dict(r.meta)
    out = tuple(env[r] if r is not None else None for r in results)
    graph.output(out if isinstance(output.args[0], (list, tuple)) else out[0])
    gm.graph = graph
    gm.recompile()
    _announce_once()
