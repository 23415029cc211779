"""The user's Diffusers script on `tpu`: load a pipeline, move it to the device, make an image.

    python examples/demo_sd.py                                   # a tiny local SD3.5-medium pipeline
    python examples/demo_sd.py --compile                         # the transformer compiled
    python examples/demo_sd.py --model stabilityai/stable-diffusion-3.5-medium --size 1024 --compile

Without --model the script builds (once, into --cache-dir) a scaled-down pipeline of the
SD3.5-medium architecture with seeded random weights (examples/build_tiny_pipelines.py): it
exercises the same code, but its image is noise. With --compile the transformer is compiled
with torch.compile(backend="tpu", fullgraph=True, dynamic=False), as the seed does.

The pipeline runs twice at the same size; the script prints both times and what each compiled,
the platform, and (with TORCH_TPU_AOT_CHECK=v6e:1x1 and libtpu installed) libtpu's v6e estimate
per denoising step of the second run.
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

import torch_tpu
import torch_tpu.aot


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="hub id or local directory (default: a tiny local SD3.5 pipeline)")
    p.add_argument("--prompt", default="a photo of an astronaut riding a horse on mars")
    p.add_argument("--size", type=int, default=None, help="image height and width (default: 1024, tiny: 128)")
    p.add_argument("--steps", type=int, default=None, help="denoising steps (default: 28, tiny: 4)")
    p.add_argument("--guidance", type=float, default=4.5)
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    p.add_argument("--compile", action="store_true", help="compile the transformer (backend tpu)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="out.png")
    p.add_argument("--cache-dir", default=os.path.join(tempfile.gettempdir(), "torch_tpu_tiny_pipelines"))
    return p.parse_args(argv)


def tiny_pipeline(cache_dir):
    path = Path(cache_dir) / "sd3"
    if not (path / "model_index.json").exists():
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import build_tiny_pipelines

        build_tiny_pipelines.build_sd3(str(path))
    return str(path)


def main(argv=None):
    args = parse_args(argv)
    from diffusers import DiffusionPipeline

    tiny = args.model is None
    model = tiny_pipeline(args.cache_dir) if tiny else args.model
    size = args.size or (128 if tiny else 1024)
    steps = args.steps or (4 if tiny else 28)
    pipe = DiffusionPipeline.from_pretrained(model, dtype=getattr(torch, args.dtype))
    pipe.to("tpu")
    pipe.set_progress_bar_config(disable=True)
    if args.compile:
        pipe.transformer.compile(backend="tpu", fullgraph=True, dynamic=False)

    def run():
        generator = torch.Generator("tpu").manual_seed(args.seed)
        compiles = torch_tpu.metrics.compiles()
        before = torch_tpu.aot.stats()
        start = time.perf_counter()
        image = pipe(prompt=args.prompt, height=size, width=size, num_inference_steps=steps,
                     guidance_scale=args.guidance, generator=generator).images[0]
        seconds = time.perf_counter() - start
        compiled = torch_tpu.metrics.compiles_line(compiles, torch_tpu.metrics.compiles())
        return image, seconds, compiled, before, torch_tpu.aot.stats()

    _, first, first_compiles, _, _ = run()
    image, second, second_compiles, before, after = run()
    image.save(args.out)
    print(f"wrote {args.out} ({image.size[0]}x{image.size[1]})" + (" - random tiny weights: noise" if tiny else ""))
    print(f"platform: {torch.tpu.get_device_name()} - {torch_tpu._C._runtime_description()}")
    print(f"pipeline: {model} ({args.dtype}, {steps} steps, transformer "
          f"{'compiled (backend tpu)' if args.compile else 'eager'})")
    print(f"first call:  {first:.2f} s, {first_compiles}")
    print(f"second call: {second:.2f} s, {second_compiles} "
          f"({first / max(second, 1e-9):.1f}x faster)")
    if after["topology"] and not after["error"]:
        run = torch_tpu.aot.between(before, after)
        per_step, roofline = run["seconds"] / steps, run["roofline_seconds"] / steps
        print(f"libtpu ({after['topology']}): {per_step * 1e3:.3f} ms per denoising step (whole pipeline call / "
              f"steps; roofline bound {roofline * 1e3:.3f} ms; {run['unmodelled']} of {run['ops']} launches have no "
              f"libtpu estimate and count at their roofline bound)")


if __name__ == "__main__":
    main()
