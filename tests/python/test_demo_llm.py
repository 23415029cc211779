"""examples/demo_llm.py runs the user's script shape end to end on a local checkpoint (a tiny
Llama with seeded weights and a byte-level BPE tokenizer trained here)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo_llm.py"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    import torch

    path = tmp_path_factory.mktemp("tiny_lm")
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token=None))
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    text = [transformers.__doc__ or "", torch.__doc__ or "", "The future of AI is bright and open."] * 4
    bpe.train_from_iterator(text, tokenizers.trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<eos>"], initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet()))
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<eos>")
    tok.save_pretrained(path)
    config = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, eos_token_id=None,
                                      bos_token_id=None, pad_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(path)
    return path


@pytest.mark.parametrize("cache", ["static", "dynamic"])
def test_demo_llm_prints_prompt_continuation_and_speeds(checkpoint, cache):
    env = dict(os.environ, TORCH_TPU_QUIET="1")
    env.pop("TORCH_TPU_AOT_CHECK", None)
    out = subprocess.run([sys.executable, str(DEMO), "--model", str(checkpoint), "--max-new-tokens", "8",
                          "--cache", cache], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("The future of AI is") and len(lines[0]) > len("The future of AI is")
    assert "prefill:" in out.stdout and "tokens/s" in out.stdout and "executables compiled" in out.stdout
    if cache == "static":  # the second generation reuses every executable
        assert "0 executables compiled in this second run" in out.stdout


SHIPPED = DEMO.parent / "checkpoints" / "tiny-qwen3_5-pydocs"


def english_words(text):
    import re
    return re.findall(r"[A-Za-z]+", text)


def test_make_demo_continues_the_prompt_in_english_with_the_shipped_checkpoint():
    """The default model of demo_llm.py is the Qwen3.5-architecture checkpoint trained by
    examples/train_tiny_lm.py on CPython's documentation: its continuation is made of words from
    that English text, not byte noise."""
    import pydoc_data.topics

    assert (SHIPPED / "model.safetensors").stat().st_size < 20 * 2**20
    env = dict(os.environ, TORCH_TPU_QUIET="1")
    env.pop("TORCH_TPU_AOT_CHECK", None)
    out = subprocess.run([sys.executable, str(DEMO), "--max-new-tokens", "32"], env=env, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout.split("\n\nplatform:")[0]
    assert text.startswith("The future of AI is")
    words = english_words(text[len("The future of AI is"):])
    known = {w.lower() for topic in pydoc_data.topics.topics.values() for w in english_words(topic)}
    assert len(words) >= 8, text
    assert sum(w.lower() in known for w in words) >= 0.8 * len(words), text
    assert "Qwen3_5" in (SHIPPED / "config.json").read_text()


TRAIN = DEMO.parent / "train_tiny_lm.py"


def test_train_tiny_lm_trains_on_tpu_and_resumes(tmp_path):
    """The script that trained the shipped checkpoint, on a small corpus and model: it logs the
    loss, saves a from_pretrained checkpoint, and a second run continues from its state."""
    env = dict(os.environ, TORCH_TPU_QUIET="1")
    env.pop("TORCH_TPU_AOT_CHECK", None)
    common = [sys.executable, str(TRAIN), "--out", str(tmp_path), "--corpus-limit", "40", "--vocab", "300",
              "--hidden", "96", "--seq-len", "32", "--batch", "2", "--save-every", "2", "--warmup", "2"]
    first = subprocess.run(common + ["--steps", "4"], env=env, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    second = subprocess.run(common + ["--steps", "6", "--resume"], env=env, capture_output=True, text=True,
                            timeout=900)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed at step 4" in second.stdout
    log = (tmp_path / "train_log.tsv").read_text().splitlines()
    assert log[0].startswith("step\tloss") and [row.split("\t")[0] for row in log[1:]] == ["4", "6"]
    assert all(float(row.split("\t")[1]) > 0 for row in log[1:])
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, device_map="tpu")
    assert type(model).__name__ == "Qwen3_5ForCausalLM" and "sample:" in second.stdout
