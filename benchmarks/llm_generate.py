"""Greedy generation on `tpu` vs PyTorch CPU eager: prefill and decode tokens/s, first-call cost,
compiles, host memory while loading, and libtpu's v6e estimate per generated token.

Run: `make bench-llm` (or .venv/bin/python benchmarks/llm_generate.py [--quick]). Models: the Qwen3
and Qwen3.5 architectures at ~10M and ~100M parameters, seeded weights, saved with
save_pretrained and loaded with from_pretrained(device_map="tpu"). `tpu` rows: "static" is
Transformers' StaticCache, whose decode step Transformers compiles with backend "tpu" by itself;
"dynamic" is the default DynamicCache run eagerly (warm: every executable already compiled).
The `tpu` device here is XLA:CPU: its times say nothing about a TPU; the v6e column does.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TORCH_TPU_QUIET", "1")
os.environ.setdefault("TORCH_TPU_CACHE_DIR", tempfile.mkdtemp(prefix="tpu_bench_llm_"))
if importlib.util.find_spec("libtpu") and "TORCH_TPU_AOT_CHECK" not in os.environ:
    os.environ["TORCH_TPU_AOT_CHECK"] = "v6e:1x1"

import torch  # noqa: E402
import transformers  # noqa: E402

import torch_tpu  # noqa: E402
import torch_tpu.aot  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timing  # noqa: E402

PROMPT, NEW = 32, 32


def configs(quick):
    def qwen3(hidden, layers, inter, vocab):
        return transformers.Qwen3Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
                                        num_hidden_layers=layers, num_attention_heads=hidden // 64,
                                        num_key_value_heads=max(1, hidden // 256), head_dim=64)

    def qwen3_5(hidden, layers, inter, vocab):
        return transformers.Qwen3_5TextConfig(
            vocab_size=vocab, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
            num_attention_heads=hidden // 64, num_key_value_heads=max(1, hidden // 256), head_dim=64,
            linear_num_key_heads=hidden // 128, linear_num_value_heads=hidden // 64, linear_key_head_dim=64,
            linear_value_head_dim=64)

    small = [("qwen3 ~10M", qwen3(256, 6, 768, 16000)), ("qwen3.5 ~10M", qwen3_5(256, 8, 768, 16000))]
    large = [("qwen3 ~100M", qwen3(768, 12, 2048, 32000)), ("qwen3.5 ~100M", qwen3_5(768, 12, 2048, 32000))]
    return small if quick else small + large


# VmHWM (the peak RSS of this process image) rather than ru_maxrss, which Linux carries over from
# the forked parent across exec.
LOAD_SCRIPT = """
import sys, json, torch, transformers
def peak_kb():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1])
base = peak_kb()
model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], device_map=sys.argv[2])
torch.tpu.synchronize()
print(json.dumps({"base_kb": base, "peak_kb": peak_kb()}))
"""


def load_memory(path, device_map):
    """Peak host RSS growth (MB) of a fresh process while from_pretrained loads `path`."""
    out = subprocess.run([sys.executable, "-c", LOAD_SCRIPT, path, device_map], capture_output=True, text=True,
                         env=dict(os.environ, TORCH_TPU_AOT_CHECK=""), timeout=1200)
    if out.returncode != 0:
        return float("nan")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return (r["peak_kb"] - r["base_kb"]) / 1024


def generate(model, ids, n, cache):
    kwargs = {"cache_implementation": "static"} if cache == "static" else {}
    return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                          min_new_tokens=n, do_sample=False, **kwargs)


def measure(model, ids, device, cache):
    """First call (s, compiles), then warm prefill tokens/s and decode tokens/s, v6e us/token."""
    compiles = torch_tpu._C._cache_stats()["compiles"]
    first_out, first = timing.timed(lambda: generate(model, ids, NEW, cache), device)
    first_compiles = torch_tpu._C._cache_stats()["compiles"] - compiles
    _, prefill = timing.timed(lambda: generate(model, ids, 1, cache), device)
    before = torch_tpu.aot.stats()
    out, total = timing.timed(lambda: generate(model, ids, NEW, cache), device)
    after = torch_tpu.aot.stats()
    v6e = None
    if device == "tpu" and after["topology"] and not after["error"]:
        v6e = torch_tpu.aot.between(before, after)["seconds"] / NEW * 1e6
    assert out.cpu().tolist() == first_out.cpu().tolist()
    return dict(first=first, compiles=first_compiles, prefill=PROMPT / prefill,
                decode=(NEW - 1) / max(total - prefill, 1e-9), v6e=v6e, tokens=out.cpu())


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="only the ~10M models")
    args = parser.parse_args()
    rows = []
    for name, config in configs(args.quick):
        torch.manual_seed(0)
        cpu_model = transformers.AutoModelForCausalLM.from_config(config).eval()
        params = sum(p.numel() for p in cpu_model.parameters()) / 1e6
        with tempfile.TemporaryDirectory() as path:
            cpu_model.save_pretrained(path)
            size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)) / 2**20
            rss = load_memory(path, "tpu")
            model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="tpu")
        ids = torch.randint(3, config.vocab_size, (1, PROMPT), generator=torch.Generator().manual_seed(1))
        cpu = measure(cpu_model, ids, "cpu", "dynamic")
        for cache in ("static", "dynamic"):
            r = measure(model, ids.to("tpu"), "tpu", cache)
            same = r["tokens"].tolist() == cpu["tokens"].tolist()
            rows.append((name, params, size, rss, cache, r, cpu, same))
        del model
    print(f"torch-tpu LLM generate benchmark — tpu device: {torch_tpu._C._platform_name()}, "
          f"{torch.get_num_threads()} CPU threads, prompt {PROMPT} tokens, {NEW} new tokens (greedy)")
    header = (f"{'model':<14} {'params':>7} {'ckpt MB':>8} {'load RSS MB':>11} {'cache':<8} {'1st call s':>10} "
              f"{'compiles':>8} {'prefill t/s':>11} {'decode t/s':>10} {'CPU decode':>10} {'decode ratio':>12} "
              f"{'same ids':>8} {'v6e us/tok':>10}")
    print(header)
    print("-" * len(header))
    for name, params, size, rss, cache, r, cpu, same in rows:
        v6e = f"{r['v6e']:.1f}" if r["v6e"] is not None else "-"
        print(f"{name:<14} {params:>6.1f}M {size:>8.1f} {rss:>11.1f} {cache:<8} {r['first']:>10.2f} "
              f"{r['compiles']:>8} {r['prefill']:>11.1f} {r['decode']:>10.1f} {cpu['decode']:>10.1f} "
              f"{r['decode'] / cpu['decode']:>11.2f}x {str(same):>8} {v6e:>10}")
    print("decode ratio: tpu decode tokens/s / PyTorch CPU eager decode tokens/s (same machine, same run; "
          "target >= 0.8x for ~100M). load RSS: peak host memory growth of a fresh process loading the "
          "checkpoint with device_map='tpu' (on the CPU plugin it includes the device buffers themselves, "
          "1x the checkpoint, and the memory-mapped safetensors pages, up to 1x). v6e: libtpu's estimate per generated token (warm run; roofline bound for modules it does not model, such as the compiled decode graph).")


if __name__ == "__main__":
    main()
