"""libtpu's v6e estimates of what one call ran, from the AOT check (TORCH_TPU_AOT_CHECK)."""
import torch


def eager_call_us(run):
    """(µs, launches) for one eager call of `run`: the sum of libtpu's estimates over every op
    module it launches (each op is its own executable, so nothing fuses across ops), the roofline
    bound standing in for modules libtpu does not model. Per-launch host overhead, which a TPU
    adds on top, is not in it. None when the AOT check is off."""
    from torch_tpu import aot
    before = aot.stats()
    run()
    torch.tpu.synchronize()
    after = aot.stats()
    if after["error"] or not after["topology"]:
        return None
    seconds = sum(after[k] - before[k] for k in ("estimated_seconds", "roofline_only_seconds"))
    return seconds * 1e6, after["ops_run"] - before["ops_run"]
