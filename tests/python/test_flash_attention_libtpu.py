"""Attention reaches libtpu's flash-attention kernel (docs/tpu_aot.md, "Flash attention"; issue
30): each case runs SDPA on tpu in a fresh process with the AOT check on and libtpu's HLO dumps
written, and the test reads libtpu's optimized module for the Mosaic kernel (`tpu_custom_call`)
that replaces the attention, next to the result against the CPU. Masked and causal attention
reach it in the form lowered for libtpu (lowering/target.h), which the AOT check compiles while
the CPU plugin runs the exact form. Skipped when libtpu is not installed."""
import os
import subprocess
import sys

import pytest

from torch_tpu import _discovery

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from hbm_traffic import libtpu_dumps  # noqa: E402

pytestmark = pytest.mark.skipif(_discovery.libtpu_path() is None, reason="libtpu not installed")

SCRIPT = r"""
import sys, torch, torch.nn.functional as F
import torch_tpu
h, hkv, l, dtype, mode = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), getattr(torch, sys.argv[4]), sys.argv[5]
causal, mask_kind = sys.argv[6] == "causal", sys.argv[7]
lk = int(sys.argv[8]) if len(sys.argv) > 8 else l
batch = int(sys.argv[9]) if len(sys.argv) > 9 else (2 if mask_kind == "batch_keys" else 1)
g = torch.Generator().manual_seed(0)
q = torch.randn(batch, h, l, 128, generator=g).to(dtype)
k, v = (torch.randn(batch, hkv, lk, 128, generator=g).to(dtype) for _ in range(2))
mask = {"none": None, "2d": torch.rand(l, lk, generator=g) > 0.3,
        "4d": torch.rand(1, 1, l, lk, generator=g) > 0.3,
        "keys": torch.rand(1, 1, 1, lk, generator=g) > 0.3,
        "batch_keys": torch.arange(lk) >= torch.tensor([[[[0]]], [[[lk // 3]]]])}[mask_kind]
f = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal, enable_gqa=h != hkv)
with torch.no_grad():
    run = torch.compile(f, backend="tpu", fullgraph=True) if mode == "compiled" else f
    out = run(q.to("tpu"), k.to("tpu"), v.to("tpu"), None if mask is None else mask.to("tpu")).cpu()
tol = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
torch.testing.assert_close(out, f(q, k, v, mask), **tol)
print("matches the cpu")
"""


def optimized_modules(dump_dir):
    """libtpu's optimized modules in the dump (the CPU plugin writes no tpu_comp_env file)."""
    return [open(f).read() for f in libtpu_dumps(dump_dir)]


@pytest.mark.parametrize("heads,kv_heads,length,dtype,mode", [
    (2, 2, 512, "bfloat16", "eager"),
    (4, 2, 512, "bfloat16", "eager"),    # grouped-query attention
    (2, 2, 512, "float32", "eager"),
    (2, 2, 1000, "bfloat16", "eager"),   # padded to 1024: a length the kernel takes
    (2, 2, 512, "bfloat16", "compiled"),
    (4, 2, 512, "bfloat16", "batch of 2"),  # grouped with a batch: folded into the heads (rank-4 q)
])
def test_unmasked_attention_is_rewritten_into_libtpus_flash_kernel(heads, kv_heads, length, dtype, mode, tmp_path):
    batch = 2 if mode == "batch of 2" else 1
    assert_rewritten(tmp_path, heads, kv_heads, length, dtype, "eager" if batch > 1 else mode, "plain", "none",
                     batch=batch)


@pytest.mark.parametrize("heads,kv_heads,length,dtype,mode,causal,mask,key_length", [
    (2, 2, 512, "bfloat16", "eager", "causal", "none", 512),
    (4, 2, 512, "bfloat16", "eager", "causal", "none", 512),     # grouped-query attention
    (2, 2, 512, "float32", "eager", "causal", "none", 512),
    (2, 2, 1000, "bfloat16", "eager", "causal", "none", 1000),   # padded to 1024, padded keys masked
    (2, 2, 128, "bfloat16", "eager", "causal", "none", 512),     # fewer queries than keys
    (2, 2, 512, "bfloat16", "eager", "plain", "2d", 512),        # boolean [L, L] mask
    (4, 2, 512, "float32", "eager", "causal", "4d", 512),        # boolean [1, 1, L, L] mask and causal
    (2, 2, 512, "bfloat16", "eager", "plain", "keys", 512),      # key-padding mask [1, 1, 1, L]
    (2, 2, 512, "bfloat16", "compiled", "plain", "keys", 512),
    (2, 2, 1000, "bfloat16", "eager", "causal", "batch_keys", 1000),  # a left-padded batch of two, padded to 1024
    (2, 2, 512, "bfloat16", "compiled", "plain", "batch_keys", 512),
    (2, 2, 512, "bfloat16", "compiled", "causal", "none", 512),
    (2, 2, 512, "bfloat16", "compiled", "plain", "2d", 512),
    (4, 2, 1000, "bfloat16", "eager", "causal", "batch_keys", 1000),  # grouped, a left-padded batch, padded
    (4, 2, 512, "float32", "compiled", "plain", "batch_keys", 512),
])
def test_masked_and_causal_attention_is_rewritten_into_libtpus_flash_kernel(heads, kv_heads, length, dtype, mode,
                                                                           causal, mask, key_length, tmp_path):
    assert_rewritten(tmp_path, heads, kv_heads, length, dtype, mode, causal, mask, key_length)


def assert_rewritten(tmp_path, heads, kv_heads, length, dtype, mode, causal, mask, key_length=None, batch=None):
    env = dict(os.environ, TORCH_TPU_AOT_CHECK="v6e:1x1", TORCH_TPU_QUIET="1", TORCH_TPU_CACHE_DIR="",
               XLA_FLAGS=f"--xla_dump_to={tmp_path} --xla_dump_hlo_as_text")
    env.pop("TORCH_TPU_LOWERING_TARGET", None)
    args = [str(heads), str(kv_heads), str(length), dtype, mode, causal, mask, str(key_length or length)]
    if batch is not None:
        args.append(str(batch))
    res = subprocess.run([sys.executable, "-c", SCRIPT, *args], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and "matches the cpu" in res.stdout, res.stderr[-3000:]
    modules = optimized_modules(tmp_path)
    attention = [m for m in modules if "tpu_custom_call" in m]
    assert attention, f"no libtpu module holds the flash kernel ({len(modules)} optimized modules)"
