"""Qwen3.5-9B on one v6e chip, projected from libtpu's cost analysis of full-width graphs: prefill
of 1024 tokens, and one decode token at batch 1 and 8 over a 1024-token KV cache, eager and compiled.
No weights and no TPU needed.

The 9B model (Qwen3_5TextConfig's defaults: "Qwen3.5-9B style", 32 layers, 24 Gated DeltaNet +
8 gated full-attention) is built with the real class at full width and a few layers: one
full-attention layer (F), two (FF), and one of each (FL) (a cache needs one attention layer),
seeded weights, bfloat16. Every graph runs once on XLA:CPU with the AOT check on
(TORCH_TPU_AOT_CHECK=v6e:1x1), which compiles each module for a v6e chip too. Per layer type:
full = FF - F, linear = FL - F, rest (embedding, final norm, lm_head) = F - full; the 32-layer
model = rest + 24 linear + 8 full.

- eager: the sum of libtpu's estimates over every op module one call launches (v6e.eager_call_us;
  the roofline bound stands in for modules libtpu does not model). Launch latency is not in it.
- compiled: torch.compile(backend="tpu", fullgraph=True, dynamic=False) of the model's forward.
- cache: StaticCache, as generate(cache_implementation="static") uses; the decode rows fill its
  first 8 positions with a real prefill and move its length to 1024 (the values of positions
  8..1023 do not change a cost), so attention reads 1025 keys.
- bound: roofline.bound_seconds(libtpu's flops of the compiled graph, necessary bytes), necessary
  bytes = every weight read once (the embedding's gathered rows only) + the KV cache and the
  linear layers' states read once + new KV entries and every layer's output written once.

    .venv/bin/python benchmarks/llm_projection.py      (part of make bench-projection)
"""
import argparse
import gc
import os
import shutil
import sys
import tempfile

os.environ.setdefault("TORCH_TPU_QUIET", "1")
os.environ.setdefault("TORCH_TPU_CACHE_DIR", tempfile.mkdtemp(prefix="tpu_projection_"))
os.environ.setdefault("TORCH_TPU_AOT_CHECK", "v6e:1x1")
# libtpu's optimized modules, read for the bytes that cross HBM (its cost analysis counts a weight
# prefetched into on-chip memory about twice; tools/hbm_traffic.py)
DUMP_DIR = tempfile.mkdtemp(prefix="tpu_projection_dump_")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={DUMP_DIR} --xla_dump_hlo_as_text").strip()

import torch  # noqa: E402
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig, StaticCache  # noqa: E402

from torch_tpu import aot  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graph_projection  # noqa: E402
import roofline  # noqa: E402
import v6e  # noqa: E402

KV_TOKENS = 1024
PREFILL_TOKENS = 1024
GRAPHS = {"F": ["full_attention"], "FF": ["full_attention"] * 2, "FL": ["full_attention", "linear_attention"]}
SMALL = dict(hidden_size=256, intermediate_size=512, vocab_size=4096, num_attention_heads=4,
             num_key_value_heads=2, head_dim=64, linear_num_key_heads=2, linear_num_value_heads=4,
             linear_key_head_dim=32, linear_value_head_dim=32)


def make_config(layer_types, small):
    return Qwen3_5TextConfig(num_hidden_layers=len(layer_types), layer_types=list(layer_types),
                             **(SMALL if small else {}))


def workloads(prefill_tokens):
    # name: (batch, new tokens, KV length before the call)
    return {f"prefill {prefill_tokens}": (1, prefill_tokens, 0),
            "decode, batch 1": (1, 1, KV_TOKENS), "decode, batch 8": (8, 1, KV_TOKENS)}


def fresh_cache(cfg, model, batch, kv_tokens, new_tokens):
    """A StaticCache holding `kv_tokens` positions, ready for `new_tokens` more."""
    cache = StaticCache(config=cfg, max_cache_len=max(kv_tokens, 8) + new_tokens)
    if kv_tokens:
        ids = torch.zeros(batch, 8, dtype=torch.long, device="tpu")
        with torch.no_grad():
            model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
        for layer in cache.layers:
            if hasattr(layer, "cumulative_length") and torch.is_tensor(layer.cumulative_length):
                layer.cumulative_length.fill_(kv_tokens)
    return cache


def measure(cfg, model, batch, tokens, kv_tokens):
    """libtpu's figures for one call, eager and compiled: {"eager_us", "eager_launches",
    "compiled_us", "flops", "bytes"} (flops and bytes: libtpu's, of the compiled graphs)."""
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (batch, tokens), generator=gen).to("tpu")

    cache = fresh_cache(cfg, model, batch, kv_tokens, tokens)
    with torch.no_grad():
        eager = v6e.eager_call_us(lambda: model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1))

    cache = fresh_cache(cfg, model, batch, kv_tokens, tokens)
    compiled = graph_projection.compiled_call(
        model, lambda c: c(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1).logits.cpu(), DUMP_DIR)
    return {"eager_us": eager["us"], "eager_launches": eager["launches"], "compiled_us": compiled["seconds"] * 1e6,
            "unmodelled": compiled["unmodelled"], "graphs": compiled["graphs"], "flops": compiled["flops"],
            "bytes": compiled["bytes"], "hbm": compiled["hbm"], "wall": compiled["wall"]}


