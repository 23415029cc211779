"""Diffusers pipelines on `tpu` against the same pipelines on the CPU (issue 9).

The pipelines are examples/build_tiny_pipelines.py's scaled-down SD3.5-medium and Qwen-Image
(real classes, seeded weights, local tokenizers), saved and loaded with from_pretrained.
"""
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch._dynamo

import torch_tpu

diffusers = pytest.importorskip("diffusers")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
import build_tiny_pipelines  # noqa: E402
from helpers import executables_built

PROMPT = "a photo of a cat"


@pytest.fixture(scope="module")
def pipelines(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipelines")
    return {"sd3": build_tiny_pipelines.build_sd3(str(root / "sd3")),
            "qwen_image": build_tiny_pipelines.build_qwen_image(str(root / "qwen_image"))}


def load(path, device, dtype=torch.float32):
    pipe = diffusers.DiffusionPipeline.from_pretrained(path, dtype=dtype).to(device)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def run(pipe, generator, size=128, steps=3, output_type="latent", **kw):
    if isinstance(pipe, diffusers.QwenImagePipeline):
        kw = {"true_cfg_scale": 4.0, "negative_prompt": " ", **kw}
    else:
        kw = {"guidance_scale": 4.5, **kw}
    return pipe(prompt=kw.pop("prompt", PROMPT), height=size, width=size, num_inference_steps=steps,
                generator=generator, output_type=output_type, **kw).images


def psnr(a, b):
    mse = float(((torch.as_tensor(a).float() - torch.as_tensor(b).float()) ** 2).mean())
    return math.inf if mse == 0 else 10 * math.log10(1.0 / mse)


def compiles():
    return executables_built()


@pytest.mark.parametrize("mode", ["eager", "fused", "compiled"])
@pytest.mark.parametrize("name", ["sd3", "qwen_image"])
def test_pipeline_matches_cpu(pipelines, name, mode, no_fallbacks):
    cpu = load(pipelines[name], "cpu")
    pipe = load(pipelines[name], "tpu")
    if mode == "compiled":
        torch._dynamo.reset()
        pipe.transformer.compile(backend="tpu", fullgraph=True, dynamic=False)
    eager_mode = "fused" if mode == "fused" else torch.tpu.get_eager_mode()
    with torch.tpu.eager_mode(eager_mode):  # fused: the denoising steps run as recorded programs
        latents = run(pipe, torch.Generator("cpu").manual_seed(0))
        image = run(pipe, torch.Generator("cpu").manual_seed(0), output_type="np")
    expected = run(cpu, torch.Generator("cpu").manual_seed(0))
    assert latents.device.type == "tpu"
    torch.testing.assert_close(latents.cpu(), expected, rtol=1e-4, atol=1e-4)
    reference = run(cpu, torch.Generator("cpu").manual_seed(0), output_type="np")
    assert image.shape == reference.shape == (1, 128, 128, 3)
    assert psnr(image, reference) >= 40


@pytest.mark.parametrize("name", ["sd3", "qwen_image"])
def test_bfloat16_and_tpu_generator(pipelines, name, no_fallbacks):
    """bf16 on tpu vs bf16 on the CPU: the same math rounded differently over 3 steps — latents
    agree to 0.1 of their scale (a stated tolerance; float32 is checked to 1e-4 above)."""
    pipe = load(pipelines[name], "tpu", torch.bfloat16)
    cpu = load(pipelines[name], "cpu", torch.bfloat16)
    got = run(pipe, torch.Generator("cpu").manual_seed(0)).float().cpu()
    expected = run(cpu, torch.Generator("cpu").manual_seed(0)).float()
    scale = expected.abs().max()
    assert (got - expected).abs().max() <= 0.1 * scale
    # A tpu generator: reproducible under its seed, different for another seed.
    a = run(pipe, torch.Generator("tpu").manual_seed(7)).cpu()
    b = run(pipe, torch.Generator("tpu").manual_seed(7)).cpu()
    c = run(pipe, torch.Generator("tpu").manual_seed(8)).cpu()
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.strict_eager
def test_compiled_second_call_compiles_nothing_and_a_new_size_compiles_once_more(pipelines):
    from torch_tpu.compile import stats

    torch._dynamo.reset()
    stats.reset()
    pipe = load(pipelines["sd3"], "tpu")
    pipe.transformer.compile(backend="tpu", fullgraph=True, dynamic=False)
    def compiles_by_graph():  # graph source location -> executables compiled for it
        totals = {}
        for e in stats.executables:
            totals[e.name] = totals.get(e.name, 0) + e.compiles
        return totals

    # Graphs other tests compiled through Inductor stay alive for the process (docs/compile.md).
    others = set(compiles_by_graph())
    run(pipe, torch.Generator("cpu").manual_seed(0))
    graphs = compiles_by_graph()
    before = compiles()
    run(pipe, torch.Generator("cpu").manual_seed(1))
    assert compiles() == before, "a second call of the same size compiled"
    run(pipe, torch.Generator("cpu").manual_seed(0), size=96)
    grown = {name: n - graphs.get(name, 0) for name, n in compiles_by_graph().items() if name not in others}
    assert grown and all(n == 1 for n in grown.values()), grown  # every graph exactly once more
    # The metrics name the input that changed (latents: 128 px -> 16x16, 96 px -> 12x12).
    reasons = " ".join(torch_tpu.metrics.recompile_reasons())
    assert "16, 16] -> float32[2, 16, 12, 12]" in reasons, reasons


def test_denoising_loop_with_timestep_views_compiles_once(pipelines, no_fallbacks):
    """Diffusers clones the timestep on tpu because a view recompiled Google's backend every
    step; ours takes offsets as runtime values, so views of `timesteps` share one graph."""
    torch._dynamo.reset()
    pipe = load(pipelines["sd3"], "tpu")
    transformer = pipe.transformer
    transformer.compile(backend="tpu", fullgraph=True, dynamic=False)
    cfg = transformer.config
    latents = torch.randn(2, cfg.in_channels, 16, 16, device="tpu")
    text = torch.randn(2, 9, cfg.joint_attention_dim, device="tpu")
    pooled = torch.randn(2, cfg.pooled_projection_dim, device="tpu")
    timesteps = torch.linspace(1000, 10, 4, device="tpu").repeat_interleave(2).reshape(4, 2)
    with torch.no_grad():
        transformer(hidden_states=latents, encoder_hidden_states=text, pooled_projections=pooled,
                    timestep=timesteps[0]).sample
        before = compiles()
        for i in range(1, 4):  # timesteps[i]: a view at a new offset each step
            out = transformer(hidden_states=latents, encoder_hidden_states=text, pooled_projections=pooled,
                              timestep=timesteps[i]).sample
    assert compiles() == before
    cpu = load(pipelines["sd3"], "cpu").transformer
    with torch.no_grad():
        expected = cpu(hidden_states=latents.cpu(), encoder_hidden_states=text.cpu(),
                       pooled_projections=pooled.cpu(), timestep=timesteps[3].cpu()).sample
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-4)


def outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # the exception a user sees
        return (type(e).__name__, str(e).split("\n")[0])


def test_bad_inputs_behave_as_on_cpu(pipelines):
    cpu = load(pipelines["sd3"], "cpu")
    pipe = load(pipelines["sd3"], "tpu")
    # More prompts than generators: diffusers' ValueError on both devices.
    too_few = [outcome(lambda p=p: run(p, [torch.Generator("cpu").manual_seed(0)], steps=1,
                                       prompt=[PROMPT, PROMPT, PROMPT])) for p in (cpu, pipe)]
    assert too_few[0][0] == too_few[1][0] == "ValueError" and too_few[0][1] == too_few[1][1], too_few
    # A size the VAE cannot divide: diffusers' own check, same message.
    odd = [outcome(lambda p=p: run(p, torch.Generator("cpu").manual_seed(0), size=100, steps=1)) for p in (cpu, pipe)]
    assert odd[0][0] == odd[1][0] and odd[0][1] == odd[1][1], odd
    # A CPU generator with a tpu pipeline: the noise is drawn on the CPU, as diffusers does for
    # CUDA pipelines, so the result equals the CPU pipeline's.
    got = run(pipe, torch.Generator("cpu").manual_seed(3), steps=1).cpu()
    torch.testing.assert_close(got, run(cpu, torch.Generator("cpu").manual_seed(3), steps=1), rtol=1e-4, atol=1e-4)


DEMO = EXAMPLES / "demo_sd.py"


