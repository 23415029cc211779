"""Wall-clock timing shared by the benchmarks: the first call (compiles) and a steady call."""
import statistics
import time

import torch


def sync(device):
    if device == "tpu":
        torch.tpu.synchronize()


def timed(fn, device, iters, repeats=5):
    """(first call seconds, steady per-call seconds).

    The steady time is the median over `repeats` blocks of `iters` calls, after one warm call:
    on a shared 2-core machine single blocks of millisecond calls vary by ±20%, and the median
    of blocks keeps one slow block (another process, a GC pause) out of the ratios."""
    start = time.perf_counter()
    fn()
    sync(device)
    first = time.perf_counter() - start
    fn()
    sync(device)
    blocks = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        sync(device)
        blocks.append((time.perf_counter() - start) / iters)
    return first, statistics.median(blocks)
