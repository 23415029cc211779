"""torch.compile(backend="tpu") vs our eager vs PyTorch CPU eager vs Inductor on the CPU.

Run: `make bench-compile` (or .venv/bin/python benchmarks/compile.py [--quick]). One table:
three workloads (benchmarks/workloads.py) x {tpu eager, tpu compiled, CPU eager, CPU Inductor},
first-call (compile) time, and libtpu's v6e estimate of each compiled graph when libtpu is
installed (the AOT check; the `tpu` device here is XLA:CPU, so its times say nothing about a TPU).
"""
import argparse
import importlib.util
import os
import sys
import tempfile

os.environ.setdefault("TORCH_TPU_QUIET", "1")
os.environ.setdefault("TORCH_TPU_CACHE_DIR", tempfile.mkdtemp(prefix="tpu_bench_compile_"))
if importlib.util.find_spec("libtpu") and "TORCH_TPU_AOT_CHECK" not in os.environ:
    os.environ["TORCH_TPU_AOT_CHECK"] = "v6e:1x1"

import torch  # noqa: E402
import torch._dynamo  # noqa: E402

import torch_tpu  # noqa: E402
from torch_tpu.compile import stats  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402
from flops import call_flops, cpu_matmul_gflops  # noqa: E402
from timing import compare, first_call, interleaved  # noqa: E402
from v6e import compiled_graphs_us, eager_call_us  # noqa: E402


def mlp_step(device, compiled):
    model = workloads.mlp().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    backend = "tpu" if device == "tpu" else "inductor"
    fwd = torch.compile(model, backend=backend) if compiled else model
    step = torch.compile(opt.step, backend=backend) if compiled else opt.step
    x = torch.randn(64, 256).to(device)
    y = torch.randint(0, 10, (64,)).to(device)

    def run():
        loss = torch.nn.functional.cross_entropy(fwd(x), y)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        step()
    return run


def mmdit(device, compiled):
    block = workloads.mmdit_block().to(device)
    backend = "tpu" if device == "tpu" else "inductor"
    fn = torch.compile(block, backend=backend, fullgraph=True, dynamic=False) if compiled else block
    inputs = [t.to(device) for t in workloads.mmdit_inputs()]
    last = []  # the outputs stay alive until the next call: fused eager leaves dead results uncomputed

    def run():
        with torch.no_grad():
            last[:] = fn(*inputs)
    return run


def decode(device, compiled, tokens):
    import transformers

    model = workloads.tiny_llama().to(device)
    ids = torch.tensor([[1, 17, 42, 7, 99, 3, 250, 11]]).to(device)
    config = None
    if compiled:
        config = transformers.CompileConfig(backend="tpu" if device == "tpu" else "inductor", dynamic=False,
                                            mode="default")
        config._compile_all_devices = True  # transformers compiles only on accelerators unless asked
    kwargs = dict(max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, cache_implementation="static",
                  attention_mask=torch.ones_like(ids), disable_compile=not compiled, compile_config=config)

    def run():
        model.generate(ids, **kwargs)
    return run


