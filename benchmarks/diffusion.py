"""One denoising step of the SD3.5-medium and Qwen-Image transformers: our eager, our compiled,
PyTorch CPU eager and Inductor on the CPU, same machine, same run; plus libtpu's v6e estimate
of the compiled step.

Run: `make bench-diffusion` (or .venv/bin/python benchmarks/diffusion.py [--quick]). A step is
one transformer call on a batch of 2 (classifier-free guidance) at a fixed latent size, with the
real model classes scaled down in width and depth (seeded weights). The `tpu` device here is
XLA:CPU: its times say nothing about a TPU; the v6e column does. The seed's ratio to reach is
compiled >= 2.3x our eager per step (Qwen-Image on v6e-4: 8.0 s eager, 3.5 s compiled).
"""
import argparse
import copy
import importlib.util
import os
import sys
import tempfile

os.environ.setdefault("TORCH_TPU_QUIET", "1")
os.environ.setdefault("TORCH_TPU_CACHE_DIR", tempfile.mkdtemp(prefix="tpu_bench_diffusion_"))
if importlib.util.find_spec("libtpu") and "TORCH_TPU_AOT_CHECK" not in os.environ:
    os.environ["TORCH_TPU_AOT_CHECK"] = "v6e:1x1"

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
from diffusers import QwenImageTransformer2DModel, SD3Transformer2DModel  # noqa: E402

import torch_tpu  # noqa: E402
from torch_tpu.compile import stats  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flops import call_flops, cpu_matmul_gflops  # noqa: E402
from timing import compare, first_call, interleaved  # noqa: E402
from v6e import compiled_graphs_us, eager_call_us  # noqa: E402

LATENT = 32  # 256x256 images (VAE factor 8)


