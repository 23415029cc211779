"""The model families of issue 8 on `tpu` against the same checkpoint on the CPU.

Each family is its real transformers class built from a scaled-down config with seeded weights,
saved with save_pretrained and loaded with from_pretrained(device_map="tpu"). All families share
one hidden size, head layout and vocabulary so that the per-op executables of their common
layers are shared (the suite compiles less).
"""
import pytest
import torch

import torch_tpu

transformers = pytest.importorskip("transformers")

VOCAB, PAD = 256, 0
COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, pad_token_id=PAD,
              bos_token_id=1, eos_token_id=2)


def qwen3_5():
    return transformers.Qwen3_5TextConfig(
        **{**COMMON, "num_hidden_layers": 4}, head_dim=16, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_num_key_heads=2, linear_num_value_heads=4)  # 3 Gated DeltaNet layers + 1 gated attention


def qwen3():
    return transformers.Qwen3Config(**COMMON, head_dim=16)


def llama3():
    return transformers.LlamaConfig(**COMMON, rope_parameters={
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 64})


def gemma3():
    return transformers.Gemma3TextConfig(
        **{**COMMON, "num_hidden_layers": 3}, head_dim=16, sliding_window=8, query_pre_attn_scalar=16,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        final_logit_softcapping=30.0)


def gpt2():
    return transformers.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=256,
                                   pad_token_id=PAD, bos_token_id=1, eos_token_id=2)


FAMILIES = {"qwen3_5": qwen3_5, "qwen3": qwen3, "llama3": llama3, "gemma3": gemma3, "gpt2": gpt2}
_saved = {}


def checkpoint(family, tmp_path_factory):
    """(CPU model, path) of a seeded model of `family`, saved once per test session."""
    if family not in _saved:
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(FAMILIES[family]()).eval()
        path = tmp_path_factory.mktemp(family)
        model.save_pretrained(path)
        _saved[family] = (model, path)
    return _saved[family]


def prompts(batch):
    """Token ids and mask; batch 2 is left-padded (prompts of length 7 and 4)."""
    ids = torch.tensor([[5, 17, 42, 7, 99, 3, 250], [PAD, PAD, PAD, 11, 64, 128, 9]])[:batch]
    return ids, (ids != PAD).long()


def greedy(model, ids, mask, n, **kw):
    return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n,
                          do_sample=False, **kw)


@pytest.fixture(params=sorted(FAMILIES))
def family(request):
    return request.param


