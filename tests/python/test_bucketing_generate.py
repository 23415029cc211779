"""Bounded dynamism at the model level (docs/bucketing.md): generate() with random prompt lengths
compiles (almost) nothing once its buckets are warm, token-exact against the CPU (issue 27's
acceptance: a batch of one and left-padded batches of three; prefill attention with is_causal
or with a mask built from the prompt's positions, such as Gemma 3's sliding window)."""
import random

import pytest
import torch

import torch_tpu

from helpers import DEV, executables_built
from test_bucketing import ids_of

transformers = pytest.importorskip("transformers")
from test_transformers_families import checkpoint  # noqa: E402


def left_padded(lengths, seed):
    """A batch of prompts of `lengths`, left-padded to the longest with pad id 0: (ids, mask)."""
    longest = max(lengths)
    ids = torch.zeros(len(lengths), longest, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, longest - length:] = ids_of(length, seed=seed * 7 + row)[0]
        mask[row, longest - length:] = 1
    return ids, mask


def generate_requests(model, cpu_model, lengths, first_seed, kw, batch=1):
    """generate() of one prompt per length on tpu and on the CPU, token-exact; returns the
    executables each request built. With `batch` > 1 each request is a left-padded batch: the
    length is its longest prompt's, the others a seeded fraction of it."""
    compiles = []
    for i, length in enumerate(lengths):
        rng = random.Random(first_seed + i)
        ids, mask = left_padded([length] + [rng.randint(1, length) for _ in range(batch - 1)], first_seed + i)
        built = executables_built()
        with torch.no_grad():
            out = model.generate(input_ids=ids.to(DEV), attention_mask=mask.to(DEV), **kw)
        compiles.append(executables_built() - built)
        assert torch.equal(out.cpu(), cpu_model.generate(input_ids=ids, attention_mask=mask, **kw)), length
    return compiles


@pytest.mark.parametrize("family", ["llama3", "qwen3", "qwen3_5", "gemma3"])
@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_generate_with_random_prompt_lengths_compiles_little_after_warm_up(family, cache, tmp_path_factory):
    cpu_model, path = checkpoint(family, tmp_path_factory)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map=DEV)
    kw = dict(max_new_tokens=6, min_new_tokens=6, do_sample=False)
    if cache == "static":
        kw["cache_implementation"] = "static"
    rng = random.Random(0)
    lengths = [rng.randint(3, 400) for _ in range(12)]  # buckets 128, 256 and 512 in the first 4
    compiles = generate_requests(model, cpu_model, lengths, 0, kw)
    after_warm_up = compiles[4:]
    # A StaticCache request that reuses the cache compiles one executable: attention over the
    # cache's first L rows (Transformers slices them for an empty cache's prefill), which is an
    # exact view of the cache. One that reallocates a longer cache compiles ~8 (every op on it).
    assert sum(after_warm_up) / len(after_warm_up) <= 2, compiles


@pytest.mark.parametrize("family", ["llama3", "qwen3", "qwen3_5", "gemma3"])
@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_left_padded_batches_of_random_lengths_compile_little_after_warm_up(family, cache, tmp_path_factory):
    """Batches of three left-padded prompts (the longest 3-400 tokens): the ids upload into a
    bucket of columns ([3, L] of [3, C], not contiguous), the projections run over the bucket's
    rows (growing_matmul.cc), the masks are padded along both dims and reshapes that merge the
    batch with the length copy into the bucket's rows (growing_reshape.cc), so a new length in a
    warm bucket compiles nothing. Each batch size warms its own buckets."""
    cpu_model, path = checkpoint(family, tmp_path_factory)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map=DEV)
    kw = dict(max_new_tokens=4, min_new_tokens=4, do_sample=False, pad_token_id=0)
    if cache == "static":
        kw["cache_implementation"] = "static"
    rng = random.Random(0)
    lengths = [rng.randint(3, 400) for _ in range(12)]  # buckets 128, 256 and 512 in the first 4
    compiles = generate_requests(model, cpu_model, lengths, 1000, kw, batch=3)
    after_warm_up = compiles[4:]
    assert sum(after_warm_up) / len(after_warm_up) <= 2, compiles


