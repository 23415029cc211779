"""AOT check: the workload's programs, compiled by the real TPU compiler (libtpu) for v6e:1x1.

One subprocess runs tests/python/aot_workload.py under `python -m torch_tpu.aot`, which turns
the AOT check on and writes libtpu's executables to a cache directory. The tests read its
report and the cache files. Skipped when libtpu is not installed.
"""
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torch_tpu import _C, _discovery

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = Path(__file__).with_name("aot_workload.py")
TOPOLOGY = "v6e:1x1"

pytestmark = pytest.mark.skipif(_discovery.libtpu_path() is None, reason="libtpu not installed")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("aot")
    # The AOT tool's tests read per-op modules: the workload runs in strict eager whatever mode
    # the suite runs in.
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp / "cpu"), TORCH_TPU_QUIET="1", TORCH_TPU_EAGER_MODE="strict")
    env.pop("TORCH_TPU_AOT_CHECK", None)
    proc = subprocess.run(
        [sys.executable, "-m", "torch_tpu.aot", "--topology", TOPOLOGY, "--out", str(tmp / "tpu"),
         str(WORKLOAD)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("AOT_STATS "))
    stats = json.loads(line[len("AOT_STATS "):])
    return stats, tmp / "cpu", tmp / "tpu"


def test_every_module_compiles_for_v6e_or_is_documented(run):
    stats, _, _ = run
    print(f"\nAOT check {stats['topology']}: libtpu accepted {stats['accepted']}, rejected "
          f"{stats['rejected']} modules ({stats['compile_seconds']:.1f} s compiling)")
    for label, message in sorted(stats["rejections"].items()):
        print(f"  rejected {label}: {message}")
    print(stats["report"])
    assert stats["error"] == ""
    assert stats["failed_on_cpu"] == {}
    assert stats["accepted"] >= 100
    # Every rejection is a known limitation, named in docs/tpu_aot.md with its reason.
    docs = (ROOT / "docs" / "tpu_aot.md").read_text()
    undocumented = {l: m for l, m in stats["rejections"].items() if f"`{l}`" not in docs}
    assert not undocumented, undocumented


def test_estimates_are_never_below_the_roofline_bound(run):
    stats, _, _ = run
    modelled = [m for m in stats["modules"] if m["accepted"] and m["optimal_seconds"] >= 0]
    unmodelled = [m["label"] for m in stats["modules"] if m["accepted"] and m["optimal_seconds"] < 0]
    print(f"\n{len(modelled)} modules with libtpu estimates, {len(unmodelled)} without "
          f"(negative optimal_seconds): {sorted(set(unmodelled))}")
    assert len(modelled) >= 40
    for m in modelled:
        assert m["roofline_seconds"] > 0, m
        # optimal_seconds is a float32: allow its rounding (2**-23 relative), nothing more. Where
        # libtpu counted n 64-bit emulation calls as -1 s each, it rounded estimate - n, whose
        # ulp is up to n * 2**-22 s.
        rounding = m["uncosted_custom_calls"] * 2.0 ** -22
        assert m["optimal_seconds"] >= m["roofline_seconds"] * (1 - 2.0 ** -22) - rounding, m
    exact = sum(abs(m["optimal_seconds"] / m["roofline_seconds"] - 1) < 1e-6 for m in modelled)
    print(f"{exact} of {len(modelled)} estimates equal the roofline bound (single-op programs)")


def run_script(script, marker, timeout=600):
    """Runs `script` in a fresh process (it turns the AOT check on itself) and returns the JSON it
    prints after `marker`."""
    env = dict(os.environ, TORCH_TPU_QUIET="1", TORCH_TPU_CACHE_DIR="", TORCH_TPU_EAGER_MODE="strict")
    env.pop("TORCH_TPU_AOT_CHECK", None)
    res = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(next(l for l in res.stdout.splitlines() if l.startswith(marker + " "))[len(marker) + 1:])


X64_SCRIPT = r"""
import json, torch, torch_tpu
from torch_tpu import aot
aot.configure("v6e:1x1")
x = torch.ones(1024, 1024, device="tpu")
i = torch.ones(1024, 1024, dtype=torch.long, device="tpu")
x * 2; x + 3.5; x * torch.tensor(3); i.sum(); i + 7; torch.ones((), dtype=torch.long, device="tpu") + 1
a, b = torch.ones(8, 16, device="tpu"), torch.ones(16, 4, device="tpu")
torch.mv(a, b[:, 1])  # a view at a runtime storage offset
torch.tpu.synchronize()
print("MODULES " + json.dumps(aot.stats()["modules"]))
"""


def test_modules_with_64_bit_values_keep_their_estimate():
    # libtpu counts each X64SplitLow/X64SplitHigh/X64Combine call (its emulation of s64 values:
    # Scalar operands, storage offsets, int64 results) as -1 s in optimal_seconds; the AOT check
    # adds them back from the optimized program. Before, every such module read as unmodelled.
    modules = run_script(X64_SCRIPT, "MODULES")
    # 1M-element arrays (~5 us each) with a 64-bit Scalar operand or int64 values
    big = [m for m in modules if m["roofline_seconds"] > 1e-6 and m["uncosted_custom_calls"] > 0]
    assert len(big) >= 4, modules
    for m in big:
        # An elementwise pass is memory bound: libtpu's estimate is its roofline bound, here to the
        # float32 resolution of estimate - n.
        rounding = m["uncosted_custom_calls"] * 2.0 ** -22
        assert abs(m["optimal_seconds"] - m["roofline_seconds"]) <= 0.05 * m["roofline_seconds"] + rounding, m
    # A view's runtime offset becomes per-dim start indices in 32 bits: in 64 bits libtpu emulated
    # the division and remainder with ~3500 scalar ops, 5.7 MB in its cost analysis for an 8x16 mv.
    mv = [m for m in modules if m["label"] == "mv"]
    assert mv and mv[0]["bytes_accessed"] < 200_000, mv
    # An estimate below the resolution (a scalar add) is lost: that module stays unmodelled.
    tiny = [m for m in modules if 0 < m["roofline_seconds"] < 1e-7 and m["uncosted_custom_calls"] > 0]
    assert tiny and all(m["optimal_seconds"] < 0 for m in tiny), tiny


INT_SCALAR_SCRIPT = r"""
import json, torch, torch_tpu
from torch_tpu import aot
aot.configure("v6e:1x1")
x = torch.ones(1024, 1024, device="tpu")
x * 2; x * 2 ** 40
torch.tpu.synchronize()
print("MODULES " + json.dumps(aot.stats()["modules"]))
"""


def test_int_scalars_that_fit_32_bits_cost_no_emulation_calls():
    # An int64 Scalar operand whose value fits 32 bits is an s32 parameter widened in the module:
    # libtpu emulates no 64-bit parameter, and its estimate is exact instead of `estimate - n`
    # rounded to float32 (a fused decode program had 70 such operands). A value past 32 bits
    # keeps its s64 parameter, in a program of its own.
    modules = [m for m in run_script(INT_SCALAR_SCRIPT, "MODULES") if m["label"].startswith("mul")]
    assert len(modules) == 2, modules
    narrow, wide = modules
    assert narrow["uncosted_custom_calls"] == 0, narrow
    assert abs(narrow["optimal_seconds"] - narrow["roofline_seconds"]) <= 0.05 * narrow["roofline_seconds"], narrow
    assert wide["uncosted_custom_calls"] > 0, wide


WEIGHT_PREFETCH_SCRIPT = """
import json
import torch
from diffusers import SD3Transformer2DModel
from torch_tpu import aot
from torch_tpu.compile import stats
aot.configure("v6e:1x1")
torch.manual_seed(0)
# One SD3.5 Medium block at full width (1536), a 32x32 latent: libtpu prefetches its weights into
# on-chip memory in pieces and joins them with ConcatBitcast calls.
model = SD3Transformer2DModel(num_layers=1, attention_head_dim=64, num_attention_heads=24, joint_attention_dim=4096,
                              caption_projection_dim=1536, pooled_projection_dim=2048, sample_size=32)
model = model.to(torch.bfloat16).eval().to("tpu")
args = dict(hidden_states=torch.randn(1, 16, 32, 32), encoder_hidden_states=torch.randn(1, 16, 4096),
            pooled_projections=torch.randn(1, 2048), timestep=torch.full((1,), 500.0))
args = {k: v.to(torch.bfloat16).to("tpu") for k, v in args.items()}
with torch.no_grad():
    torch.compile(model, backend="tpu", fullgraph=True, dynamic=False)(**args).sample.cpu()
print("GRAPHS " + json.dumps([exe.last_aot() for exe in stats.executables if exe.last_aot()]))
"""


TRIANGULAR_SCRIPT = r"""
import json, torch, torch_tpu
from torch_tpu import aot
aot.configure("v6e:1x1")
g = torch.Generator().manual_seed(0)
a = (torch.tril(torch.randn(8, 64, 64, generator=g)) + 4 * torch.eye(64)).to("tpu")
b = torch.randn(8, 64, 256, generator=g).to("tpu")
torch.linalg.solve_triangular(a, b, upper=False)  # Qwen3.5's chunked delta rule solves these
torch.tpu.synchronize()
print("MODULES " + json.dumps(aot.stats()["modules"]))
"""


def test_triangular_solve_keeps_its_estimate():
    # libtpu lowers a lower-triangular solve with an InvertDiagBlocksLowerTriangular call, also
    # counted as -1 s: the module read -0.99999 before it was added back.
    modules = run_script(TRIANGULAR_SCRIPT, "MODULES")
    solve = [m for m in modules if "solve_triangular" in m["label"]]
    assert solve and all(m["uncosted_custom_calls"] >= 1 for m in solve), modules
    for m in solve:
        rounding = m["uncosted_custom_calls"] * 2.0 ** -22
        assert 0 < m["optimal_seconds"] <= 2 * m["roofline_seconds"] + rounding, m


def test_full_width_graph_with_prefetched_weights_keeps_its_estimate():
    # libtpu counts each ConcatBitcast (joining the DMA pieces of a weight it prefetches) as -1 s,
    # as it does the 64-bit emulation calls: this graph read -9.9996 s before they were added back.
    pytest.importorskip("diffusers")
    graphs = run_script(WEIGHT_PREFETCH_SCRIPT, "GRAPHS", timeout=900)
    assert len(graphs) == 1 and graphs[0]["accepted"], graphs
    g = graphs[0]
    assert g["uncosted_custom_calls"] > 0, g
    # Memory bound at this size: the estimate is libtpu's roofline, to the float32 resolution of
    # estimate - n (2^-20 s near 10).
    rounding = g["uncosted_custom_calls"] * 2.0 ** -22 + 2.0 ** -20
    assert 0 < g["optimal_seconds"] and abs(g["optimal_seconds"] - g["roofline_seconds"]) <= (
        0.05 * g["roofline_seconds"] + rounding), g


def test_estimated_time_accumulates_per_op_run_and_resets(run):
    stats, _, _ = run
    assert stats["ops_run"] > stats["ops_estimated"] > 0
    assert stats["estimated_before_reset"] > 0
    assert stats["estimated_after_reset"] == 0
    # One more training step after reset: its plans are cached, the estimate still counts.
    assert 0 < stats["estimated_one_step"] < stats["estimated_before_reset"]
    assert "estimated v6e time for the ops run" in stats["report"]


def test_launches_without_an_estimate_count_at_their_roofline_bound(run):
    """Modules libtpu accepts but does not model are run too (a compiled decode graph is one):
    torch_tpu.aot.between() counts them at their roofline bound instead of leaving them out."""
    from torch_tpu import aot
    stats, _, _ = run
    unmodelled = [m for m in stats["modules"] if m["accepted"] and m["optimal_seconds"] < 0]
    assert unmodelled, "the workload runs modules libtpu does not model"
    assert 0 < stats["ops_roofline_only"] <= stats["ops_run"] - stats["ops_estimated"]
    assert stats["roofline_only_seconds"] > 0
    zero = {k: 0 for k in ("estimated_seconds", "roofline_only_seconds", "roofline_seconds", "ops_run",
                           "ops_roofline_only")}
    step = aot.between(zero, stats)
    assert step["seconds"] == pytest.approx(stats["estimated_seconds"] + stats["roofline_only_seconds"])
    assert step["roofline_seconds"] == pytest.approx(stats["roofline_seconds"] + stats["roofline_only_seconds"])
    assert (step["ops"], step["unmodelled"]) == (stats["ops_run"], stats["ops_roofline_only"])


def test_the_estimate_splits_by_op(run):
    """aot.between()["by_op"]: where a step's estimated TPU time goes, summing to the whole."""
    from torch_tpu import aot
    stats, _, _ = run
    zero = {k: 0 for k in ("estimated_seconds", "roofline_only_seconds", "roofline_seconds", "ops_run",
                           "ops_roofline_only")}
    step = aot.between(zero, stats)
    by_op = step["by_op"]
    assert "mm" in by_op or "addmm" in by_op, sorted(by_op)
    assert sum(n for n, _ in by_op.values()) == stats["ops_estimated"] + stats["ops_roofline_only"]
    assert sum(s for _, s in by_op.values()) == pytest.approx(step["seconds"], rel=1e-6)
    assert all(n > 0 and s >= 0 for n, s in by_op.values())
    assert "where the v6e time goes" in stats["report"]


def read_entries(directory, fingerprint):
    """{options + module: (file name, key)} of the cache entries written with `fingerprint`."""
    entries = {}
    for f in sorted((directory / "executables").glob("*.bin")):
        data = f.read_bytes()  # [magic][u64 key size][key][u64 payload size][u64 checksum][payload]
        assert data[:8] == b"TPUXE002", f
        (size,) = struct.unpack("<Q", data[8:16])
        key = data[16:16 + size]
        (payload,) = struct.unpack("<Q", data[16 + size:24 + size])
        assert payload > 0 and len(data) == 32 + size + payload, f  # an executable follows the key
        if key.startswith(fingerprint + b"\n"):
            entries[key[len(fingerprint) + 1:]] = (f.name, key)
    return entries


def test_aot_cache_keys_are_the_keys_a_tpu_run_looks_up(run):
    stats, cpu_dir, tpu_dir = run
    torch.ones(1, device="tpu")  # starts this process's runtime
    cpu = read_entries(cpu_dir, _C._plugin_fingerprint())  # the engine's own fingerprint
    libtpu_fp = bytes.fromhex(stats["fingerprint"])
    tpu = read_entries(tpu_dir, libtpu_fp)
    print(f"\n{len(tpu)} libtpu executables written, {len(cpu)} CPU ones")
    assert len(tpu) == stats["cache_writes"] == stats["accepted"]
    # The same program (module text) and options as the engine compiled for device 0 here:
    # the lookup on a TPU VM is cache_key(<libtpu fingerprint>, options, module), i.e. these keys.
    assert set(tpu) <= set(cpu)
    for name, key in tpu.values():
        assert Path(_C._cache_file(str(tpu_dir), key)).name == name
    # The fingerprint is what engine::plugin_fingerprint computes from libtpu's platform name,
    # version, PJRT version, attributes and file size.
    size = os.path.getsize(_discovery.libtpu_path())
    assert libtpu_fp.startswith(b"tpu|TFRT TPU v6 lite")
    assert b"|pjrt0.117|" in libtpu_fp
    assert libtpu_fp.endswith(b"|" + str(size).encode())


@pytest.mark.skipif(not _discovery.tpu_on_pci_bus(), reason="needs a TPU (not counted as coverage)")
def test_aot_cache_loads_and_runs_on_a_tpu(run):
    """On a TPU VM with the same libtpu: the workload starts warm from the AOT cache."""
    _, _, tpu_dir = run
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tpu_dir), TORCH_TPU_QUIET="1")
    code = ("import runpy, torch_tpu; runpy.run_path(%r, run_name='__main__'); "
            "s = torch_tpu.metrics.counters(); print('CACHE', s['disk_hits'], s['compiles'])"
            % str(WORKLOAD))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    hits, compiles = map(int, proc.stdout.split("CACHE ")[1].split())
    assert hits > 0 and compiles == 0, proc.stdout[-2000:]


def test_libtpu_start_is_bounded(tmp_path):
    # A libtpu that never finishes starting must not hang the program: after
    # TORCH_TPU_AOT_INIT_TIMEOUT the check turns itself off with a clear message and ops still
    # run on the CPU plugin. The stand-in library only blocks in GetPjrtApi.
    source = tmp_path / "stuck.c"
    source.write_text("#include <unistd.h>\nconst void* GetPjrtApi(void) { sleep(600); return 0; }\n")
    library = tmp_path / "libstuck.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    code = ("import os, torch, torch_tpu\n"
            "x = (torch.ones(3, device='tpu') * 2).cpu()\n"
            "s = torch_tpu._C._aot_check_stats()\n"
            "print(x.tolist(), s['accepted'], '|', s['error'], flush=True)\n"
            "os._exit(0)\n")
    env = dict(os.environ, TORCH_TPU_AOT_CHECK="v6e:1x1", TORCH_TPU_AOT_INIT_TIMEOUT="2",
               TPU_LIBRARY_PATH=str(library), TORCH_TPU_CACHE_DIR=str(tmp_path), TORCH_TPU_QUIET="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith("[2.0, 2.0, 2.0] 0 |"), line
    assert "libtpu did not finish starting within 2 s" in line