@pytest.mark.parametrize("batch", [1, 2])
def test_greedy_32_tokens_match_cpu(family, batch, tmp_path_factory, no_fallbacks):
    cpu_model, path = checkpoint(family, tmp_path_factory)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="tpu")
    assert {p.device.type for p in model.parameters()} == {"tpu"}
    ids, mask = prompts(batch)
    expected = greedy(cpu_model, ids, mask, 32)
    got = greedy(model, ids.to("tpu"), mask.to("tpu"), 32)
    assert got.device.type == "tpu"
    assert got.cpu().tolist() == expected.tolist()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_first_step_logits_match_cpu(family, dtype, tmp_path_factory, no_fallbacks):
    cpu_model, path = checkpoint(family, tmp_path_factory)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="tpu", dtype=dtype)
    reference = cpu_model if dtype == torch.float32 else transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    ids, mask = prompts(2)
    with torch.no_grad():
        got = model(input_ids=ids.to("tpu"), attention_mask=mask.to("tpu")).logits.cpu()
        expected = reference(input_ids=ids, attention_mask=mask).logits
    valid = mask.bool()  # logits at padding positions are not part of any result
    rtol = 1e-4 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got[valid].float(), expected[valid].float(), rtol=rtol,
                               atol=rtol * expected[valid].float().abs().max().item())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_eager_and_sdpa_attention_with_left_padding_match_cpu(family, dtype, tmp_path_factory):
    """Transformers' test_eager_matches_sdpa_inference in small: half-precision eager and SDPA
    attention over a left-padded batch give the CPU's numbers on tpu, padding rows included
    (where both give finite values, or the CPU's zeros), and agree with each other as closely
    as Transformers asks of the CPU."""
    _, path = checkpoint(family, tmp_path_factory)
    ids, mask = prompts(2)
    last = {}
    for impl in ("eager", "sdpa"):
        for dev in ("cpu", "tpu"):
            model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation=impl)
            model = model.eval().to(dev)
            with torch.no_grad():
                out = model(input_ids=ids.to(dev), attention_mask=mask.to(dev), output_hidden_states=True)
            last[impl, dev] = out.hidden_states[-1].float().cpu()
    for impl in ("eager", "sdpa"):
        got, want = last[impl, "tpu"], last[impl, "cpu"]
        assert not got.isnan().any(), impl
        # Half-precision layers round differently on the two devices (XLA keeps some
        # intermediates in float32): a 2% tolerance relative to the largest value, as above.
        torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2 * want.abs().max().item(),
                                   msg=lambda m: f"{impl}: {m}")
    # Transformers' CPU tolerances for eager vs SDPA (fp16 5e-3, bf16 1e-2 or 3% of the largest
    # value), on the positions that are not padding.
    valid = mask.bool()
    eager, sdpa = last["eager", "tpu"][valid], last["sdpa", "tpu"][valid]
    tol = 5e-3 if dtype == torch.float16 else 1e-2
    atol = tol if dtype == torch.float16 else max(tol, 3e-2 * max(eager.abs().max().item(), sdpa.abs().max().item()))
    cpu_gap = (last["eager", "cpu"][valid] - last["sdpa", "cpu"][valid]).abs().max().item()
    assert torch.allclose(eager, sdpa, rtol=tol, atol=max(atol, cpu_gap)), (eager - sdpa).abs().max()


@pytest.mark.parametrize("family_name", ["llama3", "gemma3"])
def test_generate_with_compile_config_default_inductor_matches_cpu(family_name, tmp_path_factory):
    """Transformers' CompileConfig() asks for backend="inductor" (its test suite's compile tests
    do): on tpu the decode step compiles through Inductor's passes into our compiler and gives
    the CPU's tokens."""
    cpu_model, path = checkpoint(family_name, tmp_path_factory)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="tpu")
    ids, mask = prompts(2)
    kw = dict(cache_implementation="static", compile_config=transformers.CompileConfig())
    assert kw["compile_config"].backend == "inductor"
    torch._dynamo.reset()
    for _ in range(2):  # the second call runs the compiled step again
        got = greedy(model, ids.to("tpu"), mask.to("tpu"), 8, **kw)
        assert got.cpu().tolist() == greedy(cpu_model, ids, mask, 8, cache_implementation="static").tolist()


def test_sampling_is_reproducible_under_a_seed(family, tmp_path_factory, no_fallbacks):
    _, path = checkpoint(family, tmp_path_factory)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="tpu")
    ids, mask = prompts(2)
    runs = []
    for _ in range(2):
        torch.manual_seed(1234)
        runs.append(model.generate(input_ids=ids.to("tpu"), attention_mask=mask.to("tpu"), max_new_tokens=12,
                                   min_new_tokens=12, do_sample=True, temperature=0.8, top_k=50,
                                   top_p=0.9).cpu())
    assert runs[0].tolist() == runs[1].tolist()
    new = runs[0][:, ids.shape[1]:]
    assert new.shape == (2, 12) and int(new.min()) >= 0 and int(new.max()) < VOCAB
    torch.manual_seed(99)
    other = model.generate(input_ids=ids.to("tpu"), attention_mask=mask.to("tpu"), max_new_tokens=12,
                           min_new_tokens=12, do_sample=True, temperature=5.0).cpu()
    assert other.tolist() != runs[0].tolist()  # the seed (and temperature) matter