def compiled_forward_graphs(family, prompts, dynamic, tmp_path_factory):
    """Runs torch.compile(model, backend="tpu", dynamic=dynamic) on each (ids, mask) prompt
    against the CPU model's logits; returns the graph executables compiled."""
    from torch_tpu.compile import stats

    cpu_model, path = checkpoint(family, tmp_path_factory)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map=DEV)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="tpu", dynamic=dynamic)
    graphs_before = sum(e.compiles for e in list(stats.executables))
    for ids, mask in prompts:
        with torch.no_grad():
            got = compiled(input_ids=ids.to(DEV), attention_mask=mask.to(DEV), use_cache=False).logits
            want = cpu_model(input_ids=ids, attention_mask=mask, use_cache=False).logits
        torch.testing.assert_close(got.cpu(), want, msg=lambda m: f"shape {tuple(ids.shape)}: {m}")
    return sum(e.compiles for e in list(stats.executables)) - graphs_before


def buckets_of(lengths):
    return {torch_tpu._C._bucket_for(n) for n in lengths}


@pytest.mark.parametrize("family,dynamic", [("llama3", True), ("qwen3", True), ("gemma3", True), ("gpt2", True),
                                            ("llama3", None)])
def test_a_compiled_forward_over_ten_prompt_lengths_compiles_once_per_bucket(family, dynamic, tmp_path_factory):
    """torch.compile(model, dynamic=True): the prompt length is bucketed inside the graph
    (torch_tpu/compile/bucketed_graphs.py), so ten lengths compile one graph per bucket. With
    dynamic=None the first length compiles a static graph before Dynamo makes the length
    dynamic: one more."""
    from torch_tpu.compile import stats

    lengths = [5, 17, 33, 64, 100, 127, 128, 129, 200, 255]
    prompts = [(ids, torch.ones_like(ids)) for ids in (ids_of(n, seed=n) for n in lengths)]
    graphs = compiled_forward_graphs(family, prompts, dynamic, tmp_path_factory)
    assert graphs <= len(buckets_of(lengths)) + (dynamic is None), (graphs, dict(stats.bucket_refusals))


def test_a_compiled_prefill_hands_its_cache_to_eager_decoding(tmp_path_factory):
    """The KV cache a bucketed graph returns is a padded prefix: eager decode steps append into
    its spare rows (growing dims) and stay token-exact."""
    cpu_model, path = checkpoint("llama3", tmp_path_factory)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map=DEV)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="tpu", dynamic=True)
    for length in (9, 41):
        ids = ids_of(length, seed=length)
        with torch.no_grad():
            out = compiled(input_ids=ids.to(DEV), attention_mask=torch.ones_like(ids).to(DEV))
            ref = cpu_model(input_ids=ids, attention_mask=torch.ones_like(ids))
            cache, ref_cache = out.past_key_values, ref.past_key_values
            token, ref_token = out.logits[:, -1:].argmax(-1), ref.logits[:, -1:].argmax(-1)
            assert torch.equal(token.cpu(), ref_token)
            for _ in range(4):
                out = model(input_ids=token, past_key_values=cache)
                ref = cpu_model(input_ids=ref_token, past_key_values=ref_cache)
                token, ref_token = out.logits[:, -1:].argmax(-1), ref.logits[:, -1:].argmax(-1)
                assert torch.equal(token.cpu(), ref_token), length


