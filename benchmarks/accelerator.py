"""The engine on a device with its own memory: `tpu` over the CUDA PJRT plugin against PyTorch CUDA.

    TORCH_TPU_PJRT_PLUGIN=cuda python benchmarks/accelerator.py --out DIR   # on a GPU machine
    python benchmarks/accelerator.py --dry-run --out DIR                    # anywhere: tiny sizes

Two workloads, bf16, seeded weights (no download):
- decode of a ~1B Llama-architecture model (Llama 3.2 1B's shape: hidden 2048, 16 layers, 32 heads,
  8 KV heads, vocab 128256): `tpu` eager with DynamicCache, `tpu` with StaticCache (Transformers
  compiles the decode step with backend "tpu"), PyTorch CUDA eager (DynamicCache) and CUDA with
  StaticCache (Transformers compiles it with Inductor); tokens/s after a warm-up generate;
- one denoising step of the SD3.5-medium transformer layout at 1024x1024 (24 layers, 24 heads x 64,
  dual attention in layers 0..12, qk RMSNorm): `tpu` eager and compiled (backend "tpu"), CUDA eager
  and Inductor; seconds per step after a warm-up step.
For the `tpu` rows also launches per token/step (executables run) and host microseconds per
launch (the host time of an unsynchronised call over its launches). Prints a table and writes
it, with the platform, to DIR/accelerator.md. --dry-run uses tiny shapes on whatever plugin is
under `tpu` (XLA:CPU here) and leaves out the CUDA rows when there is no GPU: it checks the
script, not a device.
"""
import argparse
import os
import sys

os.environ.setdefault("TORCH_TPU_QUIET", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

import torch_tpu  # noqa: E402
from torch_tpu.compile import stats  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timing  # noqa: E402


def launches():
    """Executables run so far: eager ops and compiled graphs."""
    return torch_tpu.metrics.counters()["ops_run"] + sum(exe.runs for exe in list(stats.executables))


def llama(dry_run):
    if dry_run:
        cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2)
    else:  # meta-llama/Llama-3.2-1B's config.json
        cfg = transformers.LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                                       num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                                       max_position_embeddings=131072, rope_theta=500000.0, tie_word_embeddings=True)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).eval()


def sd35(dry_run):
    from diffusers import SD3Transformer2DModel

    if dry_run:
        kw = dict(sample_size=16, num_layers=2, attention_head_dim=16, num_attention_heads=4, joint_attention_dim=64,
                  caption_projection_dim=64, pooled_projection_dim=64, pos_embed_max_size=16,
                  dual_attention_layers=(0,))
        latent, text, width, pooled = 16, 8, 64, 64
    else:  # stabilityai/stable-diffusion-3.5-medium transformer/config.json
        kw = dict(sample_size=128, num_layers=24, attention_head_dim=64, num_attention_heads=24,
                  joint_attention_dim=4096, caption_projection_dim=1536, pooled_projection_dim=2048,
                  pos_embed_max_size=384, dual_attention_layers=tuple(range(13)))
        latent, text, width, pooled = 128, 333, 4096, 2048
    torch.manual_seed(0)
    model = SD3Transformer2DModel(patch_size=2, in_channels=16, out_channels=16, qk_norm="rms_norm", **kw)
    g = torch.Generator().manual_seed(0)
    inputs = dict(hidden_states=torch.randn(1, 16, latent, latent, generator=g),
                  encoder_hidden_states=torch.randn(1, text, width, generator=g),
                  pooled_projections=torch.randn(1, pooled, generator=g), timestep=torch.tensor([500.0]))
    return model.to(torch.bfloat16).eval(), {k: v.to(torch.bfloat16) if v.is_floating_point() else v
                                             for k, v in inputs.items()}


def decode_row(model, device, cache, new_tokens):
    ids = torch.randint(3, model.config.vocab_size, (1, 16), generator=torch.Generator().manual_seed(0)).to(device)
    kwargs = {"cache_implementation": "static"} if cache == "static" else {}

    def generate(n):
        return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                              min_new_tokens=n, do_sample=False, **kwargs)

    with torch.no_grad():
        generate(new_tokens)  # warm-up: compiles
        timing.sync(device)
        _, one = timing.timed(lambda: generate(1), device)
        before = launches() if device == "tpu" else 0
        out, total = timing.timed(lambda: generate(new_tokens), device)
    row = {"tokens/s": (new_tokens - 1) / max(total - one, 1e-9), "tokens": out[0, -new_tokens:].tolist()}
    if device == "tpu":
        row["launches/token"] = (launches() - before) / new_tokens
    return row