def necessary_bytes(cfg, params, embed_params, batch, tokens, kv_tokens, layer_types):
    """Weights read once (the embedding's gathered rows only), caches and states read once, new KV
    entries and each layer's output written once; bfloat16 (the recurrent state is float32)."""
    b = 2
    weights = (params - embed_params) * b + batch * tokens * cfg.hidden_size * b
    full = sum(1 for t in layer_types if t == "full_attention")
    linear = len(layer_types) - full
    kv_entry = 2 * cfg.num_key_value_heads * cfg.head_dim * b  # one token's keys and values
    kv = full * batch * (kv_tokens * kv_entry + tokens * kv_entry)
    state = (cfg.linear_num_value_heads * cfg.linear_key_head_dim * cfg.linear_value_head_dim * 4
             + (2 * cfg.linear_num_key_heads * cfg.linear_key_head_dim
                + cfg.linear_num_value_heads * cfg.linear_value_head_dim) * cfg.linear_conv_kernel_dim * b)
    states = linear * batch * state * (2 if kv_tokens else 1)  # read and written; a prefill only writes
    outputs = len(layer_types) * batch * tokens * cfg.hidden_size * b
    return weights + kv + states + outputs


def project(args):
    full_types = Qwen3_5TextConfig().layer_types
    results = {}
    for graph, layer_types in GRAPHS.items():
        cfg = make_config(layer_types, args.small)
        torch.manual_seed(0)
        model = Qwen3_5ForCausalLM._from_config(cfg, dtype=torch.bfloat16).eval().to("tpu")
        embed = model.model.embed_tokens.weight.numel()
        params = sum(p.numel() for p in model.parameters())
        for name, (batch, tokens, kv) in workloads(args.prefill).items():
            r = measure(cfg, model, batch, tokens, kv)
            r["params"], r["embed"] = params, embed
            results[(graph, name)] = r
            print(f"  {graph:<3} {name:<16} eager {r['eager_us']:>10.1f} us ({r['eager_launches']} launches)  "
                  f"compiled {r['compiled_us']:>10.1f} us ({r['graphs']} graphs, {r['unmodelled']} unmodelled)  "
                  f"XLA:CPU {r['wall']:.1f} s", flush=True)
        del model
        gc.collect()

    full_cfg = make_config(full_types, args.small)
    n_full = sum(1 for t in full_types if t == "full_attention")
    n_linear = len(full_types) - n_full
    keys = ("eager_us", "compiled_us", "flops", "bytes", "hbm", "params", "eager_launches")
    rows = []
    for name, (batch, tokens, kv) in workloads(args.prefill).items():
        F, FF, FL = (results[(g, name)] for g in ("F", "FF", "FL"))
        full = {k: FF[k] - F[k] for k in keys}
        linear = {k: FL[k] - F[k] for k in keys}
        rest = {k: F[k] - full[k] for k in keys}
        model = {k: rest[k] + n_linear * linear[k] + n_full * full[k] for k in keys}
        need = necessary_bytes(full_cfg, model["params"], F["embed"], batch, tokens, kv, full_types)
        bound_us = roofline.bound_seconds(model["flops"], need) * 1e6
        rows.append((name, model, need, bound_us))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prefill", type=int, default=PREFILL_TOKENS, help="prefill length")
    parser.add_argument("--small", action="store_true", help="a narrow model, to try the script quickly")
    args = parser.parse_args()
    if not aot.stats()["topology"]:
        sys.exit("libtpu is not installed (pip install -r requirements-aot.txt): nothing to project")
    rows = project(args)
    width = "narrow test width" if args.small else "Qwen3.5-9B width (Qwen3_5TextConfig defaults)"
    print(f"\nQwen3.5 projection - libtpu v6e:1x1 cost analysis, {width}, 32 layers, bfloat16, StaticCache")
    print(f"{'workload':<16} {'params':>6} {'bound':>8} | {'compiled':>8} {'ratio':>5} {'HBM-rate':>8} {'ratio':>5} | "
          f"{'eager':>8} {'ratio':>5} {'launches':>8} | {'TFLOP':>6} {'GB cost':>7} {'GB HBM':>6} {'GB need':>7}")
    for name, m, need, bound_us in rows:
        hbm_us = roofline.bound_seconds(m["flops"], m["hbm"]) * 1e6
        print(f"{name:<16} {m['params'] / 1e9:>5.2f}B {bound_us / 1e3:>6.2f}ms | {m['compiled_us'] / 1e3:>6.2f}ms "
              f"{m['compiled_us'] / bound_us:>4.2f}x {hbm_us / 1e3:>6.2f}ms {hbm_us / bound_us:>4.2f}x | "
              f"{m['eager_us'] / 1e3:>6.2f}ms {m['eager_us'] / bound_us:>4.2f}x {m['eager_launches']:>8.0f} | "
              f"{m['flops'] / 1e12:>6.2f} {m['bytes'] / 1e9:>7.2f} {m['hbm'] / 1e9:>6.2f} {need / 1e9:>7.2f}")
    print("bound = max(flops / 918 TFLOP/s, necessary bytes / 1.638 TB/s), flops libtpu's for the compiled graphs. "
          "compiled = libtpu's estimate; HBM-rate = the same bound over the bytes that cross HBM in libtpu's "
          "optimized module (tools/hbm_traffic.py: its cost analysis, GB cost, counts a weight prefetched into "
          "on-chip memory about twice). eager = the sum of libtpu's estimates over its op modules, launch "
          "latency not included.")
    shutil.rmtree(DUMP_DIR, ignore_errors=True)

if __name__ == "__main__":
    main()