@pytest.mark.parametrize("family", ["llama3", "gemma3"])
def test_a_compiled_forward_of_a_left_padded_batch_compiles_once_per_bucket(family, tmp_path_factory):
    """A batch of two, the second left-padded: its linear layers fold [2, L] into [2 * L] rows
    (kept in the capacity's layout) and its 4-D mask is padded along two dims. One graph per
    bucket, and at most one more: Dynamo compiles the first call's shapes statically."""
    from torch_tpu.compile import stats

    lengths = [7, 19, 40, 90, 130, 150]
    prompts = []
    for length in lengths:
        ids = torch.cat([ids_of(length, seed=length), ids_of(length, seed=length + 1)])
        mask = torch.ones_like(ids)
        mask[1, :length // 2] = 0
        ids[1, :length // 2] = 0
        prompts.append((ids, mask))
    graphs = compiled_forward_graphs(family, prompts, True, tmp_path_factory)
    assert graphs <= len(buckets_of(lengths)) + 1, (graphs, dict(stats.bucket_refusals))


def test_qwen3_5_short_prompts_compile_little_after_the_first(tmp_path_factory):
    # Prompts of one chunk (L <= 64) of the linear-attention layers: the chunk view is exact, the
    # rule's result returns to the bucket through its contiguous copy (2 executables per length).
    cpu_model, path = checkpoint("qwen3_5", tmp_path_factory)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map=DEV)
    kw = dict(max_new_tokens=4, min_new_tokens=4, do_sample=False)
    compiles = generate_requests(model, cpu_model, [13, 23, 40, 7, 61], 0, kw)
    assert max(compiles[1:]) <= 2, compiles


def test_qwen3_5_long_prompts_stay_exact(tmp_path_factory):
    """Qwen3.5's linear-attention layers reshape a bucketed prompt into chunks: a view whose
    strides only looked like a padded prefix's was widened past its storage (a RuntimeError in
    setStorage). Such views now take the exact path."""
    cpu_model, path = checkpoint("qwen3_5", tmp_path_factory)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map=DEV)
    generate_requests(model, cpu_model, [200, 391], 0, dict(max_new_tokens=3, min_new_tokens=3, do_sample=False))


@pytest.mark.parametrize("dynamic", [True, None])
def test_generate_with_a_compiled_forward_compiles_nothing_per_request_once_warm(dynamic, tmp_path_factory):
    """model.forward = torch.compile(model.forward): the prefill runs over its prompt's bucket
    (the last token's logits read at a runtime start) and each decode step over its cache's
    bucket (the new key and value written after the true rows), so requests of new lengths reuse
    the bucket graphs; the per-shape path compiled a graph per request and per token."""
    cpu_model, path = checkpoint("llama3", tmp_path_factory)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map=DEV)
    torch._dynamo.reset()
    model.forward = torch.compile(model.forward, backend="tpu", dynamic=dynamic)
    kw = dict(max_new_tokens=8, min_new_tokens=8, do_sample=False)
    rng = random.Random(1)
    lengths = [rng.randint(3, 110) for _ in range(8)]  # prompt and new tokens inside bucket 128
    compiles = generate_requests(model, cpu_model, lengths, 100, kw)
    assert sum(compiles[3:]) <= 1, compiles


def test_generate_with_a_compiled_forward_and_a_static_cache_stays_exact(tmp_path_factory):
    """Gemma 3 with a StaticCache hands the compiled forward a square-padded sliding mask whose
    size Dynamo keeps apart from the ids'; the bucket's graph failed in attention's shape check
    (a RuntimeError to the user). Such a bucket is refused and the call runs per shape."""
    cpu_model, path = checkpoint("gemma3", tmp_path_factory)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map=DEV)
    torch._dynamo.reset()
    model.forward = torch.compile(model.forward, backend="tpu", dynamic=True)
    kw = dict(max_new_tokens=3, min_new_tokens=3, do_sample=False)
    generate_requests(model, cpu_model, [20, 150], 200, kw)  # DynamicCache first: dynamic dims
    generate_requests(model, cpu_model, [20, 37], 300, dict(kw, cache_implementation="static"))
