"""Stable Diffusion 3.5 Medium 1024x1024 on one v6e chip, projected from libtpu's cost analysis of
full-width graphs of the real transformer class; no weights, no TPU needed.

SD3.5 Medium's transformer (stabilityai/stable-diffusion-3.5-medium, transformer/config.json: 24
layers of width 1536, 24 heads of 64, dual attention in layers 0-12, RMS qk-norm) is built with 2
and 3 of its blocks, without and with one dual-attention block, seeded weights, bfloat16, and each
graph compiled with torch.compile(backend="tpu", fullgraph=True, dynamic=False) for one call at
batch 2 (the pipeline runs classifier-free guidance as one batch of two), 4096 image tokens and
333 prompt tokens (77 CLIP + 256 T5, the pipeline's defaults). libtpu compiles each graph for one
v6e chip (TORCH_TPU_AOT_CHECK). plain = P3 - P2, dual = D3 - P3 + plain, rest (embeddings, the
last, context-only block, final norm and projection) = P2 - plain; a call = rest + 13 dual + 10
plain. The bound is max(libtpu's flops / 918 TFLOP/s, weights once / 1.638 TB/s).

    .venv/bin/python benchmarks/sd35_projection.py      (part of make bench-projection)
"""
import argparse
import importlib.util
import os
import sys
import tempfile

os.environ.setdefault("TORCH_TPU_QUIET", "1")
os.environ.setdefault("TORCH_TPU_CACHE_DIR", tempfile.mkdtemp(prefix="tpu_projection_"))
os.environ.setdefault("TORCH_TPU_AOT_CHECK", "v6e:1x1")

import torch  # noqa: E402
from diffusers import SD3Transformer2DModel  # noqa: E402
from diffusers.utils import logging as diffusers_logging  # noqa: E402

import torch_tpu  # noqa: E402,F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graph_projection  # noqa: E402
import roofline  # noqa: E402

# stabilityai/stable-diffusion-3.5-medium transformer/config.json
MEDIUM = dict(sample_size=128, patch_size=2, in_channels=16, out_channels=16, attention_head_dim=64,
              num_attention_heads=24, joint_attention_dim=4096, caption_projection_dim=1536,
              pooled_projection_dim=2048, pos_embed_max_size=384, qk_norm="rms_norm")
LAYERS, DUAL_LAYERS = 24, 13  # dual attention in layers 0-12; layer 23 is the context-only last block
TEXT_TOKENS = 77 + 256  # CLIP + T5 (max_sequence_length=256)
STEPS = 28  # StableDiffusion3Pipeline's default num_inference_steps
KEYS = ("seconds", "flops", "bytes", "params")


def graph(layers, dual, size, batch):
    torch.manual_seed(0)
    model = SD3Transformer2DModel(num_layers=layers, dual_attention_layers=dual, **MEDIUM).to(torch.bfloat16).eval()
    latent = size // 8
    gen = torch.Generator().manual_seed(0)
    args = dict(hidden_states=torch.randn(batch, 16, latent, latent, generator=gen),
                encoder_hidden_states=torch.randn(batch, TEXT_TOKENS, 4096, generator=gen),
                pooled_projections=torch.randn(batch, 2048, generator=gen),
                timestep=torch.full((batch,), 500.0))
    args = {k: v.to(torch.bfloat16).to("tpu") for k, v in args.items()}
    model.to("tpu")
    r = graph_projection.compiled_call(model, lambda c: c(**args).sample.cpu())
    r["params"] = sum(p.numel() for p in model.parameters())
    model.to("cpu")
    return r


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1024, help="image side in pixels (multiple of 16)")
    parser.add_argument("--steps", type=int, default=STEPS, help="denoising steps")
    args = parser.parse_args()
    diffusers_logging.set_verbosity_error()
    if not importlib.util.find_spec("libtpu"):
        sys.exit("libtpu is not installed (pip install -r requirements-aot.txt): nothing to project")

    p2, p3, d3 = graph(2, (), args.size, 2), graph(3, (), args.size, 2), graph(3, (0,), args.size, 2)
    plain = graph_projection.difference(p3, p2, KEYS)
    dual = {k: d3[k] - p3[k] + plain[k] for k in KEYS}
    rest = graph_projection.difference(p2, plain, KEYS)
    call = {k: rest[k] + DUAL_LAYERS * dual[k] + (LAYERS - 1 - DUAL_LAYERS) * plain[k] for k in KEYS}
    bound = roofline.bound_seconds(call["flops"], 2 * call["params"])

    tokens = (args.size // 16) ** 2
    print(f"SD3.5 Medium projection - libtpu v6e:1x1 cost analysis of the real transformer class at full width, "
          f"{args.size}x{args.size} ({tokens} image + {TEXT_TOKENS} prompt tokens), batch 2 (CFG), bfloat16")
    print(f"{'graph':<34} {'params':>9} {'v6e est.':>10} {'TFLOP':>7} {'GB moved':>9} {'unmodelled':>10} {'XLA:CPU':>8}")
    for name, r in (("2 plain blocks (last one context-only)", p2), ("3 plain blocks", p3),
                    ("dual + 2 plain blocks", d3)):
        print(f"{name:<34} {r['params'] / 1e9:>8.3f}B {r['seconds'] * 1e3:>8.2f}ms {r['flops'] / 1e12:>7.2f} "
              f"{r['bytes'] / 1e9:>9.2f} {r['unmodelled']:>10} {r['wall']:>7.0f}s")
    for name, r in (("one plain block", plain), ("one dual-attention block", dual), ("rest", rest),
                    ("full call (24 blocks)", call)):
        print(f"{name:<34} {r['params'] / 1e9:>8.3f}B {r['seconds'] * 1e3:>8.2f}ms {r['flops'] / 1e12:>7.2f} "
              f"{r['bytes'] / 1e9:>9.2f}")
    print(f"bound of a call: {bound * 1e3:.2f} ms (max of flops / 918 TFLOP/s and weights once / 1.638 TB/s); "
          f"estimate / bound {call['seconds'] / bound:.2f}x")
    print(f"per image ({args.steps} steps, one call each), one chip: {args.steps * call['seconds']:.2f} s "
          f"(bound {args.steps * bound:.2f} s); the VAE decode and text encoders are not included")


if __name__ == "__main__":
    main()
