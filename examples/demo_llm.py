"""The user's Transformers script on `tpu`: load a causal LM, tokenize a prompt, generate, print.

    python examples/demo_llm.py                                  # the shipped tiny Qwen3.5 (make demo)
    python examples/demo_llm.py --model Qwen/Qwen3.5-9B          # with internet: the real model
    python examples/demo_llm.py --model ./my_checkpoint          # any local save_pretrained dir

The default model is examples/checkpoints/tiny-qwen3_5-pydocs: the Qwen3.5 architecture scaled
down to 2M parameters and trained on `tpu` by examples/train_tiny_lm.py on CPython's own
documentation, so it continues the prompt in (Python-documentation) English.

Besides the continuation it prints the platform, prefill and decode tokens/s, how many
executables were compiled, and (with TORCH_TPU_AOT_CHECK=v6e:1x1 and libtpu installed)
libtpu's v6e estimate per generated token. With `--cache static` (the default) Transformers
compiles the decode step with torch.compile(backend="tpu") by itself, so every generated token
after the first reuses one executable; `--cache dynamic` is Transformers' default DynamicCache,
run eagerly (each new sequence length compiles the ops whose shapes contain it: slow to warm up).
"""
import argparse
import time
from pathlib import Path

import torch

import torch_tpu
import torch_tpu.aot


SHIPPED_MODEL = Path(__file__).resolve().parent / "checkpoints" / "tiny-qwen3_5-pydocs"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=str(SHIPPED_MODEL), help="hub id or local directory (save_pretrained)")
    p.add_argument("--prompt", default="The future of AI is")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    p.add_argument("--cache", default="static", choices=["static", "dynamic"])
    return p.parse_args()


def generate(model, inputs, args, max_new_tokens):
    kwargs = dict(max_new_tokens=max_new_tokens, do_sample=False)
    if args.cache == "static":
        kwargs["cache_implementation"] = "static"
    return model.generate(**inputs, **kwargs)


def main():
    args = parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = "auto" if args.dtype == "auto" else getattr(torch, args.dtype)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, device_map="tpu", dtype=dtype)
    inputs = tokenizer(args.prompt, return_tensors="pt").to("tpu")
    prompt_tokens = inputs["input_ids"].shape[1]

    compiles = torch_tpu.metrics.compiles()
    start = time.perf_counter()
    output = generate(model, inputs, args, args.max_new_tokens)
    first_run = time.perf_counter() - start
    first_compiles = torch_tpu.metrics.compiles_line(compiles, torch_tpu.metrics.compiles())
    new_tokens = output.shape[1] - prompt_tokens

    print(tokenizer.decode(output[0], skip_special_tokens=True))
    print()
    print(f"platform: {torch.tpu.get_device_name()} - {torch_tpu._C._runtime_description()}")
    print(f"model: {args.model} ({sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, "
          f"{next(model.parameters()).dtype}), cache: {args.cache}")
    print(f"first generate: {new_tokens} tokens in {first_run:.2f} s, {first_compiles}")

    # Warm: the same generation again, timed as prefill (one token) and decode.
    torch.tpu.synchronize()
    start = time.perf_counter()
    generate(model, inputs, args, 1)
    torch.tpu.synchronize()
    prefill = time.perf_counter() - start
    before = torch_tpu.aot.stats()
    compiles = torch_tpu.metrics.compiles()
    start = time.perf_counter()
    output = generate(model, inputs, args, args.max_new_tokens)
    torch.tpu.synchronize()
    total = time.perf_counter() - start
    decoded = max(output.shape[1] - prompt_tokens - 1, 1)
    print(f"prefill: {prompt_tokens / prefill:.1f} tokens/s ({prompt_tokens} prompt tokens in {prefill * 1e3:.1f} ms)")
    print(f"decode:  {decoded / max(total - prefill, 1e-9):.1f} tokens/s; "
          f"{torch_tpu.metrics.compiles_line(compiles, torch_tpu.metrics.compiles(), ' in this second run')}")
    after = torch_tpu.aot.stats()
    if after["topology"] and not after["error"]:
        chip = after["topology"].split(":")[0]
        run = torch_tpu.aot.between(before, after)
        per_token, roofline = run["seconds"] / (decoded + 1), run["roofline_seconds"] / (decoded + 1)
        print(f"libtpu ({after['topology']}): {per_token * 1e6:.1f} us per generated token on {chip}, "
              f"roofline bound {roofline * 1e6:.1f} us ({run['unmodelled']} of {run['ops']} launches have no "
              f"libtpu estimate and count at their roofline bound; {after['accepted']} programs accepted, "
              f"{after['rejected']} rejected)")


if __name__ == "__main__":
    main()
