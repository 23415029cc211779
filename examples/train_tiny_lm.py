"""Trains the small Qwen3.5-architecture language model that `make demo` generates with, on `tpu`.

    python examples/train_tiny_lm.py                        # the shipped checkpoint's recipe
    python examples/train_tiny_lm.py --steps 200 --out /tmp/lm --resume

The text is what every Python install carries: CPython's documentation topics
(`pydoc_data.topics`) and the docstrings of the standard library's modules, classes and
functions (read with `ast`, nothing is imported). The tokenizer is a byte-level BPE trained here
with the `tokenizers` library (saved as tokenizer.json, loaded by AutoTokenizer); the model is
transformers' Qwen3_5ForCausalLM (hybrid Gated DeltaNet and gated full-attention layers) scaled
down, trained with AdamW on random windows of the token stream. Each training step is one
executable: the step is compiled with torch.compile(backend="tpu") unless --eager.

The run is resumable: every --save-every steps the model, optimizer, step and random state are
written to OUT/training_state.pt, and --resume continues from there. OUT/train_log.tsv logs the
loss; the final model and tokenizer are saved with save_pretrained into OUT.
"""
import argparse
import ast
import math
import os
import sysconfig
import time
from pathlib import Path

import torch

import torch_tpu  # noqa: F401  (autoload imports it too)

SKIPPED_DIRS = {"test", "tests", "idlelib", "lib2to3", "turtledemo", "ensurepip", "site-packages",
                "__pycache__"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "checkpoints" / "tiny-qwen3_5-pydocs"))
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--hidden", type=int, default=192)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                   help="bfloat16 trains under torch.autocast('tpu'); weights stay float32")
    p.add_argument("--device", default="tpu")
    p.add_argument("--eager", action="store_true", help="do not compile the training step")
    p.add_argument("--save-every", type=int, default=250)
    p.add_argument("--resume", action="store_true", help="continue from OUT/training_state.pt")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--corpus-limit", type=int, default=0, help="use only the first N texts (tests)")
    return p.parse_args(argv)


def corpus(limit=0):
    """English text shipped with CPython: documentation topics, then docstrings (sorted paths);
    the first `limit` texts when limit > 0."""
    import pydoc_data.topics

    texts = [pydoc_data.topics.topics[k] for k in sorted(pydoc_data.topics.topics)]
    root = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.rglob("*.py")):
        if limit and len(texts) >= limit:
            return texts[:limit]
        if SKIPPED_DIRS & set(path.relative_to(root).parts[:-1]):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc) > 80:  # one-liners are mostly "Return x." boilerplate
                    texts.append(doc)
    return texts


def train_tokenizer(texts, vocab_size):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<|endoftext|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>")


def token_stream(tokenizer, texts):
    ids = []
    for text in texts:
        ids.extend(tokenizer(text)["input_ids"])
        ids.append(tokenizer.eos_token_id)
    return torch.tensor(ids, dtype=torch.int64)


def model_config(args, tokenizer):
    from transformers import Qwen3_5TextConfig

    head_dim = 48
    return Qwen3_5TextConfig(
        vocab_size=len(tokenizer), hidden_size=args.hidden, intermediate_size=args.hidden * 8 // 3 // 64 * 64,
        num_hidden_layers=args.layers, num_attention_heads=args.hidden // head_dim, num_key_value_heads=2,
        head_dim=head_dim, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32,
        linear_value_head_dim=32, max_position_embeddings=1024, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)


