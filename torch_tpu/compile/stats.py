"""What the compile backend did, for torch_tpu.metrics.report(): graphs compiled, graph splits
(ops run eagerly between compiled parts) and why dynamo compiled a graph again."""
import collections
import os
import weakref

import torch

from .. import _C

graphs = collections.Counter()   # "forward" / "backward" / "inference" -> graphs compiled
splits = collections.Counter()   # op -> times a graph was split around it (no lowering)
collectives = collections.Counter()  # op -> collectives a graph was split around (graph_spec.COLLECTIVE)
split_reasons = {}
host_ops = collections.Counter()  # op -> graph nodes left to the CPU because their tensors are CPU tensors
_last_inputs = {}                # graph structure -> input metas of its latest compile
executables = weakref.WeakSet()  # every live _C._GraphExecutable


def note_graph(kind):
    graphs[kind] += 1


def note_split(op, reason, on_host=False):
    if on_host:
        host_ops[op] += 1
        return
    if reason == "collective":
        collectives[op] += 1
        return
    splits[op] += 1
    split_reasons[op] = reason


def _describe(meta):
    shape, dtype = meta
    return f"{str(dtype).replace('torch.', '')}{list(shape)}"


def note_dynamo_graph(gm, example_inputs, label="graph"):
    """Records which input changed when dynamo hands us a graph it compiled before."""
    structure = tuple((n.op, str(n.target)) for n in gm.graph.nodes if n.op != "placeholder")
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    symbolic = any(not isinstance(d, int) for n in gm.graph.nodes if n.op == "placeholder"
                   for v in [n.meta.get("example_value")] if isinstance(v, torch.Tensor) for d in v.shape)
    # Opaque inputs (a DeviceMesh of a tensor-parallel model, a ProcessGroup) have no dtype.
    metas = [(tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else (("value", t), type(t))
             for t in example_inputs]
    previous = _last_inputs.get(structure)
    _last_inputs[structure] = metas
    if previous is None:
        return
    reason = "recompiled (guards failed)"
    if symbolic:
        reason = "dynamo made input shapes dynamic; torch-tpu specialises each new shape at run time"
    for i, (old, new) in ([] if symbolic else enumerate(zip(previous, metas))):
        if old != new:
            dims = [d for d, (a, b) in enumerate(zip(old[0], new[0])) if a != b] if len(old[0]) == len(new[0]) else []
            where = f" (dim {dims[0]})" if dims else ""
            name = names[i] if i < len(names) else str(i)
            reason = f"input {i} ({name}): {_describe(old)} -> {_describe(new)}{where}"
            break
    _C._count_recompile(f"torch.compile graph ({label})", reason)


def note_shape_specialization(label, old_key, new_key):
    """A dynamic-shape graph met a new input shape (compiled once more, at run time)."""
    reason = "new input shapes"
    for i, (old, new) in enumerate(zip(old_key, new_key)):
        if old != new:
            if len(old) == 5 and len(new) == 5 and len(old[0]) == len(new[0]):
                dims = [d for d, (a, b) in enumerate(zip(old[0], new[0])) if a != b]
                where = f" (dim {dims[0]})" if dims else ""
                reason = f"input {i}: {_describe((old[0], old[2]))} -> {_describe((new[0], new[2]))}{where}"
            else:
                reason = f"input {i}: {old[-1]!r} -> {new[-1]!r}"
            break
    _C._count_recompile(f"torch.compile graph ({label}), dynamic shapes specialised", reason)


bucket_refusals = collections.Counter()  # reason -> dynamic graphs that kept the per-shape path
bucketed_graphs = collections.Counter()  # capacity -> graphs compiled for that bucket


def note_bucket_refusal(label, reason):
    """A dynamic-shape graph that cannot run per bucket (bucketed_graphs.py): compiled per shape."""
    bucket_refusals[f"{label}: {reason}"] += 1


def note_bucketed_graph(capacity):
    bucketed_graphs[capacity] += 1


_dumped = 0


def note_module(executable, options):
    executables.add(executable)
    dump_dir = options.get("dump_dir")
    if not dump_dir:
        return
    os.makedirs(dump_dir, exist_ok=True)
    global _dumped
    _dumped += 1  # graphs recompiled under the same label (guards failed) get their own files
    safe = "".join(c if c.isalnum() else "_" for c in executable.name)[:80]
    path = os.path.join(dump_dir, f"{_dumped:04d}_{safe}_{executable.compiles}.mlir")
    with open(path, "w") as f:
        f.write(executable.last_module())


def reset():
    graphs.clear()
    splits.clear()
    split_reasons.clear()
    collectives.clear()
    host_ops.clear()
    bucket_refusals.clear()
    bucketed_graphs.clear()


def report_lines():
    """The torch.compile section of torch_tpu.metrics.report()."""
    if not graphs and not executables and not bucket_refusals:
        return []
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(graphs.items()))
    lines = [f"  torch.compile graphs   {sum(graphs.values())} ({kinds})"]
    for exe in sorted(executables, key=lambda e: -e.runs)[:10]:
        aot = exe.last_aot()
        estimate = ""
        if aot and aot["accepted"] and aot["optimal_seconds"] >= 0:
            estimate = f", libtpu estimate {aot['optimal_seconds'] * 1e6:.1f} us/run"
        lines.append(f"    {exe.name}: {exe.compiles} compiled, {exe.runs} runs{estimate}")
    if splits:
        lines.append(f"  graph splits           {sum(splits.values())} (ops without a lowering ran eagerly)")
        for op, n in splits.most_common(10):
            lines.append(f"    {op:<40} {n}  {split_reasons.get(op, '')}")
    if collectives:
        lines.append(f"  collectives in graphs  {sum(collectives.values())} (run through the tpu c10d backend "
                     "between compiled parts)")
        for op, n in collectives.most_common(4):
            lines.append(f"    {op:<40} {n}")
    if bucketed_graphs:
        buckets = ", ".join(f"{c} ({n})" for c, n in sorted(bucketed_graphs.items()))
        lines.append(f"  graphs per bucket      {sum(bucketed_graphs.values())} (capacity (graphs): {buckets})")
    if bucket_refusals:
        lines.append(f"  dynamic graphs per shape {sum(bucket_refusals.values())} (not exact over a bucket; first reasons)")
        for reason, n in bucket_refusals.most_common(3):
            lines.append(f"    {reason[:150]}  x{n}")
    if host_ops:
        lines.append(f"  host ops in graphs     {sum(host_ops.values())} (nodes on CPU tensors, run on the CPU)")
    return lines
