"""Wall-clock timing shared by the benchmarks: the first call (compiles) and steady calls.

This is a shared 2-core VM whose speed drifts by ±30-50% over seconds to minutes. Timing each
variant of a workload in turn lets such a drift land on one variant and decide a ratio, so the
steady times are measured interleaved: each round times one block of every variant back to
back, and a ratio is the median of the per-round ratios."""
import statistics
import time

import torch


def sync(device):
    if device == "tpu":
        torch.tpu.synchronize()
    elif device == "cuda":
        torch.cuda.synchronize()


def timed(fn, device):
    """(fn's result, seconds of this one call with the device synchronized after it)."""
    start = time.perf_counter()
    result = fn()
    sync(device)
    return result, time.perf_counter() - start


def timed_host_and_device(fn, device):
    """(fn's result, seconds until fn returned (host work: tracing, dispatch, enqueueing), seconds
    until the device finished too)."""
    start = time.perf_counter()
    result = fn()
    host = time.perf_counter() - start
    sync(device)
    return result, host, time.perf_counter() - start


def best_block(fn, device, iters, seconds):
    """Per-call seconds of the fastest block of `iters` calls within `seconds`: a reference rate
    (the host's matmul rate) rather than a workload's steady time."""
    best = float("inf")
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        best = min(best, _block(fn, device, iters))
    return best


def first_call(fn, device):
    """Seconds of the first call (tracing, compiling), then one more call to warm caches."""
    start = time.perf_counter()
    fn()
    sync(device)
    first = time.perf_counter() - start
    fn()
    sync(device)
    return first


def _block(fn, device, iters):
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    sync(device)
    return (time.perf_counter() - start) / iters


def interleaved(runs, iters, rounds=5):
    """{name: per-call seconds of each round} for runs = {name: (fn, device)}, every round timing
    one block of `iters` calls of each run in turn.

    Each round starts one run later, so a run does not always follow the same one, and one
    untimed call precedes every block: the calls right after a switch of run pay for the previous
    run's leftovers (PyTorch CPU's worker threads still spinning, caches holding its data); the
    block after a PyTorch CPU block measured 15-30% slower without it."""
    names = list(runs)
    samples = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn, device = runs[name]
            fn()
            sync(device)
            samples[name].append(_block(fn, device, iters))
    return samples


def steady(samples):
    """Per-call seconds: the median over rounds."""
    return statistics.median(samples)


def ratio(numerator, denominator):
    """Median of the per-round ratios of two interleaved runs."""
    return statistics.median(a / b for a, b in zip(numerator, denominator))


def compare(samples, scale=1.0):
    """What compile.py and diffusion.py report from interleaved() samples keyed (device,
    compiled): each variant's steady per-call time times `scale`, "comp/eager" (our eager over
    our compiled) and, when Inductor ran, "comp/ind." (Inductor over our compiled)."""
    result = {key: steady(per_call) * scale for key, per_call in samples.items()}
    result["comp/eager"] = ratio(samples[("tpu", False)], samples[("tpu", True)])
    if ("cpu", True) in samples:
        result["comp/ind."] = ratio(samples[("cpu", True)], samples[("tpu", True)])
    return result