def step_row(model, inputs, device, compiled):
    backend = "tpu" if device == "tpu" else "inductor"
    fn = torch.compile(model, backend=backend, fullgraph=True, dynamic=False) if compiled else model
    args = {k: v.to(device) for k, v in inputs.items()}
    with torch.no_grad():
        fn(**args)
        timing.sync(device)
        before = launches() if device == "tpu" else 0
        out, host, seconds = timing.timed_host_and_device(lambda: fn(**args).sample, device)
    row = {"s/step": seconds, "out": out.float().cpu()}
    if device == "tpu":
        n = launches() - before
        row["launches/step"] = n
        row["host us/launch"] = host / max(n, 1) * 1e6
    return row


def run_rows(name, rows):
    results = {}
    for label, fn in rows:
        try:
            results[label] = fn()
        except Exception as e:  # a row that fails is reported, the others still run
            results[label] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
        print(f"{name} / {label}: {({k: v for k, v in results[label].items() if k not in ('tokens', 'out')})}",
              flush=True)
    return results


def table(header, results, cells):
    """Markdown rows: one per result, `cells(result)` after its label, or the row's error."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, r in results.items():
        row = [r["error"]] + [""] * (len(header) - 2) if "error" in r else [str(c) for c in cells(r)]
        lines.append("| " + " | ".join([label] + row) + " |")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry-run", action="store_true", help="tiny shapes; CUDA rows only if a GPU is present")
    p.add_argument("--out", default=".", help="folder for accelerator.md")
    p.add_argument("--new-tokens", type=int, default=None)
    args = p.parse_args()
    cuda = torch.cuda.is_available()
    new_tokens = args.new_tokens or (8 if args.dry_run else 64)
    lines = [f"platform under tpu: {torch_tpu._C._runtime_description()}",
             f"device: {torch.tpu.get_device_name()}", f"torch {torch.__version__}, CUDA reference: {cuda}", ""]

    model = llama(args.dry_run)
    llm_rows = [("tpu eager, DynamicCache", lambda: decode_row(model.to("tpu"), "tpu", "dynamic", new_tokens)),
                ("tpu, StaticCache (compiled)", lambda: decode_row(model.to("tpu"), "tpu", "static", new_tokens))]
    if cuda:
        llm_rows += [("cuda eager, DynamicCache", lambda: decode_row(model.to("cuda"), "cuda", "dynamic", new_tokens)),
                     ("cuda, StaticCache (Inductor)", lambda: decode_row(model.to("cuda"), "cuda", "static", new_tokens))]
    llm = run_rows("decode", llm_rows)
    del model

    model, inputs = sd35(args.dry_run)
    sd_rows = [("tpu eager", lambda: step_row(model.to("tpu"), inputs, "tpu", False)),
               ("tpu compiled", lambda: step_row(model.to("tpu"), inputs, "tpu", True))]
    if cuda:
        sd_rows += [("cuda eager", lambda: step_row(model.to("cuda"), inputs, "cuda", False)),
                    ("cuda Inductor", lambda: step_row(model.to("cuda"), inputs, "cuda", True))]
    sd = run_rows("denoising step", sd_rows)

    base = llm.get("cuda eager, DynamicCache", {}).get("tokens/s")
    lines += table(["decode (bf16, batch 1)", "tokens/s", "launches/token", "vs cuda eager"], llm,
                   lambda r: [f"{r['tokens/s']:.1f}", r.get("launches/token", "-"),
                              f"{r['tokens/s'] / base:.2f}x" if base else "-"])
    ref = next((r["tokens"] for r in llm.values() if "tokens" in r), None)
    same = all(r.get("tokens") == ref for r in llm.values() if "tokens" in r)
    lines += [f"greedy tokens equal across rows: {same}", ""]
    base = sd.get("cuda Inductor", {}).get("s/step")
    lines += table(["SD3.5-medium layout step", "s/step", "launches/step", "host us/launch", "vs cuda Inductor"], sd,
                   lambda r: [f"{r['s/step']:.4f}", r.get("launches/step", "-"),
                              f"{r['host us/launch']:.1f}" if "host us/launch" in r else "-",
                              f"{base / r['s/step']:.2f}x" if base else "-"])
    outs = [r["out"] for r in sd.values() if "out" in r]
    if len(outs) > 1:
        worst = max((o - outs[0]).abs().max().item() for o in outs[1:])
        lines.append(f"largest difference between rows' outputs (bf16): {worst:.3g}")
    report = "\n".join(lines)
    print(report)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "accelerator.md"), "w") as f:
        f.write(report + "\n")
    errors = [label for label, r in {**llm, **sd}.items() if "error" in r]
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
