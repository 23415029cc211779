"""Storage layout policy, judged by libtpu: estimated v6e time of whole eager steps with
flat storages vs shaped storages (TORCH_TPU_STORAGE_LAYOUT), plus single ops through the engine.

Run: .venv/bin/python benchmarks/layout_steps.py  (needs `pip install libtpu`; no TPU needed).
Each policy runs in its own process with TORCH_TPU_AOT_CHECK=v6e:1x1; a workload is warmed up,
then its steps are run with the per-op estimate counters reset, so the sums cover exactly those
steps. libtpu gives no estimate for some modules (negative optimal_seconds): the table says how
many ops per step were estimated, which is the same for both policies when the comparison holds.
"""
import json
import os
import subprocess
import sys

STEPS = 4


def mlp_step():
    """The quick start's training step: Linear(16, 64) -> ReLU -> Linear(64, 2), AdamW."""
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    xs, ys = torch.randn(256, 16).to("tpu"), torch.randint(0, 2, (256,)).to("tpu")

    def step():
        loss = F.cross_entropy(model(xs), ys)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def llm_decode_step():
    """One decode step of a small Llama (hidden 512, 4 layers, bf16) with a 64-token KV cache."""
    import torch
    import transformers
    config = transformers.LlamaConfig(vocab_size=4096, hidden_size=512, intermediate_size=1408,
                                      num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
                                      max_position_embeddings=256)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16).to("tpu").eval()
    ids = torch.randint(0, 4096, (1, 64)).to("tpu")
    with torch.no_grad():
        out = model(ids, use_cache=True)
    cache = out.past_key_values
    token = out.logits[:, -1:].argmax(-1)
    position = [64]

    def step():
        with torch.no_grad():
            model(token, past_key_values=cache, use_cache=True,
                  cache_position=torch.tensor([position[0]], device="tpu"))
            # Back to 64 tokens: every step sees the same cache length (no growth measured).
            cache.crop(-1)
    return step


def op(fn_builder):
    def build():
        import torch
        torch.manual_seed(0)
        return fn_builder(torch)
    return build


OPS = {
    "matmul 1024^3 bf16": op(lambda t: (lambda a, b: lambda: a @ b)(
        *(t.randn(1024, 1024, dtype=t.bfloat16).to("tpu") for _ in range(2)))),
    "bmm scores 16x1024x64 @ 16x64x1024 bf16": op(lambda t: (lambda q, k: lambda: q @ k.transpose(1, 2))(
        t.randn(16, 1024, 64, dtype=t.bfloat16).to("tpu"), t.randn(16, 1024, 64, dtype=t.bfloat16).to("tpu"))),
    "transpose 4096x64 contiguous bf16": op(lambda t: (lambda x: lambda: x.t().contiguous())(
        t.randn(4096, 64, dtype=t.bfloat16).to("tpu"))),
    "sdpa 1x16x1024x64 bf16": op(lambda t: (lambda q, k, v: lambda: t.nn.functional.scaled_dot_product_attention(q, k, v))(
        *(t.randn(1, 16, 1024, 64, dtype=t.bfloat16).to("tpu") for _ in range(3)))),
    "layer_norm 4096x1024 bf16": op(lambda t: (lambda x, ln: lambda: ln(x))(
        t.randn(4096, 1024, dtype=t.bfloat16).to("tpu"), t.nn.LayerNorm(1024).to(t.bfloat16).to("tpu"))),
    "conv2d 1x64x64x64 3x3 bf16": op(lambda t: (lambda x, c: lambda: c(x))(
        t.randn(1, 64, 64, 64, dtype=t.bfloat16).to("tpu"), t.nn.Conv2d(64, 64, 3, padding=1).to(t.bfloat16).to("tpu"))),
    "embedding 32000x1024[128] bf16": op(lambda t: (lambda e, i: lambda: e(i))(
        t.nn.Embedding(32000, 1024).to(t.bfloat16).to("tpu"), t.randint(0, 32000, (128,)).to("tpu"))),
}
WHOLE = {"quick start training step (MLP + AdamW)": mlp_step, "tiny-LLM decode step (Llama, bf16)": llm_decode_step}


def measure(name, builder):
    import torch
    import torch_tpu
    step = builder()
    step()
    step()
    torch.tpu.synchronize()
    torch_tpu.metrics.reset()
    for _ in range(STEPS):
        step()
    torch.tpu.synchronize()
    a = torch_tpu._C._aot_check_stats()
    return {"us": a["estimated_seconds"] / STEPS * 1e6, "ops": a["ops_run"] / STEPS,
            "estimated": a["ops_estimated"] / STEPS, "bytes": a["bytes"] / STEPS,
            "rejected": a["rejected"], "error": a["error"]}


def worker():
    results = {}
    for name, builder in {**WHOLE, **OPS}.items():
        results[name] = measure(name, builder)
    print("RESULT " + json.dumps(results))


def main():
    if "--worker" in sys.argv:
        worker()
        return
    by_policy = {}
    for policy in ("flat", "shaped"):
        env = dict(os.environ, TORCH_TPU_STORAGE_LAYOUT=policy, TORCH_TPU_AOT_CHECK="v6e:1x1",
                   TORCH_TPU_QUIET="1", TORCH_TPU_CACHE_DIR="")
        out = subprocess.run([sys.executable, __file__, "--worker"], env=env, capture_output=True, text=True)
        line = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")]
        if out.returncode != 0 or not line:
            sys.exit(f"{policy} worker failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        by_policy[policy] = json.loads(line[0][7:])
    print("| workload (libtpu v6e:1x1 estimate per step) | flat storages | shaped storages | shaped / flat | ops estimated per step (flat / shaped) |")
    print("|---|---:|---:|---:|---|")
    for name in by_policy["flat"]:
        f, s = by_policy["flat"][name], by_policy["shaped"][name]
        ratio = s["us"] / f["us"] if f["us"] > 0 else float("nan")
        print(f"| {name} | {f['us']:.2f} us | {s['us']:.2f} us | {ratio:.2f}x | "
              f"{f['estimated']:g} of {f['ops']:g} / {s['estimated']:g} of {s['ops']:g} |")


if __name__ == "__main__":
    main()