def test_demo_sd_writes_a_png_and_the_compiled_second_call_compiles_nothing(tmp_path):
    from PIL import Image

    env = dict(os.environ, TORCH_TPU_QUIET="1")
    env.pop("TORCH_TPU_AOT_CHECK", None)
    out = subprocess.run([sys.executable, str(DEMO), "--compile", "--steps", "2", "--out", str(tmp_path / "out.png"),
                          "--cache-dir", str(tmp_path / "cache")], env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert Image.open(tmp_path / "out.png").size == (128, 128)
    assert "first call:" in out.stdout and "second call:" in out.stdout
    assert "0 executables compiled" in out.stdout.split("second call:")[1]


def _tiny_qwen_image_transformer():
    torch.manual_seed(0)
    return diffusers.QwenImageTransformer2DModel(
        patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=16, num_attention_heads=4,
        joint_attention_dim=16, guidance_embeds=False, axes_dims_rope=(8, 4, 4)).eval()


def _transformer_inputs(device, height=4, width=4):
    g = torch.Generator().manual_seed(0)
    return dict(hidden_states=torch.randn(1, height * width, 16, generator=g).to(device),
                encoder_hidden_states=torch.randn(1, 8, 16, generator=g).to(device),
                encoder_hidden_states_mask=torch.ones(1, 8, dtype=torch.long).to(device),
                timestep=torch.tensor([1.0]).to(device).expand(1), img_shapes=[(1, height, width)])


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_group_offloading_with_streams(mode):
    """Diffusers' group offloading onto tpu (blocks kept on the CPU, moved in per forward on a
    stream, record_stream on the moved tensors), eager and compiled, as the model on the CPU. In
    compiled mode the RoPE table stays a CPU tensor that the compiled region moves itself."""
    model = _tiny_qwen_image_transformer()
    with torch.no_grad():
        expected = model(**_transformer_inputs("cpu")).sample
        model.enable_group_offload(onload_device="tpu", offload_device="cpu", offload_type="block_level",
                                   num_blocks_per_group=1, use_stream=True, record_stream=True, non_blocking=True)
        if mode == "compiled":
            torch._dynamo.reset()
            model.compile(backend="tpu")
        for _ in range(2):
            out = model(**_transformer_inputs("tpu")).sample
            torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("use_stream", [False, True])
def test_group_offloading_to_disk_by_device_name_is_refused_by_safetensors(tmp_path, use_stream):
    """Group offloading to disk reads each group back with safetensors, and Diffusers asks it for
    device "tpu" (even with streams: the group of top-level modules loads without one), a name
    safetensors 0.8 refuses in Rust with no extension point (docs/diffusers.md). Offloading to
    CPU memory works with and without streams."""
    import safetensors

    model = _tiny_qwen_image_transformer()
    with torch.no_grad():
        expected = model(**_transformer_inputs("cpu")).sample
        model.enable_group_offload(onload_device="tpu", offload_device="cpu", offload_type="block_level",
                                   num_blocks_per_group=1, use_stream=use_stream,
                                   offload_to_disk_path=str(tmp_path))
        with pytest.raises(safetensors.SafetensorError, match="device tpu is invalid"):
            model(**_transformer_inputs("tpu"))
        model = _tiny_qwen_image_transformer()
        model.enable_group_offload(onload_device="tpu", offload_device="cpu", offload_type="block_level",
                                   num_blocks_per_group=1, use_stream=use_stream)
        for _ in range(2):
            out = model(**_transformer_inputs("tpu")).sample
            torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-5)


def test_group_offloading_to_disk_with_the_device_index_works(tmp_path):
    """The working spelling: onload_device=0, the index of the current accelerator, which
    Diffusers hands to safetensors as it is and safetensors resolves through torch to tpu:0."""
    model = _tiny_qwen_image_transformer()
    with torch.no_grad():
        expected = model(**_transformer_inputs("cpu")).sample
        model.enable_group_offload(onload_device=0, offload_device="cpu", offload_type="block_level",
                                   num_blocks_per_group=1, offload_to_disk_path=str(tmp_path))
        for _ in range(2):
            out = model(**_transformer_inputs("tpu")).sample
            assert out.device.type == "tpu"
            torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-5)
    assert list(tmp_path.glob("*.safetensors"))


def test_transformer_compiled_with_dynamic_shapes_over_three_sizes():
    """dynamic=True without duck shapes, as Diffusers' own compile tests ask: each latent size
    compiles once (no Dynamo recompile), results as on the CPU."""
    import torch.fx.experimental._config as fx_config
    model = _tiny_qwen_image_transformer()
    sizes = [(4, 4), (4, 8), (8, 8)]
    with torch.no_grad():
        expected = {s: model(**_transformer_inputs("cpu", *s)).sample for s in sizes}
        torch._dynamo.reset()
        compiled = torch.compile(model.to("tpu"), backend="tpu", fullgraph=True, dynamic=True)
        for s in sizes:
            with torch._dynamo.config.patch(error_on_recompile=True), fx_config.patch(use_duck_shape=False):
                out = compiled(**_transformer_inputs("tpu", *s)).sample
            torch.testing.assert_close(out.cpu(), expected[s], rtol=1e-4, atol=1e-5)