class CompileCounter(transformers.LogitsProcessor):
    """Records how many executables the engine has built each time a token is chosen: compiles
    plus loads from the disk cache, which a machine with a cold cache compiles too (counting
    compiles alone passed only where an earlier run had filled the cache)."""

    def __init__(self):
        self.counts = []
        self.signatures = []  # strict eager's plans (one per call signature) in memory

    def __call__(self, input_ids, scores):
        stats = torch_tpu._C._cache_stats()
        self.counts.append(stats["compiles"] + stats["disk_hits"])
        self.signatures.append(stats["signatures"])
        return scores


@pytest.mark.strict_eager
@pytest.mark.parametrize("batch", [1, 2])
def test_static_cache_matches_cpu_and_compiles_nothing_after_first_decode_step(family, batch, tmp_path_factory):
    import torch._dynamo

    torch._dynamo.reset()  # Dynamo's per-frame recompile limit is shared by the families' forwards
    cpu_model, path = checkpoint(family, tmp_path_factory)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="tpu")
    ids, mask = prompts(batch)
    expected = greedy(cpu_model, ids, mask, 16)
    counter = CompileCounter()
    # Every executable this generate uses is built again (compiled, or loaded from the disk cache:
    # both counted), not found in memory from an earlier test at the same shapes.
    torch_tpu._C._clear_executable_caches()
    got = greedy(model, ids.to("tpu"), mask.to("tpu"), 16, cache_implementation="static",
                 logits_processor=transformers.LogitsProcessorList([counter]))
    assert got.cpu().tolist() == expected.tolist()
    # counts[0]: after prefill, counts[1]: after the first decode step (compiles the step graph).
    # Generate's ids and mask are growing tensors from their first append (engine/growing), so
    # the first decode step already sees the layouts of every later one.
    assert len(counter.counts) == 16
    steps_that_built = [i for i in range(2, 16) if counter.counts[i] != counter.counts[i - 1]]
    if family == "gemma3":
        # docs/limits.md 'StaticCache with sliding-window layers': with the dynamic=False that
        # Transformers picks for tpu, Dynamo guards on
        # StaticSlidingWindowLayer.cumulative_length_int (a Python int) and traces the forward
        # again every token; the traces lower to the same module (memory-cache hits, no compile)
        # until Dynamo's recompile limit, after which it runs the forward eagerly: that step builds
        # the eager ops' executables, later steps nothing. Its 8-token window fills at step 2,
        # where the cache update takes its other branch (a new graph), and the sliding mask
        # settles to the window's length a step later.
        assert len(steps_that_built) <= 3 and all(i < 12 for i in steps_that_built), counter.counts
    else:
        assert not steps_that_built, counter.counts