def sd3(width, layers):
    """SD3.5-medium's layout (dual attention in the first layers, qk RMSNorm), narrower."""
    heads = width // 64
    model = SD3Transformer2DModel(
        sample_size=LATENT, patch_size=2, in_channels=16, out_channels=16, num_layers=layers,
        attention_head_dim=64, num_attention_heads=heads, joint_attention_dim=width,
        caption_projection_dim=width, pooled_projection_dim=width, pos_embed_max_size=LATENT,
        dual_attention_layers=tuple(range(layers // 2)), qk_norm="rms_norm")
    inputs = dict(hidden_states=torch.randn(2, 16, LATENT, LATENT), encoder_hidden_states=torch.randn(2, 77, width),
                  pooled_projections=torch.randn(2, width), timestep=torch.tensor([500.0, 500.0]))
    return model, inputs


def qwen_image(width, layers):
    """Qwen-Image's MMDiT (complex RoPE over frame/height/width axes), narrower."""
    heads = width // 64
    model = QwenImageTransformer2DModel(
        patch_size=2, in_channels=64, out_channels=16, num_layers=layers, attention_head_dim=64,
        num_attention_heads=heads, joint_attention_dim=width, axes_dims_rope=(8, 28, 28))
    tokens = (LATENT // 2) ** 2
    inputs = dict(hidden_states=torch.randn(2, tokens, 64), encoder_hidden_states=torch.randn(2, 32, width),
                  encoder_hidden_states_mask=torch.ones(2, 32, dtype=torch.long), timestep=torch.tensor([0.5, 0.5]),
                  img_shapes=[[(1, LATENT // 2, LATENT // 2)]] * 2)
    return model, inputs


def on(device, inputs):
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def step(model, inputs, device, compiled):
    model = model.to(device).eval()
    backend = "tpu" if device == "tpu" else "inductor"
    fn = torch.compile(model, backend=backend, fullgraph=True, dynamic=False) if compiled else model
    args = on(device, inputs)

    def run():
        with torch.no_grad():
            fn(**args)
    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="narrower models, fewer iterations")
    args = parser.parse_args()
    width, layers, iters = (256, 2, 2) if args.quick else (512, 4, 5)
    rows = []
    for name, build in (("SD3.5-medium layout", sd3), ("Qwen-Image layout", qwen_image)):
        torch.manual_seed(0)
        model, inputs = build(width, layers)
        params = sum(p.numel() for p in model.parameters()) / 1e6
        result, runs = {"flops": call_flops(step(model, inputs, "cpu", False))}, {}
        torch._dynamo.reset()
        copies = {"cpu": model, "tpu": copy.deepcopy(model)}  # every variant stays alive (below)
        for device, compiled in (("cpu", False), ("cpu", True), ("tpu", False), ("tpu", True)):
            stats.reset()
            run = step(copies[device], inputs, device, compiled)
            result[(device, compiled, "first")] = first_call(run, device)
            if device == "tpu" and compiled:
                graphs = compiled_graphs_us()
                result["v6e"] = graphs[0] if graphs else None
            elif device == "tpu":
                result["v6e eager"] = eager_call_us(run)
            runs[(device, compiled)] = (run, device)
        # Timed round-robin (benchmarks/timing.py): this shared machine's drift lands on every
        # variant of a round instead of deciding a ratio.
        result.update(compare(interleaved(runs, iters)))
        del runs, copies
        rows.append((name, params, result))
    print(f"torch-tpu diffusion benchmark — tpu device: {torch_tpu._C._platform_name()}, "
          f"{torch.get_num_threads()} CPU threads; one denoising step = transformer on batch 2, "
          f"{LATENT}x{LATENT} latents ({LATENT * 8} px), float32; PyTorch CPU matmul here: "
          f"{cpu_matmul_gflops():.0f} GFLOP/s")
    header = (f"{'transformer':<22} {'params':>7} {'tpu eager ms':>12} {'tpu comp ms':>11} {'CPU eager ms':>12} "
              f"{'Inductor ms':>11} {'comp/eager':>10} {'comp/ind.':>9} {'GFLOP':>6} {'comp GFLOP/s':>12} {'1st/2nd':>8} "
              f"{'v6e eager us':>12} "
              f"{'v6e comp. us':>12} {'v6e ratio':>9}")
    print(header)
    print("-" * len(header))
    for name, params, r in rows:
        te, tc, ce, ci = (r[k] * 1e3 for k in (("tpu", False), ("tpu", True), ("cpu", False), ("cpu", True)))
        first = r[("tpu", True, "first")] * 1e3
        v6e = r.get("v6e")
        eager = r.get("v6e eager")
        v6e_text = f"{v6e:.1f}" if v6e is not None else "-"
        eager_text = f"{eager['us']:.1f} ({eager['launches']})" if eager else "-"
        v6e_ratio = f"{eager['us'] / v6e:.2f}x" if eager and v6e else "-"
        print(f"{name:<22} {params:>6.1f}M {te:>12.1f} {tc:>11.1f} {ce:>12.1f} {ci:>11.1f} {r['comp/eager']:>9.2f}x "
              f"{r['comp/ind.']:>8.2f}x {r['flops'] / 1e9:>6.1f} {r['flops'] / tc / 1e6:>12.0f} {first / tc:>7.0f}x "
              f"{eager_text:>12} {v6e_text:>12} {v6e_ratio:>9}")
    print("Steady times: medians over 5 rounds that time every variant in turn; ratios: medians of the "
          "per-round ratios. comp/eager: our eager / our compiled per step (seed's ratio 2.3x); comp/ind.: Inductor CPU / our "
          "compiled (>1: we are faster); GFLOP: one step's matrix products and convolutions (PyTorch's "
          "FlopCounterMode, attention in its math form); comp GFLOP/s: that over our compiled step, to set "
          "beside PyTorch's own CPU matmul rate in the title line; 1st/2nd: first compiled call (compiles) / a later one; v6e est.: "
          "libtpu's estimate of the compiled step on one v6e chip; v6e eager: the sum of libtpu's estimates of "
          "every op module one eager step launches (roofline bound where libtpu gives no estimate; launches in brackets; per-launch host overhead, which "
          "a TPU adds on top, is not in it); v6e ratio: v6e eager / v6e compiled.")


if __name__ == "__main__":
    main()