def learning_rate(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


def batches(stream, args, generator):
    """Random windows of seq_len + 1 tokens (inputs and shifted labels), forever."""
    offsets = torch.arange(args.seq_len + 1)
    while True:
        starts = torch.randint(0, len(stream) - args.seq_len - 1, (args.batch,), generator=generator)
        window = stream[starts[:, None] + offsets]
        yield window[:, :-1], window[:, 1:]


def make_step(model, optimizer, args):
    def loss_of(inputs, labels):
        with torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.dtype == "bfloat16"):
            logits = model(input_ids=inputs).logits
        return torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), labels.flatten())

    # Unless --eager, forward + backward are compiled as graphs; the optimizer update stays a few
    # eager fused ops (its learning rate changes every step).
    forward = loss_of if args.eager else torch.compile(loss_of, backend="tpu", fullgraph=True, dynamic=False)

    def step(inputs, labels):
        loss = forward(inputs, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        return loss.detach()

    return step


def save_state(path, model, optimizer, step, generator):
    state = {"model": {k: v.cpu() for k, v in model.state_dict().items()},
             "optimizer": optimizer.state_dict(), "step": step, "data_rng": generator.get_state(),
             "torch_rng": torch.get_rng_state()}
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)  # a run killed mid-save keeps the previous state


def sample(model, tokenizer, device, prompt="The future of AI is", tokens=40):
    inputs = tokenizer(prompt, return_tensors="pt").to(device)
    model.eval()
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=tokens, do_sample=False, repetition_penalty=1.2)
    model.train()
    return tokenizer.decode(out[0], skip_special_tokens=True)


def main(argv=None):
    args = parse_args(argv)
    from tqdm import tqdm
    from transformers import AutoTokenizer, Qwen3_5ForCausalLM

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    state_path = out / "training_state.pt"
    texts = corpus(args.corpus_limit)
    if args.resume and (out / "tokenizer.json").exists():
        tokenizer = AutoTokenizer.from_pretrained(out)
    else:
        tokenizer = train_tokenizer(texts, args.vocab)
        tokenizer.save_pretrained(out)
    stream = token_stream(tokenizer, texts)
    print(f"corpus: {len(texts)} texts, {sum(map(len, texts)) / 1e6:.2f}M characters, "
          f"{len(stream) / 1e6:.2f}M tokens (vocabulary {len(tokenizer)})")

    torch.manual_seed(args.seed)
    model = Qwen3_5ForCausalLM(model_config(args, tokenizer)).to(args.device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, betas=(0.9, 0.95))
    generator = torch.Generator().manual_seed(args.seed)
    first = 0
    if args.resume and state_path.exists():
        state = torch.load(state_path, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        generator.set_state(state["data_rng"])
        torch.set_rng_state(state["torch_rng"])
        first = state["step"]
        print(f"resumed at step {first}")
    print(f"model: Qwen3_5ForCausalLM, {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
          f"layers {model.config.layer_types}, on {args.device} ({torch.tpu.get_device_name()})")

    step_fn = make_step(model, optimizer, args)
    data = batches(stream, args, generator)
    log = open(out / "train_log.tsv", "a" if first else "w")
    if not first:
        log.write("step\tloss\tlr\ttokens_per_s\telapsed_s\n")
    start, window_loss, window_steps, last = time.perf_counter(), 0.0, 0, time.perf_counter()
    bar = tqdm(range(first, args.steps), initial=first, total=args.steps, desc="training", unit="step")
    for step in bar:
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args)
        inputs, labels = next(data)
        loss = step_fn(inputs.to(args.device), labels.to(args.device))
        window_loss, window_steps = window_loss + loss.item(), window_steps + 1
        if (step + 1) % 25 == 0 or step + 1 == args.steps:
            now = time.perf_counter()
            speed = window_steps * args.batch * args.seq_len / (now - last)
            mean = window_loss / window_steps
            log.write(f"{step + 1}\t{mean:.4f}\t{learning_rate(step, args):.6f}\t{speed:.0f}\t{now - start:.1f}\n")
            log.flush()
            bar.set_postfix(loss=f"{mean:.3f}", tok_s=f"{speed:.0f}")
            window_loss, window_steps, last = 0.0, 0, now
        if (step + 1) % args.save_every == 0 or step + 1 == args.steps:
            save_state(state_path, model, optimizer, step + 1, generator)
    bar.close()
    log.close()

    model.save_pretrained(out)
    model.generation_config.save_pretrained(out)
    print(f"saved {out} after {args.steps} steps")
    print("sample:", sample(Qwen3_5ForCausalLM.from_pretrained(out).to(args.device), tokenizer, args.device))


if __name__ == "__main__":
    main()