def decode_step(device, compiled):
    """One decode step of the tiny Llama (forward of one token over a StaticCache of 512), called
    with exactly the arguments `generate` passes at its decode steps (captured from one)."""
    import transformers

    model = workloads.tiny_llama().to(device)
    cache = transformers.StaticCache(config=model.config, max_cache_len=512)
    ids = torch.tensor([[1, 17, 42, 7, 99, 3, 250, 11]]).to(device)
    captured = {}
    forward = model.forward

    def spy(*args, **kwargs):
        if kwargs.get("input_ids") is not None and kwargs["input_ids"].shape[1] == 1:
            captured.setdefault("kwargs", dict(kwargs))
        return forward(*args, **kwargs)

    model.forward = spy
    model.generate(ids, cache=cache, max_new_tokens=3, min_new_tokens=3, do_sample=False,
                   attention_mask=torch.ones_like(ids), disable_compile=True)
    model.forward = forward
    kwargs = captured["kwargs"]
    backend = "tpu" if device == "tpu" else "inductor"
    step = torch.compile(model, backend=backend, dynamic=False) if compiled else model

    def run():
        with torch.no_grad():
            step(**kwargs)
    return run


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer iterations, skip Inductor")
    args = parser.parse_args()
    iters = 3 if args.quick else 10
    tokens = 16 if args.quick else 32
    workloads_ = [
        ("MLP training step (fw+bw+AdamW), ms", lambda d, c: mlp_step(d, c), 1),
        ("MMDiT block forward (2x(256+77) tokens, d=256), ms", lambda d, c: mmdit(d, c), 1),
        ("tiny Llama decode step (forward, 1 token, static cache), ms", lambda d, c: decode_step(d, c), 1),
        (f"tiny Llama generate, ms/token ({tokens} tokens, static cache)", lambda d, c: decode(d, c, tokens), tokens),
    ]
    variants = [("tpu", False), ("tpu", True), ("cpu", False)] + ([] if args.quick else [("cpu", True)])
    rows = []
    for title, make, per in workloads_:
        torch._dynamo.reset()
        result, runs = {"flops": call_flops(make("cpu", False)) / per}, {}
        for device, compiled in variants:
            stats.executables.clear()
            run = make(device, compiled)
            result[(device, compiled, "first")] = first_call(run, device) * 1e3
            if device == "tpu" and compiled:
                graphs = compiled_graphs_us()  # "r": a roofline bound only
                result["estimate"] = f"{graphs[0]:.1f} us" + (" r" if graphs[1] else "") if graphs else ""
            elif device == "tpu":
                result["eager estimate"] = eager_call_us(run)
            runs[(device, compiled)] = (run, device)
        # All variants alive at once, timed round-robin (benchmarks/timing.py): drift of this
        # shared machine lands on every variant of a round, not on one.
        result.update(compare(interleaved(runs, max(1, iters // (4 if per > 1 else 1))), scale=1e3 / per))
        rows.append((title, result, per))

    print(f"torch-tpu compile benchmark — tpu device: {torch_tpu._C._platform_name()} "
          f"({torch.tpu.get_device_name(0) if hasattr(torch.tpu, 'get_device_name') else ''}); "
          f"{os.cpu_count()} CPU cores; PyTorch {torch.__version__}; PyTorch CPU matmul here: "
          f"{cpu_matmul_gflops():.0f} GFLOP/s")
    header = (f"{'workload':<58} {'tpu eager':>10} {'tpu comp.':>10} {'cpu eager':>10} {'inductor':>10} "
              f"{'comp/eager':>10} {'comp/ind.':>10} {'GFLOP/s':>8} {'1st call':>10} {'1st/2nd':>8} {'v6e eager':>10} {'v6e est.':>10}")
    print(header)
    for title, r, per in rows:
        te, tc, ce = r[("tpu", False)], r[("tpu", True)], r[("cpu", False)]
        ind = r.get(("cpu", True))
        comp_ind = r.get("comp/ind.")
        first = r[("tpu", True, "first")]
        second = tc * per
        est = r.get("estimate")
        eager_est = r.get("eager estimate")
        eager_text = ""
        if eager_est:  # a roofline bound beside a roofline bound
            roofline = est.endswith(" r")
            eager_text = f"{eager_est['roofline_us' if roofline else 'us'] / per:.1f} us" + (" r" if roofline else "")
        print(f"{title:<58} {te:>10.3f} {tc:>10.3f} {ce:>10.3f} {ind if ind is None else round(ind, 3)!s:>10} "
              f"{r['comp/eager']:>9.2f}x {'' if comp_ind is None else f'{comp_ind:.2f}x':>10} "
              f"{r['flops'] / tc / 1e6:>8.0f} {first / 1e3:>9.2f}s "
              f"{first / second:>7.0f}x "
              f"{eager_text:>10} {est:>10}")
    print("Steady times: medians over 5 rounds, each round timing every variant in turn; ratios: medians of "
          "the per-round ratios. comp/eager: our eager time / our compiled time (higher is better); comp/ind.: "
          "Inductor CPU time / our compiled time; GFLOP/s: the call's matrix products (PyTorch's FlopCounterMode, "
          "attention in its math form) over our compiled time, beside PyTorch's own CPU matmul rate in the title; 1st call: first compiled call incl. tracing and compiling (plus the libtpu AOT compile "
          "when enabled); 1st/2nd: first call / a later same-shape call; v6e est.: libtpu's estimate for the "
          "compiled graphs of one step (fw+bw+optimizer summed; per token for decode); 'r': roofline bound only; "
          "v6e eager: libtpu's estimates summed over the op modules one eager step launches (roofline where it "
          "has none; no per-launch overhead).")


if __name__ == "__main__":
    main()
