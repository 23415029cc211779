"""Strict eager vs fused eager vs torch.compile(backend="tpu"), same process, same machine.

Run: `make bench-eager` (or .venv/bin/python benchmarks/eager_modes.py [--quick]). Three
workloads (an MLP training step, an MMDiT block, tiny-Llama generate with a DynamicCache) x
{strict, fused, fused without pipelining, compiled}: executable launches per call, host time per call (until the call
returns, before waiting for the device), XLA:CPU wall time per call (interleaved rounds,
benchmarks/timing.py, with PyTorch's own CPU eager run of the same workload in the same rounds) and, with libtpu installed, libtpu's v6e estimate of what one call ran,
alone and with a stated per-launch cost added. The `tpu` device here is XLA:CPU: its times
say nothing about a TPU's; the v6e columns are libtpu's cost model, not a measurement.
"""
import argparse
import importlib.util
import os
import sys
import tempfile
import time

os.environ.setdefault("TORCH_TPU_QUIET", "1")
os.environ.setdefault("TORCH_TPU_CACHE_DIR", tempfile.mkdtemp(prefix="tpu_bench_eager_"))
if importlib.util.find_spec("libtpu") and "TORCH_TPU_AOT_CHECK" not in os.environ:
    os.environ["TORCH_TPU_AOT_CHECK"] = "v6e:1x1"

import torch  # noqa: E402

import torch_tpu  # noqa: E402
import torch_tpu.aot  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402
from compile import mlp_step, mmdit  # noqa: E402  (benchmarks/compile.py's workloads, per device)
from timing import interleaved, ratio, steady, sync  # noqa: E402
from v6e import compiled_graphs_us, eager_call_us  # noqa: E402

# What a TPU adds per executable launch on top of libtpu's estimate of the executable itself
# (host enqueue through PJRT plus the device's program start). An assumption, stated in the
# table; libtpu's cost model has no launch term.
LAUNCH_US = 10.0
# The last: the same workload on device "cpu". "fused, unpipelined": one program per host read
# (TORCH_TPU_FUSED_PIPELINE_OPS=0), to show what pipelining gives.
MODES = ["strict", "fused", "fused, unpipelined", "compiled", "PyTorch CPU eager"]
UNPIPELINED = "fused, unpipelined"


def in_mode(mode, fn):
    eager = {"compiled": "strict", UNPIPELINED: "fused"}.get(mode, mode)

    def run():
        with torch.tpu.eager_mode(eager):
            if mode != UNPIPELINED:
                return fn()
            was = torch_tpu._C._fused_pipeline_ops()
            torch_tpu._C._set_fused_pipeline_ops(0)
            try:
                return fn()
            finally:
                torch_tpu._C._set_fused_pipeline_ops(was)
    return run


def generate(compiled, tokens, device="tpu"):
    """generate() of `tokens` tokens: eager with the default DynamicCache; compiled is
    Transformers' own auto-compiled decode step over a StaticCache (a DynamicCache step is not
    compiled by Transformers)."""
    import transformers

    model = workloads.tiny_llama().to(device)
    ids = torch.tensor([[1, 17, 42, 7, 99, 3, 250, 11]]).to(device)
    kwargs = dict(max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, attention_mask=torch.ones_like(ids))
    if compiled:
        config = transformers.CompileConfig(backend="tpu", dynamic=False, mode="default")
        config._compile_all_devices = True
        kwargs.update(cache_implementation="static", compile_config=config)
    else:
        kwargs.update(disable_compile=True)

    def run():
        model.generate(ids, **kwargs)
    return run


def launches_and_host(run, calls=3):
    """(launches per call, host seconds per call until the call returned)."""
    before = torch_tpu._C._cache_stats()["launches"]
    host = 0.0
    for _ in range(calls):
        start = time.perf_counter()
        run()
        host += time.perf_counter() - start
        sync("tpu")
    return (torch_tpu._C._cache_stats()["launches"] - before) / calls, host / calls


