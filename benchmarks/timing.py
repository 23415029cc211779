"""Wall-clock timing shared by the benchmarks: the first call (compiles) and a steady call."""
import time

import torch


def sync(device):
    if device == "tpu":
        torch.tpu.synchronize()


def timed(fn, device, iters):
    """(first call seconds, steady per-call seconds over `iters` calls after one warm call)."""
    start = time.perf_counter()
    fn()
    sync(device)
    first = time.perf_counter() - start
    fn()
    sync(device)
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    sync(device)
    return first, (time.perf_counter() - start) / iters
