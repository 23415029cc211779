"""What the compile backend did, for torch_tpu.metrics.report(): graphs compiled, graph splits
(ops run eagerly between compiled parts) and why dynamo compiled a graph again."""
import collections
import os

from .. import _C

graphs = collections.Counter()   # "forward" / "backward" / "inference" -> graphs compiled
splits = collections.Counter()   # op -> times a graph was split around it
split_reasons = {}
_last_inputs = {}                # graph structure -> input metas of its latest compile


def note_graph(kind):
    graphs[kind] += 1


def note_split(op, reason):
    splits[op] += 1
    split_reasons[op] = reason


def _describe(meta):
    shape, dtype = meta
    return f"{str(dtype).replace('torch.', '')}{list(shape)}"


def note_dynamo_graph(gm, example_inputs):
    """Records which input changed when dynamo hands us a graph it compiled before."""
    structure = tuple((n.op, str(n.target)) for n in gm.graph.nodes if n.op != "placeholder")
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    metas = [(tuple(t.shape), t.dtype) if hasattr(t, "shape") else (("value", t), type(t)) for t in example_inputs]
    previous = _last_inputs.get(structure)
    _last_inputs[structure] = metas
    if previous is None:
        return
    reason = "recompiled (guards failed)"
    for i, (old, new) in enumerate(zip(previous, metas)):
        if old != new:
            dims = [d for d, (a, b) in enumerate(zip(old[0], new[0])) if a != b] if len(old[0]) == len(new[0]) else []
            where = f" (dim {dims[0]})" if dims else ""
            name = names[i] if i < len(names) else str(i)
            reason = f"input {i} ({name}): {_describe(old)} -> {_describe(new)}{where}"
            break
    _C._count_recompile("torch.compile graph", reason)


def note_module(executable, options):
    dump_dir = options.get("dump_dir")
    if not dump_dir:
        return
    os.makedirs(dump_dir, exist_ok=True)
    safe = "".join(c if c.isalnum() else "_" for c in executable.name)[:80]
    path = os.path.join(dump_dir, f"{safe}_{executable.compiles}.mlir")
    with open(path, "w") as f:
        f.write(executable.last_module())


def reset():
    graphs.clear()
    splits.clear()
    split_reasons.clear()
