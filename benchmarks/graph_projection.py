"""libtpu's figures for one call of a model compiled with torch.compile(backend="tpu"): the helper
the projections share (qwen_image_projection.py, sd35_projection.py, llm_projection.py)."""
import torch
import torch._dynamo

from torch_tpu.compile import stats

import timing


def compiled_call(model, call):
    """Compiles `model` (fullgraph, static shapes), runs call(compiled) once on the device and
    returns libtpu's figures summed over the graphs it ran: {"seconds" (libtpu's estimate, the
    roofline bound for a graph it does not model), "flops", "bytes", "graphs", "unmodelled",
    "wall" (seconds of the XLA:CPU call, compile included)}. Raises if libtpu rejected a graph."""
    torch._dynamo.reset()
    stats.executables.clear()
    compiled = torch.compile(model, backend="tpu", fullgraph=True, dynamic=False)
    with torch.no_grad():
        _, wall = timing.timed(lambda: call(compiled), "tpu")
    found = [exe.last_aot() for exe in stats.executables if exe.last_aot() and exe.runs]
    if not found or not all(a["accepted"] for a in found):
        raise RuntimeError(f"libtpu did not accept the compiled graph: {[a['message'] for a in found]}")
    modelled = [a["optimal_seconds"] > 0 for a in found]
    return {"seconds": sum(a["optimal_seconds"] if ok else a["roofline_seconds"] for a, ok in zip(found, modelled)),
            "flops": sum(a["flops"] for a in found), "bytes": sum(a["bytes_accessed"] for a in found),
            "graphs": len(found), "unmodelled": modelled.count(False), "wall": wall}


def difference(a, b, keys):
    return {k: a[k] - b[k] for k in keys}
