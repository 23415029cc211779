"""libtpu's v6e estimates of what one call ran, from the AOT check (TORCH_TPU_AOT_CHECK)."""
import torch


def eager_call_us(run):
    """libtpu's v6e figures for one eager call of `run`, summed over every op module it launches
    (each op is its own executable, so nothing fuses across ops), or None when the AOT check is
    off: {"us": libtpu's estimates, the roofline bound standing in for modules it does not model;
    "roofline_us": the roofline bounds of all of them (to set beside a graph that has only a
    roofline bound); "launches"}. Per-launch host overhead, which a TPU adds on top, is in neither.
    """
    from torch_tpu import aot
    before = aot.stats()
    run()
    torch.tpu.synchronize()
    after = aot.stats()
    if after["error"] or not after["topology"]:
        return None
    step = aot.between(before, after)
    return {"us": step["seconds"] * 1e6, "roofline_us": step["roofline_seconds"] * 1e6, "launches": step["ops"],
            "unmodelled": step["unmodelled"]}


def compiled_graphs_us():
    """libtpu's v6e figure for one call of the compiled graphs that have run (torch_tpu.compile's
    stats.executables; fw+bw+optimizer graphs summed): (µs, whether some graph has only a
    roofline bound, counted instead of libtpu's estimate), or None when none has a figure."""
    from torch_tpu.compile import stats
    total, roofline_only, found = 0.0, False, False
    for exe in list(stats.executables):
        aot = exe.last_aot()
        if not aot or not aot["accepted"] or exe.runs == 0:
            continue
        found = True
        if aot["optimal_seconds"] >= 0:
            total += aot["optimal_seconds"] * 1e6
        else:
            total += aot["roofline_seconds"] * 1e6
            roofline_only = True
    return (total, roofline_only) if found else None
