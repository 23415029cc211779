"""Eager fine-tuning with dynamic padding: what bucketing does for a training loop.

    .venv/bin/python tools/bucketed_training.py [--batch 1] [--steps 10]

A 2-layer tiny Llama (seeded weights) trains on `tpu` and on the CPU side by side, each step a
batch padded to its own random length (20..200 tokens, as a collator that pads to the longest
does): forward with labels (Transformers' causal-LM loss), backward, AdamW. Printed per step:
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


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=1, help="sequences per step (the others left-padded)")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    config = transformers.LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)
    torch.manual_seed(0)
    cpu = transformers.AutoModelForCausalLM.from_config(config)
    dev = transformers.AutoModelForCausalLM.from_config(config)
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
        mask[1:, : n // 3] = 0
        losses, seconds = [], {}
        for model, device in ((dev, "tpu"), (cpu, "cpu")):
            before, start = built(), time.perf_counter()
            out = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=ids.to(device))
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
