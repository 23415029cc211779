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

    def delta(*keys):
        return sum(after[k] - before[k] for k in keys) * 1e6
    return {"us": delta("estimated_seconds", "roofline_only_seconds"),
            "roofline_us": delta("roofline_seconds", "roofline_only_seconds"),
            "launches": after["ops_run"] - before["ops_run"]}
