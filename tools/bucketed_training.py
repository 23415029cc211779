"""Eager fine-tuning with dynamic padding: what bucketing does for a training loop.

    .venv/bin/python tools/bucketed_training.py [--model llama] [--batch 1] [--steps 10]

A 2-layer tiny model (seeded weights) trains on `tpu` and on the CPU side by side, each step a
batch padded to its own random length (20..200 tokens, as a collator that pads to the longest
does): a causal LM (llama, gpt2; left padding, Transformers' causal-LM loss), a sequence
classifier (bert, roberta, modernbert; right padding, 3 labels) or an encoder-decoder (bart, t5;
right padding, labels of their own random length 5..60), backward, AdamW. Printed per step:
the executables built, the step's seconds on `tpu` and on the CPU (PyTorch eager), and both
losses. docs/bucketing.md reads it:
a new length in a warm bucket should build (almost) nothing. The `tpu` device here is whatever
plugin is loaded (XLA:CPU without a TPU): its times say nothing about a TPU.
"""
import argparse
import random
import time

import torch
import transformers

import torch_tpu


def built():
    s = torch_tpu._C._cache_stats()
    return s["compiles"] + s["disk_hits"]


def _classifier_sizes():
    return dict(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                num_labels=3)


CONFIGS = {
    "llama": lambda: transformers.LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128,
                                              num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                              max_position_embeddings=1024),
    "gpt2": lambda: transformers.GPT2Config(vocab_size=512, n_embd=64, n_layer=2, n_head=4, n_positions=1024,
                                            attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0),
    "bert": lambda: transformers.BertConfig(**_classifier_sizes(), max_position_embeddings=512,
                                            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
    "roberta": lambda: transformers.RobertaConfig(**_classifier_sizes(), max_position_embeddings=514, pad_token_id=0,
                                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
    "modernbert": lambda: transformers.ModernBertConfig(**_classifier_sizes(), max_position_embeddings=512,
                                                        pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                                        cls_token_id=1, sep_token_id=2),
}
CONFIGS["bart"] = lambda: transformers.BartConfig(vocab_size=512, d_model=64, encoder_layers=2, decoder_layers=2,
                                                  encoder_attention_heads=4, decoder_attention_heads=4,
                                                  encoder_ffn_dim=128, decoder_ffn_dim=128, dropout=0.0,
                                                  attention_dropout=0.0, activation_dropout=0.0, pad_token_id=0,
                                                  bos_token_id=1, eos_token_id=2, decoder_start_token_id=2,
                                                  forced_eos_token_id=None)
CONFIGS["t5"] = lambda: transformers.T5Config(vocab_size=512, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                              num_decoder_layers=2, num_heads=4, dropout_rate=0.0,
                                              decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
CLASSIFIERS = ("bert", "roberta", "modernbert")
SEQ2SEQ = ("bart", "t5")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=1, help="sequences per step (all but the first padded)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--model", choices=sorted(CONFIGS), default="llama")
    args = parser.parse_args()
    config = CONFIGS[args.model]()
    classifier, seq2seq = args.model in CLASSIFIERS, args.model in SEQ2SEQ
    auto = (transformers.AutoModelForSequenceClassification if classifier else
            transformers.AutoModelForSeq2SeqLM if seq2seq else transformers.AutoModelForCausalLM)
    torch.manual_seed(0)
    cpu = auto.from_config(config)
    dev = auto.from_config(config)
    dev.load_state_dict(cpu.state_dict())
    dev.to("tpu")
    optimizers = {m: torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (cpu, dev)}
    rng = random.Random(0)
    print(f"{'step':>4} {'length':>6} {'bucket':>6} {'compiles':>8} {'tpu s':>7} {'cpu s':>7} {'tpu loss':>10} "
          f"{'cpu loss':>10}")
    for step in range(args.steps):
        n = rng.randint(20, 200)
        ids = torch.randint(3, 512, (args.batch, n), generator=torch.Generator().manual_seed(step))
        mask = torch.ones_like(ids)
        if classifier or seq2seq:  # right padding; a label per sequence, or a target sequence
            mask[1:, n - n // 3:] = 0
            ids[1:, n - n // 3:] = 0
            gen = torch.Generator().manual_seed(step)
            labels = (torch.randint(3, 512, (args.batch, rng.randint(5, 60)), generator=gen) if seq2seq else
                      torch.randint(0, 3, (args.batch,), generator=gen))
        else:
            mask[1:, : n // 3] = 0
            labels = ids
        losses, seconds = [], {}
        for model, device in ((dev, "tpu"), (cpu, "cpu")):
            before, start = built(), time.perf_counter()
            out = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device))
            out.loss.backward()
            optimizers[model].step()
            optimizers[model].zero_grad()
            losses.append(out.loss.item())
            seconds[device] = time.perf_counter() - start
            if device == "tpu":
                compiles = built() - before
        print(f"{step:>4} {n:>6} {torch_tpu._C._bucket_for(n):>6} {compiles:>8} {seconds['tpu']:>7.2f} "
              f"{seconds['cpu']:>7.2f} {losses[0]:>10.5f} {losses[1]:>10.5f}")


if __name__ == "__main__":
    main()
