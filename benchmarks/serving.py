"""Serving with prompts of random length: what bucketing (docs/bucketing.md) buys.

Part of `make bench-llm` (or .venv/bin/python benchmarks/serving.py [--quick] [--family gemma3|qwen3_5] [--batch N|1-N]). A
Qwen3-architecture model (`--family gemma3`: Gemma 3, whose sliding-window layers attend with a
materialised mask; `--family qwen3_5`: Qwen3.5's linear-attention layers; seeded weights, save_pretrained, from_pretrained(device_map="tpu")) answers 32 requests of
random prompt length (3..400 tokens, batch of one or `--batch` left-padded prompts, `--batch 1-3`: a
size drawn per request, greedy, 8 new
tokens) in one fresh process with
an empty executable cache, five ways: PyTorch CPU eager, `tpu` with bucketing (the default:
powers of two from 128), the same in fused eager (TORCH_TPU_EAGER_MODE=fused), with TORCH_TPU_BUCKETING=fine (four buckets per doubling from 16) and with
TORCH_TPU_BUCKETING=0 (every new length compiles its own executables). Printed per way:
requests/s over all 32 (compiles included, as a server would see them), over the last 16, and
the compiles. A second table puts the cost of the padding itself: warm prefill of one prompt at
lengths 65..512, bucketed vs exact, on XLA:CPU and in libtpu's v6e estimate (the AOT check).
A third table scores prompts with a compiled forward (torch.compile(model, backend="tpu",
dynamic=True), the last token's logits): graphs per bucket (the default) against graphs per shape
(TORCH_TPU_BUCKETING=0), and PyTorch CPU eager.
The `tpu` device here is XLA:CPU: its times say nothing about a TPU; the v6e column does.
"""
import argparse
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
import time

REQUESTS, NEW = 32, 8
LENGTHS = (65, 100, 200, 300, 400, 512)

# What both children start with: the model from argv[1] on argv[2], and the executables built.
CHILD_PROLOGUE = r"""
import json, os, random, sys
import torch, transformers
import torch_tpu, torch_tpu.aot
sys.path.insert(0, os.environ["TORCH_TPU_BENCHMARKS"])
import timing
path, device = sys.argv[1], sys.argv[2]
model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map=device).eval()
vocab = model.config.vocab_size
def built():
    s = torch_tpu._C._cache_stats(); return s["compiles"] + s["disk_hits"]
times, compiles, outputs = [], [], []
"""

CHILD = CHILD_PROLOGUE + r"""
requests, new, lengths, batches = int(sys.argv[3]), int(sys.argv[4]), json.loads(sys.argv[5]), json.loads(sys.argv[6])
rng, batch_rng = random.Random(0), random.Random(7)
for i in range(requests):
    n = rng.randint(3, 400)
    batch = batch_rng.randint(*batches)
    ids = torch.randint(3, vocab, (batch, n), generator=torch.Generator().manual_seed(i))
    mask = torch.ones_like(ids)
    shorter = random.Random(1000 + i)
    for row in range(1, batch):  # a batch's other prompts are shorter, left-padded with id 0
        pad = n - shorter.randint(1, n)
        ids[row, :pad], mask[row, :pad] = 0, 0
    before = built()
    with torch.no_grad():
        out, seconds = timing.timed(lambda: model.generate(
            input_ids=ids.to(device), attention_mask=mask.to(device), max_new_tokens=new,
            min_new_tokens=new, do_sample=False, pad_token_id=0).cpu(), device)
    outputs.append(out[:, -new:].tolist())
    times.append(seconds); compiles.append(built() - before)
prefill = {}
def upload(t, exact):
    # exact: uploaded as int32 and widened on the device, so the ids are not bucketed (only a
    # fresh int64 [B, L] upload is) and the forward runs at the prompt's own length.
    return t.int().to(device).long() if exact else t.to(device)
for n in lengths:
    ids = torch.randint(3, vocab, (1, n), generator=torch.Generator().manual_seed(n))
    runs = {exact: (lambda exact=exact: model(input_ids=upload(ids, exact),
                                              attention_mask=upload(torch.ones_like(ids), exact)).logits[:, -1].cpu(),
                    device) for exact in (False, True)}
    with torch.no_grad():
        for fn, _ in runs.values():
            timing.first_call(fn, device)
        before = torch_tpu.aot.stats()
        runs[False][0]()
        middle = torch_tpu.aot.stats()
        runs[True][0]()
        after = torch_tpu.aot.stats()
        samples = timing.interleaved(runs, iters=1, rounds=7)
    v6e = exact_v6e = None
    if device == "tpu" and after["topology"] and not after["error"]:
        v6e = torch_tpu.aot.between(before, middle)["seconds"] * 1e6
        exact_v6e = torch_tpu.aot.between(middle, after)["seconds"] * 1e6
    prefill[n] = dict(seconds=timing.steady(samples[False]), exact_seconds=timing.steady(samples[True]),
                      ratio=timing.ratio(samples[False], samples[True]), v6e=v6e, exact_v6e=exact_v6e)
print(json.dumps(dict(times=times, compiles=compiles, outputs=outputs, prefill=prefill)))
"""

