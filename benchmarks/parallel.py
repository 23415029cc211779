"""Tensor parallelism on emulated chips: Transformers tp_plan="auto" at 1, 2 and 4 ranks.

    python benchmarks/parallel.py [--quick] [--tokens N]

Each rank is a torchrun process with one emulated chip (XLA:CPU), all sharing this machine's
cores: read the memory and traffic columns, not the speed ones (docs/parallel.md). The CPU row
is PyTorch eager on one process, same checkpoint and tokens.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import transformers

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import timing  # noqa: E402


def build_checkpoint(directory, quick):
    torch.manual_seed(0)
    hidden = 256 if quick else 512
    config = transformers.Qwen3Config(vocab_size=2048, hidden_size=hidden, intermediate_size=4 * hidden,
                                      num_hidden_layers=2 if quick else 4, num_attention_heads=8,
                                      num_key_value_heads=4, head_dim=hidden // 8, max_position_embeddings=512,
                                      tie_word_embeddings=False)
    transformers.Qwen3ForCausalLM(config).save_pretrained(directory)


def cpu_row(directory, tokens):
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32)
    ids = torch.tensor([[1, 5, 9, 33, 2, 7, 11, 13]])
    mask = torch.ones_like(ids)
    model.generate(ids, attention_mask=mask, max_new_tokens=tokens, do_sample=False)
    out, seconds = timing.timed(lambda: model.generate(ids, attention_mask=mask, max_new_tokens=tokens,
                                                       do_sample=False), "cpu")
    return tokens / seconds, out[0].tolist()


def tpu_row(directory, tokens, world):
    env = {**os.environ, "TORCH_TPU_QUIET": "1", "TORCH_TPU_CPU_DEVICES": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                           str(world), str(HERE / "parallel_worker.py"), str(directory), str(tokens)],
                          env=env, capture_output=True, text=True, timeout=1200)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"torchrun with {world} ranks failed:\n{(proc.stdout + proc.stderr)[-4000:]}")
    return json.loads(lines[0].split(" ", 1)[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tokens", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        build_checkpoint(directory, args.quick)
        cpu_tps, cpu_tokens = cpu_row(directory, args.tokens)
        rows = [tpu_row(directory, args.tokens, world) for world in (1, 2, 4)]
    full = rows[0]["full_param_bytes"]
    print(f"Qwen3 {full / 4 / 1e6:.1f}M parameters (f32), greedy {args.tokens} tokens; "
          f"PyTorch CPU eager: {cpu_tps:.1f} tokens/s")
    print("| ranks | params per rank | vs full | peak device bytes per rank | peak host RSS per rank | "
          "host transport per token | tokens/s (emulated) | vs CPU | tokens = CPU |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['world']} | {r['local_param_bytes'] / 1e6:.2f} MB | {r['local_param_bytes'] / full:.3f}x | "
              f"{r['peak_device_bytes'] / 1e6:.2f} MB | {r['peak_rss_mb']:.0f} MB | "
              f"{r['transport_bytes_per_token'] / 1e3:.1f} kB | {r['tokens_per_s']:.1f} | "
              f"{r['tokens_per_s'] / cpu_tps:.2f}x | {r['tokens'] == cpu_tokens} |")


if __name__ == "__main__":
    main()
