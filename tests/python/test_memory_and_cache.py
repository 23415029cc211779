"""Memory returns to baseline; loops do not leak; a second process compiles nothing new."""
import os
import resource
import subprocess
import sys
import textwrap

import pytest

import torch
import torch_tpu


def test_memory_allocated_returns_to_baseline():
    torch.tpu.init()
    base = torch.tpu.memory_allocated()
    xs = [torch.randn(256, 256).to("tpu") for _ in range(4)]
    ys = [x * 2 + 1 for x in xs]
    assert torch.tpu.memory_allocated() >= base + 8 * 256 * 256 * 4
    del xs, ys
    assert torch.tpu.memory_allocated() == base


def _rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def test_small_op_loop_does_not_grow_rss():
    x = torch.ones(8, device="tpu")
    for _ in range(500):  # warm up allocator pools and caches
        x = x * 1.0001 + 0.0001
    x.cpu()
    before = _rss_kb()
    for _ in range(10_000):
        x = x * 1.0001 + 0.0001
    x.cpu()
    growth_mb = (_rss_kb() - before) / 1024
    assert growth_mb < 20, f"RSS grew by {growth_mb:.1f} MB over 10,000 ops"


SCRIPT = textwrap.dedent("""
    import torch, torch_tpu
    x = torch.arange(12.0).reshape(3, 4).to("tpu")
    y = (x * 3 - 1).relu()
    z = torch.where(y > 4, y, -y)
    print(z.cpu().sum().item())
    s = torch_tpu.metrics.counters()
    print("STATS", s["compiles"], s["disk_hits"])
""")


def test_second_process_compiles_nothing(tmp_path):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path / "cache"), TORCH_TPU_QUIET="1")

    def run():
        out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr
        value, stats = out.stdout.strip().splitlines()
        compiles, disk_hits = map(int, stats.split()[1:])
        return float(value), compiles, disk_hits

    v1, compiles1, hits1 = run()
    v2, compiles2, hits2 = run()
    assert v1 == v2
    assert compiles1 > 0 and hits1 == 0
    assert compiles2 == 0, "the second process recompiled"
    assert hits2 == compiles1


EVICTION_SCRIPT = textwrap.dedent("""
    import torch, torch_tpu

    def maps():
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)

    def run(n):  # one new signature per length: each is its own executable
        x = torch.arange(float(n)) - n / 3
        got = (x.to("tpu") * 1.5).cpu()
        torch.testing.assert_close(got, x * 1.5)

    for n in range(1, 21):
        run(n)
    before = maps()
    for n in range(21, 321):
        run(n)
    after = maps()
    for n in range(1, 21):  # evicted long ago: rebuilt, from the disk cache
        run(n)
    s = torch_tpu.metrics.counters()
    print("STATS", before, after, s["signatures"], s["signature_limit"], s["signature_evictions"],
          s["compiles"], s["disk_hits"])
""")


@pytest.mark.strict_eager
def test_plan_cache_is_bounded_and_rebuilds_evicted_signatures(tmp_path):
    # A process that runs many signatures must not keep every executable loaded: XLA:CPU maps
    # JIT regions per executable and Linux caps a process at 65,530 mappings (the full op suite
    # crashed in the plugin when it ran out). With a limit of 8 plans, 300 more signatures leave
    # the mapping count where it was, and an evicted signature runs again from the disk cache.
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path / "cache"), TORCH_TPU_QUIET="1",
               TORCH_TPU_MAX_PLANS="8")
    out = subprocess.run([sys.executable, "-c", EVICTION_SCRIPT], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    before, after, loaded, limit, evicted, compiles, disk_hits = map(int, out.stdout.split()[1:])
    assert limit == 8 and loaded <= 8
    assert evicted >= 320 - 8
    assert after - before < 100, f"mappings grew from {before} to {after} over 300 signatures"
    assert disk_hits >= 20, "evicted signatures were compiled again instead of read from disk"


@pytest.mark.strict_eager
def test_invalid_plan_limit_is_a_clear_error():
    env = dict(os.environ, TORCH_TPU_MAX_PLANS="lots", TORCH_TPU_QUIET="1")
    out = subprocess.run([sys.executable, "-c", "import torch; (torch.ones(2, device='tpu') + 1).cpu()"],
                         capture_output=True, text=True, env=env)
    assert out.returncode != 0
    assert "TORCH_TPU_MAX_PLANS must be a positive integer, got 'lots'" in out.stderr


MAPPING_BUDGET_SCRIPT = textwrap.dedent("""
    import torch, torch_tpu

    def maps():
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)

    for n in range(4, 40):  # an SVD signature JIT-maps ~150 regions on XLA:CPU
        a = torch.randn(n, n - 2, generator=torch.Generator().manual_seed(n))
        s = torch.linalg.svd(a.to("tpu"), full_matrices=False).S
        torch.testing.assert_close(s.cpu(), torch.linalg.svdvals(a), rtol=1e-4, atol=1e-4)
    print("STATS", maps(), torch_tpu.metrics.counters()["signature_evictions"])
""")


@pytest.mark.strict_eager
def test_plan_cache_unloads_executables_over_the_mapping_budget(tmp_path):
    # Large decompositions map far more than small ops: the plan count alone does not bound the
    # process's mappings, the budget does (checked every 16 new plans).
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path / "cache"), TORCH_TPU_QUIET="1",
               TORCH_TPU_MAX_MAPPINGS="3000")
    out = subprocess.run([sys.executable, "-c", MAPPING_BUDGET_SCRIPT], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    mappings, evicted = map(int, out.stdout.split()[1:])
    assert evicted > 0
    assert mappings < 4500, f"{mappings} mappings with a budget of 3000"


def test_compiler_flags_are_part_of_the_disk_cache_key(tmp_path):
    # XLA:CPU reads XLA_FLAGS (libtpu LIBTPU_INIT_ARGS) when it loads: an executable compiled under
    # other flags must not come back from the disk cache.
    base = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path / "cache"), TORCH_TPU_QUIET="1")
    base.pop("XLA_FLAGS", None)
    base.pop("LIBTPU_INIT_ARGS", None)

    def run(**extra):
        out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=dict(base, **extra))
        assert out.returncode == 0, out.stderr
        value, stats = out.stdout.strip().splitlines()
        return float(value), tuple(map(int, stats.split()[1:]))

    plain, (compiles, _) = run()
    flagged, (flagged_compiles, flagged_hits) = run(XLA_FLAGS="--xla_cpu_enable_fast_math=false")
    assert flagged == plain
    assert flagged_compiles == compiles and flagged_hits == 0, "executables built without the flags were reused"
    _, (again_compiles, again_hits) = run(XLA_FLAGS="--xla_cpu_enable_fast_math=false")
    assert again_compiles == 0 and again_hits == compiles