# Scoring requests through a compiled forward: one graph call per request.
CHILD_COMPILED = CHILD_PROLOGUE + r"""
requests = int(sys.argv[3])
forward = torch.compile(model, backend="tpu", dynamic=True) if device == "tpu" else model
rng = random.Random(1)
for i in range(requests):
    n = rng.randint(3, 400)
    ids = torch.randint(3, vocab, (1, n), generator=torch.Generator().manual_seed(100 + i))
    before = built()
    with torch.no_grad():
        out, seconds = timing.timed(lambda: forward(input_ids=ids.to(device), attention_mask=torch.ones_like(ids).to(device),
                                                    use_cache=False).logits[:, -1].cpu(), device)
    outputs.append(int(out.argmax()))
    times.append(seconds); compiles.append(built() - before)
print(json.dumps(dict(times=times, compiles=compiles, outputs=outputs)))
"""


def child_env(bucketing, eager="strict"):
    """A child's environment: an empty executable cache, the bucketing policy, the eager mode
    (docs/eager_modes.md), timing.py found."""
    return dict(os.environ, TORCH_TPU_QUIET="1", TORCH_TPU_CACHE_DIR="", TORCH_TPU_BUCKETING=bucketing,
                TORCH_TPU_EAGER_MODE=eager, TORCH_TPU_BENCHMARKS=os.path.dirname(os.path.abspath(__file__)))


