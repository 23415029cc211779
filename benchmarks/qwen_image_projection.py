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

What this is: libtpu's static estimate for one chip, assuming perfect 4-way tensor parallelism
for v6e-4 (no communication cost), next to the seed's 3.5 s per image. What it is not: a
measurement; the graphs also run once here on XLA:CPU (minutes), which says nothing about TPU
speed. Run: `make bench-projection` (or .venv/bin/python benchmarks/qwen_image_projection.py).
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
import torch._dynamo  # noqa: E402
from diffusers import QwenImageTransformer2DModel  # noqa: E402
from diffusers.utils import logging as diffusers_logging  # noqa: E402

import torch_tpu  # noqa: E402
from torch_tpu.compile import stats  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timing  # noqa: E402

FULL_BLOCKS = 60  # Qwen/Qwen-Image transformer/config.json (the class's defaults)
CHIPS = 4  # the seed's v6e-4
SEED_SECONDS = 3.5  # the seed's compiled 1024x1024 image on v6e-4


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
    torch._dynamo.reset()
    stats.executables.clear()
    compiled = torch.compile(model, backend="tpu", fullgraph=True, dynamic=False)
    with torch.no_grad():
        _, wall = timing.timed(lambda: compiled(**args).sample.cpu(), "tpu")
    found = [exe.last_aot() for exe in stats.executables if exe.last_aot()]
    if not found or not all(a["accepted"] for a in found):
        raise RuntimeError(f"libtpu did not accept the {blocks}-block graph: {[a['message'] for a in found]}")
    seconds = sum(a["optimal_seconds"] if a["optimal_seconds"] >= 0 else a["roofline_seconds"] for a in found)
    params = sum(p.numel() for p in model.parameters())
    model.to("cpu")
    return dict(seconds=seconds, flops=sum(a["flops"] for a in found), bytes=sum(a["bytes_accessed"] for a in found),
                params=params, wall=wall, graphs=len(found))


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
    block = {k: two[k] - one[k] for k in ("seconds", "flops", "bytes", "params")}
    rest = {k: one[k] - block[k] for k in ("seconds", "flops", "bytes", "params")}
    call = {k: rest[k] + FULL_BLOCKS * block[k] for k in ("seconds", "flops", "bytes", "params")}
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
    print(f"per step (2 calls, true CFG), one chip:      {step_chip:.3f} s "
          f"({2 * call['flops'] / step_chip / 1e12:.0f} TFLOP/s achieved in the estimate)")
    print(f"per image ({args.steps} steps), one chip:          {image_chip:.1f} s")
    print(f"per image, v6e-4 with ideal 4-way TP:       {image_ideal:.1f} s   (seed: {SEED_SECONDS} s compiled)")
    print("Ideal TP ignores the all-reduces a sharded step needs; the seed's step count and prompt "
          "length are not stated, so the per-step figure is the comparable one.")


if __name__ == "__main__":
    main()