def v6e_us(mode, run):
    if mode == "compiled":  # the graphs this workload compiled (stats cleared before it was built)
        graphs = compiled_graphs_us()
        return graphs if graphs else None
    est = eager_call_us(run)
    return (est["us"], est["unmodelled"] > 0) if est else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer rounds and tokens")
    args = parser.parse_args()
    tokens = 8 if args.quick else 16
    rounds = 3 if args.quick else 5
    table = [
        ("MLP training step (fw+bw+AdamW)", lambda c, d="tpu": mlp_step(d, c), 1),
        ("MMDiT block forward (2x(256+77) tokens, d=256)", lambda c, d="tpu": mmdit(d, c), 1),
        (f"tiny Llama generate, per token ({tokens} tokens)", lambda c, d="tpu": generate(c, tokens, d), tokens),
    ]
    print(f"device: tpu on {torch_tpu._C._platform_name()}; torch {torch.__version__}; "
          f"v6e columns: libtpu's estimate, then with {LAUNCH_US:.0f} us per launch added")
    print("| workload | mode | launches/call | host ms/call | XLA:CPU ms/call | vs strict | v6e est. us | v6e +launch us |")
    print("|---|---|---|---|---|---|---|---|")
    for title, make, per in table:
        torch._dynamo.reset()
        runs, facts = {}, {}
        for mode in MODES:
            if mode == "PyTorch CPU eager":
                run = make(False, "cpu")
                for _ in range(3):
                    run()
                facts[mode] = None
                runs[mode] = (run, "cpu")
                continue
            if mode == "compiled":
                from torch_tpu.compile import stats
                stats.executables.clear()
            run = in_mode(mode, make(mode == "compiled"))
            for _ in range(3):  # compiles (background fused: op by op, programs queued once a stream recurs)
                run()
                sync("tpu")
            torch_tpu._C._wait_fused_compiles()
            run()  # fused: every program compiled
            sync("tpu")
            before = torch_tpu._C._fused_stats()["compiles"]
            launches, host = launches_and_host(run)
            steady_compiles = torch_tpu._C._fused_stats()["compiles"] - before
            facts[mode] = (launches, host, v6e_us(mode, run), steady_compiles)
            runs[mode] = (run, "tpu")
        samples = interleaved(runs, iters=1, rounds=rounds)
        for mode in MODES:
            if facts[mode] is None:
                wall = steady(samples[mode]) * 1e3 / per
                print(f"| {title} | {mode} | - | - | {wall:.2f} (CPU) | {ratio(samples['strict'], samples[mode]):.2f}x | - | - |",
                      flush=True)
                continue
            launches, host, v6e, steady_compiles = facts[mode]
            est, unmodelled = v6e if v6e is not None else (None, False)
            wall = steady(samples[mode]) * 1e3 / per
            speed = ratio(samples["strict"], samples[mode])
            if mode == "compiled" and est is not None:
                est *= per  # one call of the compiled graphs is one token's step, not the whole call
            est_s = f"{est / per:.1f}" + ("*" if unmodelled else "") if est is not None else "n/a"
            with_launch = f"{(est + launches * LAUNCH_US) / per:.1f}" if est is not None else "n/a"
            note = f" ({steady_compiles} steady compiles)" if mode.startswith("fused") else ""
            print(f"| {title} | {mode}{note} | {launches / per:.1f} | {host * 1e3 / per:.2f} | {wall:.2f} | "
                  f"{speed:.2f}x | {est_s} | {with_launch} |", flush=True)
    print("* some launches have no libtpu estimate (modules that index an array at a runtime offset, and "
          "tiny ones whose estimate is below the float32 resolution of `estimate - n`, n its 64-bit "
          "emulation calls; docs/tpu_aot.md): the roofline of libtpu's bytes_accessed stands in for them, "
          "which counts a weight DMA'd into on-chip memory 3-4 times (tools/hbm_traffic.py reads the bytes "
          "that cross HBM from libtpu's dump)")
    print(torch_tpu.metrics.report())
    first_calls(table, tokens)


FIRST_CALL_MODES = [("strict", {}), ("fused, inline compile", {"TORCH_TPU_FUSED_COMPILE": "inline"}),
                    ("fused, background compile", {"TORCH_TPU_FUSED_COMPILE": "background"})]


def first_calls(table, tokens):
    """Wall time of the first calls in a fresh process without the disk cache: what a user waits
    for before the steady state (compiles on the calling thread, or op by op while compiling)."""
    import subprocess

    def child(index, mode, env, aot):
        out = subprocess.run(
            [sys.executable, __file__, "--first-calls", str(index), "--tokens", str(tokens)],
            env=dict(os.environ, TORCH_TPU_EAGER_MODE=mode, TORCH_TPU_CACHE_DIR="", TORCH_TPU_AOT_CHECK=aot, **env),
            capture_output=True, text=True, check=True)
        return out.stdout.split()[-6:]

    aot = "v6e:1x1" if importlib.util.find_spec("libtpu") else ""
    print("\nFirst calls, each mode in a fresh process, disk cache off: seconds per call (calls 1-4, XLA:CPU, "
          "AOT check off), executables built on the calling thread, and libtpu's compile seconds for the "
          "same four calls (a second process with the AOT check on: what a TPU host would spend compiling)")
    print("| workload | mode | call 1 | call 2 | call 3 | call 4 | built on the calling thread | libtpu compile s |")
    print("|---|---|---|---|---|---|---|---|")
    for index, (title, _, _) in enumerate(table):
        for name, env in FIRST_CALL_MODES:
            mode = "strict" if name == "strict" else "fused"
            *times, built, _ = child(index, mode, env, "")
            libtpu = child(index, mode, env, aot)[-1] if aot else "n/a"
            title = title.replace(", per token (", " (whole call, ")
            print(f"| {title} | {name} | " + " | ".join(times) + f" | {built} | {libtpu} |", flush=True)


def first_calls_child(index, tokens):
    """Prints the four first calls' seconds and the executables built on this thread."""
    make = [lambda: mlp_step("tpu", False), lambda: mmdit("tpu", False), lambda: generate(False, tokens)][index]
    run = make()
    times = []
    for _ in range(4):
        start = time.perf_counter()
        run()
        sync("tpu")
        times.append(time.perf_counter() - start)
    torch_tpu._C._wait_fused_compiles()
    stats, fused = torch_tpu._C._cache_stats(), torch_tpu._C._fused_stats()
    built = stats["compiles"] + stats["disk_hits"] - fused["background_compiled"] - fused["background_loaded"]
    libtpu = torch_tpu.aot.stats()
    libtpu_s = f"{libtpu['compile_seconds']:.2f}" if libtpu["topology"] and not libtpu["error"] else "n/a"
    print(" ".join(f"{t:.2f}" for t in times), built, libtpu_s)


if __name__ == "__main__":
    if "--first-calls" in sys.argv:
        first_calls_child(int(sys.argv[sys.argv.index("--first-calls") + 1]),
                          int(sys.argv[sys.argv.index("--tokens") + 1]))
    else:
        main()