@pytest.mark.parametrize("family_name", ["llama3", "gpt2"])
def test_compiled_decode_step_of_padded_batches_is_traced_once(family_name, tmp_path_factory):
    """Transformers' fullgraph test (test_generate_compile_model_forward_fullgraph): eager
    generates first, then two compiled StaticCache generates of two left-padded batches of one
    shape. Dynamo guards the decode step's input strides, so its 4-D mask must keep one layout
    every step and every call, whatever ran before (it was padded in some steps and dense in
    others: one recompile per generate). Tokens equal the CPU's."""
    import logging

    import torch._dynamo

    cpu_model, path = checkpoint(family_name, tmp_path_factory)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="tpu")
    ids, mask = prompts(2)
    other_ids = torch.tensor([[PAD, 8, 21, 4, 77, 13, 5], [3, 9, 100, 31, 2, 66, 12]])
    batches = [(ids, mask), (other_ids, (other_ids != PAD).long())]
    with torch.compiler.set_stance("force_eager"):
        for b_ids, b_mask in batches:
            greedy(model, b_ids.to("tpu"), b_mask.to("tpu"), 5)
    torch._dynamo.reset()
    compile_config = transformers.CompileConfig(fullgraph=True, dynamic=False)
    compile_config._compile_all_devices = True
    records = []

    class Recorder(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Recorder()
    guards_log = logging.getLogger("torch._dynamo.guards")
    guards_log.addHandler(handler)
    torch._logging.set_logs(recompiles_verbose=True)
    try:
        for b_ids, b_mask in batches:
            got = greedy(model, b_ids.to("tpu"), b_mask.to("tpu"), 5, cache_implementation="static",
                         compile_config=compile_config)
            expected = greedy(cpu_model, b_ids, b_mask, 5, cache_implementation="static")
            assert got.cpu().tolist() == expected.tolist()
    finally:
        torch._logging.set_logs()
        guards_log.removeHandler(handler)
    assert hasattr(model, "_compiled_call")  # the decode step did run compiled
    assert not [r for r in records if "Recompiling" in r], records


def test_dynamic_cache_padded_batch_compiles_nothing_per_token(family, tmp_path_factory, no_fallbacks):
    """The default DynamicCache with a left-padded batch: the 4-D mask is rebuilt every step from
    tensors as long as the sequence, and those ops run over the growing dims' capacity
    (engine/growing), so after the first steps no token builds an executable (before: ~16 per
    token). Token ids equal the CPU's."""
    cpu_model, path = checkpoint(family, tmp_path_factory)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="tpu")
    ids, mask = prompts(2)
    expected = greedy(cpu_model, ids, mask, 20)
    counter = CompileCounter()
    torch_tpu._C._clear_executable_caches()  # counts every executable this generate needs
    got = greedy(model, ids.to("tpu"), mask.to("tpu"), 20, logits_processor=transformers.LogitsProcessorList([counter]))
    assert got.cpu().tolist() == expected.tolist()
    # The prefill and the first decode step build (the caches of these tiny models grow from
    # their first append, ids and mask too); later tokens build nothing, except once where Gemma
    # 3's 8-token window fills (its sliding layers' mask then keeps the window's fixed length).
    settled = 4 if family == "gemma3" else 2
    if torch.tpu.get_eager_mode() == "fused":
        # A fused program is one exact op sequence: the step whose cache appends first fit the
        # capacity (clone instead of constant_pad_nd) is a new program (docs/eager_modes.md).
        settled += 1
    else:
        # Nor a new call signature whose module is already compiled: a view's stride along a dim
        # of one row, left from the length, once made every step's mask ops new signatures.
        assert len(set(counter.signatures[settled:])) == 1, counter.signatures
    assert len(counter.counts) == 20 and len(set(counter.counts[settled:])) == 1, counter.counts


def test_prompt_on_cpu_gives_pytorchs_device_mismatch_error(tmp_path_factory):
    _, path = checkpoint("qwen3", tmp_path_factory)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="tpu")
    ids, mask = prompts(1)
    with pytest.raises(RuntimeError, match="(?i)expected all tensors to be on the same device.*tpu:0 and cpu"):
        model(input_ids=ids, attention_mask=mask)
    # generate() itself moves CPU inputs onto the model's device by design (transformers keeps its
    # bookkeeping on the host for TPUs): same tokens as with tpu inputs.
    on_host = greedy(model, ids, mask, 4)
    assert on_host.tolist() == greedy(model, ids.to("tpu"), mask.to("tpu"), 4).cpu().tolist()


def test_unknown_model_id_gives_transformers_error():
    missing = "/nonexistent/torch-tpu-model"
    with pytest.raises(Exception) as on_cpu:
        transformers.AutoModelForCausalLM.from_pretrained(missing)
    with pytest.raises(type(on_cpu.value)) as on_tpu:
        transformers.AutoModelForCausalLM.from_pretrained(missing, device_map="tpu")
    assert str(on_tpu.value) == str(on_cpu.value)


