"""Transformers on tpu: a tiny Llama (real architecture class, seeded random weights) saved with
save_pretrained, loaded with from_pretrained(device_map="tpu"); greedy generate matches CPU."""
import pytest
import torch

import torch_tpu
from helpers import executables_built, executables_waited_for

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    config = transformers.LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    path = tmp_path_factory.mktemp("tiny_llama")
    model.save_pretrained(path)
    return model, path


def test_greedy_generate_matches_cpu(tiny_llama, no_fallbacks):
    cpu_model, path = tiny_llama
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="tpu")
    assert next(model.parameters()).device.type == "tpu"
    ids = torch.tensor([[1, 5, 9, 13]])
    expected = cpu_model.generate(ids, max_new_tokens=16, do_sample=False)
    got = model.generate(ids.to("tpu"), attention_mask=torch.ones_like(ids).to("tpu"),
                         max_new_tokens=16, do_sample=False)
    assert got.cpu().tolist() == expected.tolist()


def test_logits_match_cpu(tiny_llama, no_fallbacks):
    cpu_model, path = tiny_llama
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="tpu")
    ids = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
    with torch.no_grad():
        expected = cpu_model(ids).logits
        got = model(ids.to("tpu")).logits
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-4, atol=1e-4)


def test_static_cache_generate_auto_compiles_with_backend_tpu(tiny_llama):
    """transformers compiles a tpu model's decode step with backend="tpu", dynamic=False by itself
    (modeling_utils._default_compile_config) when generate uses a compilable cache."""
    import torch._dynamo

    from torch_tpu.compile import stats

    torch._dynamo.reset()
    stats.reset()
    cpu_model, path = tiny_llama
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="tpu")
    ids = torch.tensor([[1, 5, 9, 13, 2]])
    expected = cpu_model.generate(ids, max_new_tokens=12, min_new_tokens=12, do_sample=False)
    graphs_before = sum(stats.graphs.values())
    got = model.generate(ids.to("tpu"), attention_mask=torch.ones_like(ids).to("tpu"), max_new_tokens=12, min_new_tokens=12,
                         do_sample=False, cache_implementation="static")
    assert got.cpu().tolist() == expected.tolist()
    assert sum(stats.graphs.values()) > graphs_before  # the decode step ran compiled
    # Later generations of the same shape compile nothing: no graph, no executable (in fused
    # eager, the eager ops' programs may compile on the worker thread: nothing waits for them).
    compiles = executables_waited_for()
    graphs = sum(stats.graphs.values())
    again = model.generate(ids.to("tpu"), attention_mask=torch.ones_like(ids).to("tpu"), max_new_tokens=12, min_new_tokens=12,
                           do_sample=False, cache_implementation="static")
    assert again.cpu().tolist() == expected.tolist()
    assert sum(stats.graphs.values()) == graphs
    assert executables_waited_for() == compiles
    assert not stats.splits, dict(stats.splits)


def test_explicit_compile_config_fullgraph(tiny_llama):
    import torch._dynamo

    torch._dynamo.reset()
    cpu_model, path = tiny_llama
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="tpu")
    ids = torch.tensor([[7, 3, 3, 8]])
    expected = cpu_model.generate(ids, max_new_tokens=8, min_new_tokens=8, do_sample=False)
    config = transformers.CompileConfig(backend="tpu", fullgraph=True, dynamic=False)
    got = model.generate(ids.to("tpu"), attention_mask=torch.ones_like(ids).to("tpu"), max_new_tokens=8, min_new_tokens=8,
                         do_sample=False, cache_implementation="static", compile_config=config)
    assert got.cpu().tolist() == expected.tolist()


def test_gpt2_tied_lm_head_stays_tied_and_trains_like_cpu(tmp_path):
    config = transformers.GPT2Config(vocab_size=128, n_positions=64, n_embd=32, n_layer=2, n_head=4)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path)
    cpu_model = transformers.GPT2LMHeadModel.from_pretrained(tmp_path)
    model = transformers.GPT2LMHeadModel.from_pretrained(tmp_path).to("tpu")
    assert model.lm_head.weight is model.transformer.wte.weight
    ids = torch.tensor([[5, 9, 2, 77, 31, 8]])
    for m, dev in ((cpu_model, "cpu"), (model, "tpu")):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        loss = m(ids.to(dev), labels=ids.to(dev)).loss
        loss.backward()
        opt.step()
    torch.testing.assert_close(model.lm_head.weight.detach().cpu(), cpu_model.lm_head.weight.detach(),
                               rtol=1e-5, atol=1e-6)