def run_compiled(path, device, bucketing, quick):
    env = child_env(bucketing)
    env.pop("TORCH_TPU_AOT_CHECK", None)
    requests = 12 if quick else REQUESTS
    out = subprocess.run([sys.executable, "-c", CHILD_COMPILED, path, device, str(requests)],
                         env=env, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"compiled {device} (bucketing {bucketing}) failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def print_requests(title, results, reference):
    n = len(reference["times"])
    print(title)
    header = f"{'way':<24} {'req/s all':>9} {'req/s last half':>15} {'compiles':>8} {'last half':>9} {'same tokens':>11}"
    print(header)
    print("-" * len(header))
    for name, r in results.items():
        half = n // 2
        same = r["outputs"] == reference["outputs"]
        print(f"{name:<24} {n / sum(r['times']):>9.2f} {half / sum(r['times'][half:]):>15.2f} "
              f"{sum(r['compiles']):>8} {sum(r['compiles'][half:]):>9} {str(same):>11}")
    print()


def run(path, device, bucketing, quick, batches, eager="strict"):
    """`batches`: (least, most) prompts per request, drawn per request."""
    env = child_env(bucketing, eager)
    single = batches == (1, 1)
    if device == "tpu" and importlib.util.find_spec("libtpu") and single:
        env.setdefault("TORCH_TPU_AOT_CHECK", "v6e:1x1")
    requests = 12 if quick else REQUESTS
    # The prefill table is one prompt's, bucketed against exact in the bucketing ways' processes.
    lengths = LENGTHS if single and device == "tpu" and bucketing != "0" and eager == "strict" else ()
    out = subprocess.run([sys.executable, "-c", CHILD, path, device, str(requests), str(NEW), json.dumps(lengths),
                          json.dumps(batches)], env=env, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"{device} (bucketing {bucketing}, {eager} eager) failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bucket_of(length, policy):
    """The engine's buckets (csrc/engine/growing/bucketed_uploads.cc, bucket_for)."""
    if policy == "pow2":
        return max(128, 1 << (length - 1).bit_length())
    if length <= 16:
        return 16
    p = 1 << (length - 1).bit_length()
    step = p // 8
    return -(-length // step) * step


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="12 requests instead of 32")
    parser.add_argument("--family", choices=("qwen3", "gemma3", "qwen3_5"), default="qwen3",
                        help="gemma3: sliding-window layers (window 64) attend with a materialised mask; "
                             "qwen3_5: Gated DeltaNet linear-attention layers (causal conv1d, chunked delta rule) "
                             "with a full-attention layer every fourth")
    parser.add_argument("--batch", default="1",
                        help="prompts per request, left-padded (the longest of random length, the others shorter), "
                             "or a range such as 1-3 (drawn per request: batch sizes mixed in one stream); "
                             "above 1 only the requests table is printed")
    args = parser.parse_args()
    least, _, most = args.batch.partition("-")
    try:
        batches = (int(least), int(most or least))
    except ValueError:
        parser.error(f"--batch must be a number or a range such as 1-3, got {args.batch!r}")
    if not 1 <= batches[0] <= batches[1]:
        parser.error(f"--batch must be at least 1 (and a range ascending), got {args.batch!r}")
    import torch
    import transformers
    shape = dict(vocab_size=16000, hidden_size=256, intermediate_size=768, num_hidden_layers=6, num_attention_heads=4,
                 num_key_value_heads=1, head_dim=64, max_position_embeddings=1024)
    if args.family == "gemma3":
        config = transformers.Gemma3TextConfig(**shape, sliding_window=64, query_pre_attn_scalar=64,
                                               layer_types=["sliding_attention"] * 5 + ["full_attention"])
    elif args.family == "qwen3_5":
        config = transformers.Qwen3_5TextConfig(**shape, linear_num_key_heads=2, linear_num_value_heads=4,
                                                linear_key_head_dim=64, linear_value_head_dim=64)
    else:
        config = transformers.Qwen3Config(**shape)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    params = sum(p.numel() for p in model.parameters()) / 1e6
    with tempfile.TemporaryDirectory() as path:
        model.save_pretrained(path)
        results = {"PyTorch CPU eager": run(path, "cpu", "pow2", args.quick, batches),
                   "tpu, bucketed": run(path, "tpu", "pow2", args.quick, batches),
                   "tpu, bucketed, fused": run(path, "tpu", "pow2", args.quick, batches, eager="fused"),
                   "tpu, fine buckets": run(path, "tpu", "fine", args.quick, batches),
                   "tpu, exact shapes": run(path, "tpu", "0", args.quick, batches)}
        if batches == (1, 1):
            compiled = {"PyTorch CPU eager": run_compiled(path, "cpu", "pow2", args.quick),
                        "tpu compiled, per bucket": run_compiled(path, "tpu", "pow2", args.quick),
                        "tpu compiled, per shape": run_compiled(path, "tpu", "0", args.quick)}
    cpu = results["PyTorch CPU eager"]
    n = len(cpu["times"])
    padding = ", left-padded" if batches[1] > 1 else ""
    batch = f"batch {batches[0]}" if batches[0] == batches[1] else f"batch {batches[0]}-{batches[1]} drawn per request"
    print_requests(f"torch-tpu serving benchmark — {args.family} ~{params:.0f}M, {n} requests of random prompt length "
                   f"(3..400), {batch}{padding}, {NEW} new tokens, fresh process, empty executable cache",
                   results, cpu)
    if batches != (1, 1):
        return
    print_requests(f"scoring with a compiled forward (torch.compile(model, dynamic=True), last token's logits), "
                   f"{n} requests of random length (3..400), fresh process", compiled, compiled["PyTorch CPU eager"])
    header = (f"{'buckets':<8} {'prompt':>6} {'bucket':>6} {'bucketed ms':>11} {'exact ms':>8} {'ratio':>6} "
              f"{'v6e bucketed us':>15} {'v6e exact us':>12} {'v6e ratio':>9}")
    print("warm prefill of one prompt (forward, last token's logits read back): bucketed and exact in one process, "
          "interleaved, median of 7 rounds")
    print(header)
    print("-" * len(header))
    for policy, way in (("pow2", "tpu, bucketed"), ("fine", "tpu, fine buckets")):
        b = results[way]["prefill"]
        for length in LENGTHS:
            x = b[str(length)]
            bucket = bucket_of(length, policy)
            v6e = "-"
            if x["v6e"] and x["exact_v6e"]:
                v6e = f"{x['v6e']:>15.1f} {x['exact_v6e']:>12.1f} {x['v6e'] / x['exact_v6e']:>8.2f}x"
            print(f"{policy:<8} {length:>6} {bucket:>6} {x['seconds'] * 1e3:>11.2f} {x['exact_seconds'] * 1e3:>8.2f} "
                  f"{x['ratio']:>5.2f}x {v6e}")
    print("ratio: median of the rounds' bucketed / exact (the padding's cost; a prompt of a bucket's own length is "
          "not padded; exact: the ids uploaded as int32 and widened on the device, which are not bucketed). "
          "v6e: libtpu's estimate of the same ops' modules (sum over the forward).")


if __name__ == "__main__":
    main()