def test_generating_past_the_position_limit_behaves_as_on_cpu(tmp_path_factory):
    """GPT-2 has learned positions (n_positions): past them transformers raises on every device."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=2, n_positions=12)
    cpu_model = transformers.GPT2LMHeadModel(config).eval()
    path = tmp_path_factory.mktemp("gpt2_short")
    cpu_model.save_pretrained(path)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="tpu")
    ids, mask = prompts(1)
    outcomes = []
    for m, device in ((cpu_model, "cpu"), (model, "tpu")):
        try:
            outcomes.append(("ok", greedy(m, ids.to(device), mask.to(device), 10).cpu().tolist()))
        except (IndexError, RuntimeError) as e:  # the CPU's embedding index error, ours
            outcomes.append(("error", type(e).__name__))
    assert outcomes[0][0] == outcomes[1][0], outcomes
    if outcomes[0][0] == "ok":
        assert outcomes[0] == outcomes[1]


def test_loading_variants_give_the_same_logits(tmp_path_factory, no_fallbacks):
    cpu_model, path = checkpoint("llama3", tmp_path_factory)
    ids, mask = prompts(2)
    with torch.no_grad():
        expected = cpu_model(input_ids=ids, attention_mask=mask).logits
        for model in (transformers.AutoModelForCausalLM.from_pretrained(path, device_map={"": "tpu:0"}),
                      transformers.AutoModelForCausalLM.from_pretrained(path).to("tpu")):
            assert {p.device for p in model.parameters()} == {torch.device("tpu", 0)}
            got = model(input_ids=ids.to("tpu"), attention_mask=mask.to("tpu")).logits
            torch.testing.assert_close(got.cpu()[mask.bool()], expected[mask.bool()], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bert_encoder_via_automodel_matches_cpu(dtype, tmp_path, no_fallbacks):
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128, max_position_embeddings=64, pad_token_id=PAD)
    torch.manual_seed(0)
    transformers.BertModel(config).save_pretrained(tmp_path)
    cpu_model = transformers.AutoModel.from_pretrained(tmp_path, dtype=dtype).eval()
    model = transformers.AutoModel.from_pretrained(tmp_path, device_map="tpu", dtype=dtype).eval()
    ids, mask = prompts(2)
    types = torch.zeros_like(ids)
    types[:, -2:] = 1
    with torch.no_grad():
        expected = cpu_model(input_ids=ids, attention_mask=mask, token_type_ids=types)
        got = model(input_ids=ids.to("tpu"), attention_mask=mask.to("tpu"), token_type_ids=types.to("tpu"))
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    valid = mask.bool()
    torch.testing.assert_close(got.last_hidden_state.cpu()[valid], expected.last_hidden_state[valid], **tol)
    torch.testing.assert_close(got.pooler_output.cpu(), expected.pooler_output, **tol)


AUTO_MAP_SCRIPT = """
import sys, torch, transformers
path = sys.argv[1]
cpu = transformers.AutoModelForCausalLM.from_pretrained(path).eval()
# accelerate has no `tpu` branch for free memory, so "auto" needs max_memory by device index
# (docs/transformers.md); integer indices resolve to the current accelerator, tpu.
model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="auto",
                                                          max_memory={0: "450KB", 1: "10MB"})
print(sorted({str(p.device) for p in model.parameters()}))
ids = torch.tensor([[3, 4, 5, 9, 11]])
print(cpu.generate(ids, max_new_tokens=8, do_sample=False).tolist() ==
      model.generate(ids.to("tpu:0"), max_new_tokens=8, do_sample=False).cpu().tolist())
"""


def test_device_map_auto_splits_layers_over_two_devices(tmp_path):
    import os
    import subprocess
    import sys

    config = transformers.Qwen3Config(**{**COMMON, "num_hidden_layers": 4}, head_dim=16)
    torch.manual_seed(0)
    transformers.Qwen3ForCausalLM(config).save_pretrained(tmp_path)
    env = dict(os.environ, TORCH_TPU_CPU_DEVICES="2", TORCH_TPU_QUIET="1")
    out = subprocess.run([sys.executable, "-c", AUTO_MAP_SCRIPT, str(tmp_path)], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    devices, same_tokens = out.stdout.strip().splitlines()[-2:]
    assert devices == "['tpu:0', 'tpu:1']" and same_tokens == "True", out.stdout
