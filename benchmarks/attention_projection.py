"""Attention on v6e: libtpu's estimate for the module our SDPA lowers, in the exact form every
plugin runs and in the form lowered for libtpu (masked and causal attention as its flash-attention
pass rewrites it; docs/tpu_aot.md, "Flash attention"), next to the same call on XLA:CPU and on
PyTorch's CPU kernel in this run.

    .venv/bin/python benchmarks/attention_projection.py      (make bench-attention)

Each target runs in its own process (TORCH_TPU_LOWERING_TARGET is read once), eager without a
gradient and compiled (torch.compile(backend="tpu")). The compute bound is 4·B·H·Lq·Lk·E flops at
918 TFLOP/s; neither form skips the masked blocks of a causal mask. XLA:CPU and PyTorch CPU times
are medians of interleaved rounds on this host; they are bounded by its bf16 matmul rate and say
nothing about a TPU.
"""
import json
import os
import subprocess
import sys

CASES = {
    # name: (heads, kv heads, length, head dim, causal, boolean [L, L] mask)
    "causal, 8 heads x 2048, d 128": (8, 8, 2048, 128, True, False),
    "boolean [L, L] mask, 8 x 2048": (8, 8, 2048, 128, False, True),
    "causal GQA 8 over 2 heads, 2048": (8, 2, 2048, 128, True, False),
    "causal GQA 16 over 4, 1024, d 256": (16, 4, 1024, 256, True, False),
    "causal, 1000 tokens (padded to 1024)": (8, 8, 1000, 128, True, False),
}

WORKER = r"""
import json, sys, statistics, time
import torch, torch.nn.functional as F
import torch_tpu
from torch_tpu import aot
aot.configure("v6e:1x1")
cases, timing = json.loads(sys.argv[1]), sys.argv[2] == "1"
rows = {}
for name, (h, hkv, L, e, causal, mask) in cases.items():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, h, L, e, generator=g).to(torch.bfloat16)
    k, v = (torch.randn(1, hkv, L, e, generator=g).to(torch.bfloat16) for _ in range(2))
    m = (torch.rand(L, L, generator=g) > 0.3) if mask else None
    f = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal, enable_gqa=h != hkv)
    dev = [x.to("tpu") for x in (q, k, v)] + [None if m is None else m.to("tpu")]
    row = {}
    for mode in ("eager", "compiled"):
        run = torch.compile(f, backend="tpu", fullgraph=True, dynamic=False) if mode == "compiled" else f
        with torch.no_grad():
            run(*dev); torch.tpu.synchronize()
            before = aot.stats()
            run(*dev); torch.tpu.synchronize()
        d = aot.between(before, aot.stats())
        row[mode] = d["seconds"]
    if timing:
        def median_ms(fn, sync):
            fn(); sync(); xs = []
            for _ in range(5):
                s = time.perf_counter(); fn(); sync(); xs.append(time.perf_counter() - s)
            return statistics.median(xs) * 1e3
        with torch.no_grad():
            row["xla_cpu_ms"] = median_ms(lambda: f(*dev), torch.tpu.synchronize)
            row["torch_cpu_ms"] = median_ms(lambda: f(q, k, v, m), lambda: None)
    rows[name] = row
print("ROWS " + json.dumps(rows))
"""


def run_target(target, timing):
    env = dict(os.environ, TORCH_TPU_LOWERING_TARGET=target, TORCH_TPU_QUIET="1", TORCH_TPU_CACHE_DIR="")
    env.pop("TORCH_TPU_AOT_CHECK", None)
    res = subprocess.run([sys.executable, "-c", WORKER, json.dumps(CASES), "1" if timing else "0"], env=env,
                         capture_output=True, text=True, timeout=1800)
    if res.returncode != 0:
        sys.exit(res.stderr[-3000:])
    return json.loads(next(l for l in res.stdout.splitlines() if l.startswith("ROWS "))[5:])


def main():
    import libtpu  # noqa: F401  (the estimates need it: pip install -r requirements-aot.txt)
    exact, tpu = run_target("exact", timing=True), run_target("tpu", timing=False)
    print("Attention, bf16, batch 1: libtpu v6e:1x1 estimates (us) of the exact form and of the form lowered "
          "for libtpu; XLA:CPU and PyTorch CPU (ms) on this host, eager without a gradient")
    print(f"{'case':38s} {'bound':>6s} {'exact eager':>11s} {'exact comp.':>11s} {'tpu eager':>9s} "
          f"{'tpu comp.':>9s} {'x bound':>7s} {'XLA:CPU':>8s} {'PyT CPU':>8s}")
    for name, (h, hkv, L, e, causal, mask) in CASES.items():
        bound = 4 * h * L * L * e / 918e12 * 1e6
        x, t = exact[name], tpu[name]
        print(f"{name:38s} {bound:6.1f} {x['eager'] * 1e6:11.1f} {x['compiled'] * 1e6:11.1f} "
              f"{t['eager'] * 1e6:9.1f} {t['compiled'] * 1e6:9.1f} {t['eager'] * 1e6 / bound:7.2f} "
              f"{x['xla_cpu_ms']:8.1f} {x['torch_cpu_ms']:8.1f}")


if __name__ == "__main__":
    main()
