"""The masked attention lowered for libtpu (lowering/attention.cc, Target::Tpu: the soft-capped
form its flash-attention pass rewrites) computes PyTorch's numbers. The CPU plugin runs it when
TORCH_TPU_LOWERING_TARGET=tpu, so each case runs in a fresh process with that set and XLA's
module dump on, compares with PyTorch on the CPU, and the test checks that the dumped module
holds the form (its `tanh` cap) rather than the exact one."""
import glob
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import sys, torch, torch.nn.functional as F
import torch_tpu
torch.manual_seed(0)
cases = 0
def check(b, h, hkv, lq, lk, e, dtype, causal, mask_kind, grad=False, poison=None):
    global cases
    q = torch.randn(b, h, lq, e).to(dtype)
    k, v = (torch.randn(b, hkv, lk, e).to(dtype) for _ in range(2))
    if poison == "query_nan":
        q[0, 0, 1, 3] = float("nan")
    mask = None
    if mask_kind == "2d":
        mask = torch.rand(lq, lk) > 0.4
        mask[2] = False                        # a row the mask leaves empty: 0, as PyTorch gives
    elif mask_kind == "4d":
        mask = torch.rand(b, 1, lq, lk) > 0.4
        mask[-1, 0, -1] = False
    elif mask_kind == "heads":                 # one mask per batch entry and head
        mask = torch.rand(b, h, lq, lk) > 0.4
        mask[0, -1, 1] = False
    elif mask_kind == "keys":                  # key padding: one row of keys for every query
        mask = torch.rand(b, 1, 1, lk) > 0.3
        if b > 1:
            mask[0, 0, 0, : lk // 2] = False   # a left-padded prompt
            mask[-1] = False                   # a batch entry with no key at all: rows of 0
    f = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal,
                                                          enable_gqa=h != hkv)
    tq, tk, tv = (x.to("tpu").requires_grad_(grad) for x in (q, k, v))
    out = f(tq, tk, tv, None if mask is None else mask.to("tpu"))
    ref_in = [x.clone().requires_grad_(grad) for x in (q, k, v)]
    ref = f(*ref_in, mask)
    tol = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(out.cpu(), ref, equal_nan=True, **tol)
    if grad:
        g = torch.randn_like(ref)
        out.backward(g.to("tpu"))
        ref.backward(g)
        for a, r in zip((tq, tk, tv), ref_in):
            torch.testing.assert_close(a.grad.cpu(), r.grad, **tol)
    cases += 1
check(1, 2, 2, 128, 128, 64, torch.float32, True, None)
check(2, 4, 2, 128, 128, 64, torch.float32, True, None)              # grouped-query attention
check(1, 2, 2, 128, 384, 32, torch.float32, True, None)              # fewer queries than keys
check(1, 2, 2, 384, 128, 32, torch.float32, True, None)              # more queries than keys
check(1, 2, 2, 128, 128, 64, torch.float32, False, "2d")
check(2, 2, 2, 128, 256, 64, torch.float32, True, "4d")
check(1, 2, 2, 1000, 1000, 16, torch.float32, True, None)            # padded to 1024
check(1, 2, 2, 1000, 1000, 16, torch.bfloat16, False, "2d")          # padded, mask padded too
check(1, 2, 2, 128, 128, 64, torch.float32, True, None, poison="query_nan")
check(1, 2, 2, 128, 128, 32, torch.float32, True, "2d", grad=True)   # the backward reads its logsumexp
check(1, 2, 2, 128, 256, 64, torch.float32, False, "keys")           # [1, 1, 1, Lk]
check(3, 2, 2, 128, 128, 64, torch.float32, False, "keys")           # [B, 1, 1, Lk], kept per batch
check(2, 2, 2, 1000, 1000, 16, torch.bfloat16, True, "keys")         # per batch, causal, padded to 1024
check(2, 4, 2, 128, 256, 64, torch.float32, False, "keys")           # grouped, per batch: the batch folded into the heads
check(3, 6, 2, 128, 128, 32, torch.float32, True, "4d", grad=True)   # grouped, [B, 1, Lq, Lk], folded, and its backward
check(2, 4, 2, 128, 128, 64, torch.float32, False, None, grad=True)  # grouped, unmasked: folded in the default form too
check(2, 4, 2, 128, 256, 32, torch.float32, True, "heads")           # grouped, [B, H, Lq, Lk] folded with the heads
check(1, 2, 2, 100, 100, 64, torch.float32, True, None)              # a length the kernel does not take: exact form
print("cases", cases)
"""


def test_masked_attention_lowered_for_libtpu_matches_the_cpu(tmp_path):
    env = dict(os.environ, TORCH_TPU_LOWERING_TARGET="tpu", TORCH_TPU_QUIET="1", TORCH_TPU_CACHE_DIR="",
               XLA_FLAGS=f"--xla_dump_to={tmp_path} --xla_dump_hlo_as_text")
    env.pop("TORCH_TPU_AOT_CHECK", None)
    res = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and "cases 18" in res.stdout, res.stderr[-3000:]
    modules = [open(f).read() for f in glob.glob(os.path.join(tmp_path, "*before_optimizations.txt"))]
    capped = [m for m in modules if " tanh(" in m]
    # One module per distinct masked or causal call in the tpu form (the 100-token call keeps the
    # exact form; the unmasked one is the unmasked flash form, without a cap).
    assert len(capped) >= 15, f"{len(capped)} of {len(modules)} modules hold the capped form"


def test_an_unknown_lowering_target_is_refused():
    env = dict(os.environ, TORCH_TPU_LOWERING_TARGET="gpu", TORCH_TPU_QUIET="1")
    script = ("import torch, torch.nn.functional as F, torch_tpu\n"
              "q = torch.randn(1, 1, 4, 8, device='tpu')\n"
              "F.scaled_dot_product_attention(q, q, q, is_causal=True).cpu()\n")
    res = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode != 0
    assert "TORCH_TPU_LOWERING_TARGET must be `exact` or `tpu`, not `gpu`" in res.stderr, res.stderr[-2000:]
