"""Bounded dynamism at the model level (docs/bucketing.md): generate() with random prompt lengths
compiles (almost) nothing once its buckets are warm, token-exact against the CPU (issue 27's
acceptance, for the families the bucketing covers today: a batch of one, prefill attention
without a materialised mask)."""
import random

import pytest
import torch

from helpers import DEV, executables_built
from test_bucketing import ids_of

transformers = pytest.importorskip("transformers")
from test_transformers_families import checkpoint  # noqa: E402


@pytest.mark.parametrize("family", ["llama3", "qwen3"])
@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_generate_with_random_prompt_lengths_compiles_little_after_warm_up(family, cache, tmp_path_factory):
    cpu_model, path = checkpoint(family, tmp_path_factory)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map=DEV)
    kw = dict(max_new_tokens=6, min_new_tokens=6, do_sample=False)
    if cache == "static":
        kw["cache_implementation"] = "static"
    rng = random.Random(0)
    lengths = [rng.randint(3, 400) for _ in range(12)]  # buckets 128, 256 and 512 in the first 4
    compiles = []
    for i, length in enumerate(lengths):
        ids = ids_of(length, seed=i)
        mask = torch.ones_like(ids)
        built = executables_built()
        with torch.no_grad():
            out = model.generate(input_ids=ids.to(DEV), attention_mask=mask.to(DEV), **kw)
        compiles.append(executables_built() - built)
        assert torch.equal(out.cpu(), cpu_model.generate(input_ids=ids, attention_mask=mask, **kw)), length
    after_warm_up = compiles[4:]
    if cache == "dynamic":
        assert sum(after_warm_up) / len(after_warm_up) <= 2, compiles
    else:
        # generate() keeps a StaticCache of prompt + new tokens rows and reallocates it for a
        # longer request; the prompt's write into it and attention over it then see a new
        # length: 3 compiles while the cache is reused, 8 when it is reallocated (the exact path
        # compiled ~55 per new length).
        assert max(after_warm_up) <= 8, compiles
