"""Transformers on tpu: a tiny Llama (real architecture class, seeded random weights) saved with
save_pretrained, loaded with from_pretrained(device_map="tpu"); greedy generate matches CPU."""
import pytest
import torch

import torch_tpu

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
