"""Projection of the seed's headline, Qwen-Image 1024x1024 compiled on v6e, from libtpu's cost
analysis of full-size transformer graphs; no weights needed, no TPU needed.

The full model (60 blocks, 20B parameters, 41 GB in bfloat16) does not fit this machine or one
v6e chip (32 GB HBM). The real model class with the real config is built with 1 and then 2 of
its 60 blocks (seeded random weights, bfloat16), compiled with `torch.compile(backend="tpu",
fullgraph=True, dynamic=False)` on one 1024x1024 call (4096 image tokens), and libtpu compiles
each graph for one v6e chip (TORCH_TPU_AOT_CHECK) and estimates its time. The difference of the
two is one block; the rest (embeddings, final norm and projection) is the 1-block graph minus
one block. A step is 60 blocks + the rest per transformer call, two calls per step with true
classifier-free guidance (the pipeline's default with a negative prompt).

v6e-4 is projected three ways from that one-chip figure, each with its collectives:
- 4-way tensor parallelism (Megatron with sequence parallelism: every matmul, the attention heads and
  the norms split four ways): per call, the one-chip time / 4 plus two all-reduces per block (the
  row-parallel attention output and MLP output, both streams' tokens, bfloat16);
- classifier-free guidance split over two pairs of chips (the conditional and unconditional calls
  run at once), 2-way tensor parallelism within each pair;
- each with its collectives not overlapped with compute (added) and fully overlapped (the larger of
  the two). libtpu's cost analysis does not model ICI transfers (docs/parallel.md), so each
  all-reduce is a ring over ICI at 400 GB/s each way (roofline.ring_all_reduce_seconds).

What this is: libtpu's static estimate for one chip, and an ICI model for the collectives, next to
the seed's 3.5 s per image. What it is not: a measurement; the graphs also run once here on
XLA:CPU (minutes), which says nothing about TPU speed. Run: `make bench-projection` (or
.venv/bin/python benchmarks/qwen_image_projection.py).
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
from diffusers import QwenImageTransformer2DModel  # noqa: E402
from diffusers.utils import logging as diffusers_logging  # noqa: E402

import torch_tpu  # noqa: E402,F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graph_projection  # noqa: E402
import roofline  # noqa: E402

FULL_BLOCKS = 60  # Qwen/Qwen-Image transformer/config.json (the class's defaults)
CHIPS = 4  # the seed's v6e-4
SEED_SECONDS = 3.5  # the seed's compiled 1024x1024 image on v6e-4
HIDDEN = 3072  # the blocks' width (24 heads x 128)


def graph_estimate(blocks, size, text_tokens):
    """libtpu's estimate (seconds, flops, bytes) of one transformer call with `blocks` blocks."""
    torch.manual_seed(0)
    model = QwenImageTransformer2DModel(num_layers=blocks).to(torch.bfloat16).eval()
    side = size // 16  # VAE factor 8, then 2x2 patches
    inputs = dict(
        hidden_states=torch.randn(1, side * side, 64, dtype=torch.bfloat16),
        encoder_hidden_states=torch.randn(1, text_tokens, 3584, dtype=torch.bfloat16),
        # The pipeline passes no mask for a prompt without padding (it drops an all-ones
        # prompt_embeds_mask), so the joint attention is unmasked, as here.
        encoder_hidden_states_mask=None,
        timestep=torch.tensor([0.5], dtype=torch.bfloat16), img_shapes=[[(1, side, side)]])
    model.to("tpu")
    args = {k: v.to("tpu") if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    r = graph_projection.compiled_call(model, lambda c: c(**args).sample.cpu())
    r["params"] = sum(p.numel() for p in model.parameters())
    model.to("cpu")
    return r


def per_call_on_chips(call_seconds, chips, tokens):
    """(compute, collectives) seconds of one transformer call split over `chips` chips."""
    all_reduce = roofline.ring_all_reduce_seconds(tokens * HIDDEN * 2, chips)
    return call_seconds / chips, FULL_BLOCKS * 2 * all_reduce


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1024, help="image side in pixels (multiple of 16)")
    parser.add_argument("--text-tokens", type=int, default=64, help="prompt length after the text encoder")
    parser.add_argument("--steps", type=int, default=50, help="denoising steps (the pipeline's default)")
    args = parser.parse_args()
    diffusers_logging.set_verbosity_error()  # the bfloat16 cast's notice about float32 modules (there are none)
    if not importlib.util.find_spec("libtpu"):
        sys.exit("libtpu is not installed (pip install -r requirements-aot.txt): nothing to project")

    one, two = graph_estimate(1, args.size, args.text_tokens), graph_estimate(2, args.size, args.text_tokens)
    keys = ("seconds", "flops", "bytes", "params")
    block = graph_projection.difference(two, one, keys)
    rest = graph_projection.difference(one, block, keys)
    call = {k: rest[k] + FULL_BLOCKS * block[k] for k in keys}
    step_chip = 2 * call["seconds"]  # true CFG: conditional and unconditional calls
    image_chip = args.steps * step_chip
    image_ideal = image_chip / CHIPS

    print(f"Qwen-Image projection - libtpu v6e:1x1 cost analysis of the real model class at full width, "
          f"{args.size}x{args.size} ({(args.size // 16) ** 2} image tokens, {args.text_tokens} text tokens), bfloat16")
    print(f"{'graph':<28} {'params':>9} {'v6e est.':>11} {'GFLOP':>9} {'GB moved':>9} {'XLA:CPU run':>12}")
    for name, r in (("1 block + rest", one), ("2 blocks + rest", two)):
        print(f"{name:<28} {r['params'] / 1e9:>8.2f}B {r['seconds'] * 1e3:>9.2f}ms {r['flops'] / 1e9:>9.0f} "
              f"{r['bytes'] / 1e9:>9.2f} {r['wall']:>11.1f}s")
    print(f"{'one block (difference)':<28} {block['params'] / 1e9:>8.2f}B {block['seconds'] * 1e3:>9.2f}ms "
          f"{block['flops'] / 1e9:>9.0f} {block['bytes'] / 1e9:>9.2f}")
    print(f"{'full call (rest + 60 blocks)':<28} {call['params'] / 1e9:>8.2f}B {call['seconds'] * 1e3:>9.2f}ms "
          f"{call['flops'] / 1e12:>8.1f}T {call['bytes'] / 1e9:>9.2f}")
    bound = roofline.bound_seconds(call["flops"], 2 * call["params"])
    print(f"bound of a call: {bound * 1e3:.2f} ms (max of flops / 918 TFLOP/s and weights once / 1.638 TB/s); "
          f"estimate / bound {call['seconds'] / bound:.2f}x; per image on one chip at the bound "
          f"{args.steps * 2 * bound:.1f} s, on v6e-4 {args.steps * 2 * bound / CHIPS:.2f} s")
    print(f"per step (2 calls, true CFG), one chip:      {step_chip:.3f} s "
          f"({2 * call['flops'] / step_chip / 1e12:.0f} TFLOP/s achieved in the estimate)")
    print(f"per image ({args.steps} steps), one chip:          {image_chip:.1f} s")
    tokens = (args.size // 16) ** 2 + args.text_tokens
    print(f"\nper image on v6e-4 (seed: {SEED_SECONDS} s compiled)          compute  collectives  not overlapped  overlapped")
    for name, chips, calls_per_step in (("4-way TP, both CFG calls in turn", 4, 2),
                                        ("CFG over 2 pairs, 2-way TP in each", 2, 1)):
        compute, comm = per_call_on_chips(call["seconds"], chips, tokens)
        n = args.steps * calls_per_step
        print(f"  {name:<40} {n * compute:>7.2f} s {n * comm:>10.2f} s {n * (compute + comm):>13.2f} s "
              f"{n * max(compute, comm):>10.2f} s")
    print(f"  (ideal 4-way split, no collectives: {image_ideal:.2f} s)")
    print("Collectives: two ring all-reduces of (image + text tokens) x 3072 bfloat16 per block at 400 GB/s "
          "each way over ICI (libtpu does not model ICI); the seed's step count and prompt length are not "
          "stated, so the per-step figure is the comparable one.")


if __name__ == "__main__":
    main()
