"""Host overhead, throughput and first-compile latency on `tpu` vs PyTorch CPU eager.

Run: `make bench` (or .venv/bin/python benchmarks/run.py). Prints a table with ratios.
On this project's CI hosts the `tpu` device is XLA:CPU, so ratios compare two CPU backends.
"""
import os
import sys
import tempfile

os.environ.setdefault("TORCH_TPU_QUIET", "1")
os.environ.setdefault("TORCH_TPU_CACHE_DIR", tempfile.mkdtemp(prefix="tpu_bench_cache_"))

import torch
import torch_tpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import interleaved, steady  # noqa: E402


def per_call(tpu_fn, cpu_fn, iters):
    """Steady seconds per call of the tpu and the CPU variant, timed interleaved (timing.py)."""
    samples = interleaved({"tpu": (tpu_fn, "tpu"), "cpu": (cpu_fn, "cpu")}, iters)
    return steady(samples["tpu"]), steady(samples["cpu"])


def main():
    rows = []
    a_cpu = torch.randn(8)
    a_tpu = a_cpu.to("tpu")
    t_async, t_cpu = per_call(lambda: a_tpu.add(1.0), lambda: a_cpu.add(1.0), 20000)
    t_sync, t_cpu_sync = per_call(lambda: a_tpu.add(1.0).cpu(), lambda: a_cpu.add(1.0).clone(), 2000)
    rows.append(("tiny op host time (async), us", t_async * 1e6, t_cpu * 1e6))
    rows.append(("tiny op + read back (synced), us", t_sync * 1e6, t_cpu_sync * 1e6))

    big_cpu = torch.randn(4096, 4096)
    big_tpu = big_cpu.to("tpu")
    t_tpu, t_cpu = per_call(lambda: big_tpu.mul(1.5).add_(2.0), lambda: big_cpu.mul(1.5).add_(2.0), 10)
    gb = 2 * 2 * big_cpu.numel() * 4 / 1e9
    rows.append(("large elementwise (16M f32), GB/s", gb / t_tpu, gb / t_cpu))

    m_cpu = torch.randn(1024, 1024)
    m_tpu = m_cpu.to("tpu")
    if "mm" in torch_tpu._C._lowering_rules():
        t_tpu, t_cpu = per_call(lambda: m_tpu @ m_tpu, lambda: m_cpu @ m_cpu, 10)
        flops = 2 * 1024 ** 3
        rows.append(("matmul 1024^3 f32, GFLOP/s", flops / t_tpu / 1e9, flops / t_cpu / 1e9))

    first = []
    for op in (lambda x: x.sin(), lambda x: x.exp() * 2, lambda x: torch.where(x > 0, x, -x)):
        before = torch_tpu.metrics.counters()["compile_time_s"]
        op(torch.randn(37, 41).to("tpu")).cpu()
        first.append(torch_tpu.metrics.counters()["compile_time_s"] - before)
    rows.append(("first-compile latency per op, ms", 1000 * sum(first) / len(first), float("nan")))

    print(f"platform: {torch_tpu._C._runtime_description()}")
    print(f"{'benchmark':<40}{'tpu':>12}{'cpu eager':>12}{'tpu/cpu':>10}  better")
    for name, tpu, cpu in rows:
        ratio = tpu / cpu if cpu == cpu else float("nan")
        better = "lower" if name.endswith(("us", "ms")) else "higher"
        print(f"{name:<40}{tpu:>12.2f}{cpu:>12.2f}{ratio:>10.2f}  {better}")


if __name__ == "__main__":
    main()
