"""libtpu's figures for one call of a model compiled with torch.compile(backend="tpu"): the helper
the projections share (qwen_image_projection.py, sd35_projection.py, llm_projection.py)."""
import os
import sys

import torch
import torch._dynamo

from torch_tpu.compile import stats

import timing

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from hbm_traffic import hbm_traffic, libtpu_dumps  # noqa: E402


def compiled_call(model, call, dump_dir=None):
    """Compiles `model` (fullgraph, static shapes), runs call(compiled) once on the device and
    returns libtpu's figures summed over the graphs it ran: {"seconds" (libtpu's estimate, the
    roofline bound for a graph it does not model), "flops", "bytes", "graphs", "unmodelled",
    "wall" (seconds of the XLA:CPU call, compile included)}, and with `dump_dir` (where XLA_FLAGS
    has libtpu dump its modules) "hbm": the bytes that cross HBM in libtpu's optimized modules
    (tools/hbm_traffic.py; NaN if none was dumped). Raises if libtpu rejected a graph."""
    dumped = libtpu_dumps(dump_dir) if dump_dir else set()
    torch._dynamo.reset()
    stats.executables.clear()
    compiled = torch.compile(model, backend="tpu", fullgraph=True, dynamic=False)
    with torch.no_grad():
        _, wall = timing.timed(lambda: call(compiled), "tpu")
    found = [exe.last_aot() for exe in stats.executables if exe.last_aot() and exe.runs]
    if not found or not all(a["accepted"] for a in found):
        raise RuntimeError(f"libtpu did not accept the compiled graph: {[a['message'] for a in found]}")
    modelled = [a["optimal_seconds"] > 0 for a in found]
    new = libtpu_dumps(dump_dir) - dumped if dump_dir else set()
    hbm = sum(hbm_traffic(open(f).read())["hbm"] for f in new) if new else float("nan")
    return {"hbm": hbm, "seconds": sum(a["optimal_seconds"] if ok else a["roofline_seconds"] for a, ok in zip(found, modelled)),
            "flops": sum(a["flops"] for a in found), "bytes": sum(a["bytes_accessed"] for a in found),
            "graphs": len(found), "unmodelled": modelled.count(False), "wall": wall}


def difference(a, b, keys):
    return {k: a[k] - b[k] for k in keys}
