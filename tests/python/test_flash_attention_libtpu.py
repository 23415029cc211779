"""Attention without a mask reaches libtpu's flash-attention kernel (docs/tpu_aot.md, "Flash
attention"; issue 30): each case runs SDPA on tpu in a fresh process with the AOT check on and
libtpu's HLO dumps written, and the test reads libtpu's optimized module for the Mosaic kernel
(`tpu_custom_call`) that replaces the attention, next to the result against the CPU. Skipped when
libtpu is not installed."""
import glob
import os
import subprocess
import sys

import pytest

from torch_tpu import _discovery

pytestmark = pytest.mark.skipif(_discovery.libtpu_path() is None, reason="libtpu not installed")

SCRIPT = r"""
import sys, torch, torch.nn.functional as F
import torch_tpu
h, hkv, l, dtype, mode = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), getattr(torch, sys.argv[4]), sys.argv[5]
g = torch.Generator().manual_seed(0)
q = torch.randn(1, h, l, 128, generator=g).to(dtype)
k, v = (torch.randn(1, hkv, l, 128, generator=g).to(dtype) for _ in range(2))
f = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=h != hkv)
with torch.no_grad():
    run = torch.compile(f, backend="tpu", fullgraph=True) if mode == "compiled" else f
    out = run(q.to("tpu"), k.to("tpu"), v.to("tpu")).cpu()
tol = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
torch.testing.assert_close(out, f(q, k, v), **tol)
print("matches the cpu")
"""


def optimized_modules(dump_dir):
    """libtpu's optimized modules in the dump (the CPU plugin writes no tpu_comp_env file)."""
    tpu = {os.path.basename(f).split(".")[0] for f in glob.glob(os.path.join(dump_dir, "*tpu_comp_env.txt"))}
    return [open(f).read() for f in glob.glob(os.path.join(dump_dir, "*.after_optimizations.txt"))
            if os.path.basename(f).split(".")[0] in tpu]


@pytest.mark.parametrize("heads,kv_heads,length,dtype,mode", [
    (2, 2, 512, "bfloat16", "eager"),
    (4, 2, 512, "bfloat16", "eager"),    # grouped-query attention
    (2, 2, 512, "float32", "eager"),
    (2, 2, 1000, "bfloat16", "eager"),   # padded to 1024: a length the kernel takes
    (2, 2, 512, "bfloat16", "compiled"),
])
def test_unmasked_attention_is_rewritten_into_libtpus_flash_kernel(heads, kv_heads, length, dtype, mode, tmp_path):
    env = dict(os.environ, TORCH_TPU_AOT_CHECK="v6e:1x1", TORCH_TPU_QUIET="1", TORCH_TPU_CACHE_DIR="",
               XLA_FLAGS=f"--xla_dump_to={tmp_path} --xla_dump_hlo_as_text")
    res = subprocess.run([sys.executable, "-c", SCRIPT, str(heads), str(kv_heads), str(length), dtype, mode],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and "matches the cpu" in res.stdout, res.stderr[-3000:]
    modules = optimized_modules(tmp_path)
    attention = [m for m in modules if "tpu_custom_call" in m]
    assert attention, f"no libtpu module holds the flash kernel ({len(modules)} optimized modules)"
