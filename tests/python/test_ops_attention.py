"""scaled_dot_product_attention on tpu: the fused path (one module forward, one backward:
csrc/lowering/attention.cc, chosen by csrc/engine/composite/fused_attention.cc) against PyTorch
on the CPU, and the calls that keep PyTorch's math path (dropout, masks needing a gradient,
odd ranks) or raise PyTorch's own errors."""
import os

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from helpers import DEV, fallbacks

FUSED = "_scaled_dot_product_flash_attention_for_cpu"
FUSED_BACKWARD = "_scaled_dot_product_flash_attention_for_cpu_backward"
# Without a gradient to record, the fused path runs the attention without logsumexp.
FUSED_INFERENCE = "_scaled_dot_product_efficient_attention"


def ops_run():
    return dict(torch_tpu._C._op_counts())


def fused_runs():
    ran = ops_run()
    return ran.get(FUSED, 0) + ran.get(FUSED_INFERENCE, 0)


def attend(device, q, k, v, grad=False, **kw):
    """SDPA on `device` (mask moved along); with grad, also d(out . w)/d(q, k, v) for a fixed w."""
    args = [t.detach().clone().to(device).requires_grad_(grad) for t in (q, k, v)]
    if isinstance(kw.get("attn_mask"), torch.Tensor):
        kw["attn_mask"] = kw["attn_mask"].to(device)
    out = F.scaled_dot_product_attention(*args, **kw)
    if not grad:
        return out.cpu(), None
    weight = torch.linspace(-1, 1, out.numel()).view(out.shape).to(device)
    (out.float() * weight).sum().backward()
    return out.cpu(), [a.grad.cpu() for a in args]


def assert_close_to_cpu(got, ref, ref64, tol):
    """got against the CPU's `ref` at PyTorch's tolerance; for float32 also passes when got is
    as close to the float64 result `ref64` as twice the CPU's own distance from it. f32 gradients
    at a large scale amplify rounding: the CPU's flash kernel blocks its sums by vector width, so
    on an AVX-512 host it lands ~7e-6 from the float64 answer on one side and we on the other
    (1.4e-5 apart, over the default 1e-5), each as close to the truth as the other."""
    try:
        torch.testing.assert_close(got, ref, equal_nan=True, **tol)
    except AssertionError:
        if ref64 is None:
            raise
        cpu_error = (ref.double() - ref64).abs().nan_to_num().max().item()
        torch.testing.assert_close(got.double(), ref64, equal_nan=True, atol=2 * cpu_error + 1e-7, rtol=0)


def tolerances(dtype):
    # bf16/f16: both sides round the unnormalised probabilities to the input type before the
    # product with v (the CPU's flash kernel and ours) and accumulate in f32, in other orders (the
    # CPU blocks its sums), so results may differ by an ulp or two of the input type; both are
    # equally far from a float64 reference (checked when this test was written).
    return {torch.bfloat16: dict(atol=2e-2, rtol=2e-2), torch.float16: dict(atol=1e-3, rtol=1e-3)}.get(dtype, {})


def compare(q, k, v, grad=True, fused=True, **kw):
    """SDPA on tpu against the CPU, with and without gradients when `grad` (the fused path runs
    other modules for each), and which path it took."""
    before_ops, before_fallbacks = ops_run(), fallbacks()
    tol = tolerances(q.dtype)
    exact = None
    if q.dtype == torch.float32:
        mask = kw.get("attn_mask")
        kw64 = dict(kw, attn_mask=mask.double()) if isinstance(mask, torch.Tensor) and mask.is_floating_point() else kw
        exact = attend("cpu", q.double(), k.double(), v.double(), grad, **kw64)
    for with_grad in ([False, True] if grad else [False]):
        ref, ref_grads = attend("cpu", q, k, v, with_grad, **kw)
        out, grads = attend(DEV, q, k, v, with_grad, **kw)
        for i, (g, r) in enumerate(zip([out] + (grads or []), [ref] + (ref_grads or []))):
            r64 = None if exact is None else ([exact[0]] + (exact[1] or []))[i]
            assert_close_to_cpu(g, r, r64, tol)
    assert fallbacks() == before_fallbacks
    ran = ops_run()
    ran_more = lambda op: ran.get(op, 0) > before_ops.get(op, 0)
    assert ran_more(FUSED_INFERENCE) == fused, f"fused path without gradients taken: {ran_more(FUSED_INFERENCE)}"
    if grad:
        assert ran_more(FUSED) == fused and ran_more(FUSED_BACKWARD) == fused


def qkv(b, hq, hkv, lq, lk, e, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, hq, lq, e, generator=g).to(dtype), torch.randn(b, hkv, lk, e, generator=g).to(dtype),
            torch.randn(b, hkv, lk, e, generator=g).to(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(2, 4, 4, 7, 9, 16), (1, 3, 3, 1, 33, 64), (3, 2, 2, 13, 5, 8)])
def test_matches_cpu_forward_and_backward(dtype, shape):
    compare(*qkv(*shape, dtype=dtype), grad=dtype != torch.float16)


@pytest.mark.parametrize("lq,lk", [(7, 7), (5, 9), (9, 5), (1, 6)])
def test_causal_is_top_left_aligned(lq, lk):
    compare(*qkv(2, 2, 2, lq, lk, 8), is_causal=True)


@pytest.mark.parametrize("hq,hkv", [(8, 2), (6, 3), (4, 1)])
def test_grouped_query_attention(hq, hkv):
    compare(*qkv(2, hq, hkv, 5, 11, 16), enable_gqa=True)


@pytest.mark.parametrize("mask_shape", [(1, 9), (7, 9), (2, 1, 7, 9), (1, 4, 1, 9), (2, 4, 7, 9)])
def test_float_masks_broadcast(mask_shape):
    q, k, v = qkv(2, 4, 4, 7, 9, 16)
    compare(q, k, v, attn_mask=torch.randn(mask_shape))


def test_bool_mask_with_fully_masked_rows_gives_zeros():
    q, k, v = qkv(2, 4, 4, 7, 9, 16)
    mask = torch.rand(2, 1, 7, 9) > 0.4
    mask[0, 0, 3] = False  # row 3 of batch 0 sees nothing: 0 out, 0 gradient (the math path's rule)
    mask[1, 0, :, 2] = False
    compare(q, k, v, attn_mask=mask)
    out, _ = attend(DEV, q, k, v, attn_mask=mask)
    assert torch.equal(out[0, :, 3], torch.zeros_like(out[0, :, 3]))


def test_minus_inf_float_mask_row():
    q, k, v = qkv(1, 2, 2, 4, 6, 8)
    mask = torch.zeros(4, 6)
    mask[1] = float("-inf")
    compare(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("where", ["q", "k", "v"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_inputs_propagate_like_the_cpu(where, value):
    q, k, v = qkv(1, 2, 2, 3, 5, 8)
    {"q": q, "k": k, "v": v}[where][0, 1, 2 if where == "q" else 4, 3] = value
    if where == "q" and value != value:
        # A NaN query row: PyTorch's CPU flash kernel gives 0 (its row max skips NaN, so the row
        # looks fully masked), its math path NaN. Without a mask we keep no guard on the row max
        # (libtpu's flash-attention rewrite refuses one, docs/tpu_aot.md) and give NaN, as the
        # math path does; the CPU disagreeing with itself, the math path is the reference.
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel([SDPBackend.MATH]):
            ref = F.scaled_dot_product_attention(q, k, v)
        assert ref[0, 1, 2].isnan().all()
        out = F.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV))
        torch.testing.assert_close(out.cpu(), ref, equal_nan=True)
        return
    compare(q, k, v, grad=False)


@pytest.mark.skipif(bool(os.environ.get("TORCH_TPU_AOT_CHECK")),
                    reason="with the AOT check on, a boolean mask reaches the fused op as it is (docs/limits.md)")
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_score_under_a_boolean_mask_makes_the_row_nan_like_the_cpu(value):
    # PyTorch adds a boolean mask as 0 / -inf: a NaN or +inf score at a masked position makes its
    # row NaN. Selecting the masked scores away (what the form lowered for libtpu does) would not.
    q, k, v = qkv(1, 2, 2, 4, 5, 8)
    k[0, 0, 1, 3] = value
    mask = torch.ones(4, 5, dtype=torch.bool)
    mask[:, 1] = False
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert ref[0, 0].isnan().any()  # +inf scores a row at +inf, -inf where q is negative there
    out = F.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV), attn_mask=mask.to(DEV))
    torch.testing.assert_close(out.cpu(), ref, equal_nan=True)


def test_unmasked_row_of_minus_inf_scores_is_nan():
    # Documented difference (docs/limits.md): every score of a row -inf (infinite inputs; no
    # mask) gives NaN on tpu, 0 on the CPU (both paths). The guard that would give 0 keeps
    # libtpu from rewriting attention into its flash kernel.
    q, k, v = qkv(1, 1, 1, 3, 4, 8)
    q[0, 0, 1, 0], k[0, 0, :, 0] = -1.0, float("inf")
    out = F.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV)).cpu()
    ref = F.scaled_dot_product_attention(q, k, v)
    assert (ref[0, 0, 1] == 0).all() and out[0, 0, 1].isnan().all()


def test_scale_and_views():
    q, k, v = qkv(2, 3, 3, 5, 6, 8)
    # Transposed views ([B, L, H, E] storage), as attention layers produce them.
    qt, kt, vt = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    compare(qt, kt, vt, scale=0.3)


@pytest.mark.parametrize("scale", [0.3, 3.0, 1e-3, 0.0, -0.5])
@pytest.mark.parametrize("masking", ["none", "causal", "bool", "float"])
def test_every_scale_with_every_kind_of_mask(scale, masking):
    # A positive scale without an additive mask is applied after the row max (exact there);
    # zero, negative scales and float masks scale the scores first.
    q, k, v = qkv(2, 3, 3, 6, 7, 16)
    kw = dict(scale=scale, is_causal=masking == "causal")
    if masking == "bool":
        kw["attn_mask"] = torch.rand(6, 7, generator=torch.Generator().manual_seed(3)) > 0.3
    elif masking == "float":
        kw["attn_mask"] = torch.randn(6, 7)
    if masking == "causal" and scale <= 0:
        # PyTorch's CPU flash kernel scales its causal -inf too (NaN rows at scale 0, +inf for a
        # negative scale); its math path, which masks after scaling as we do, is the reference.
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel([SDPBackend.MATH]):
            ref = F.scaled_dot_product_attention(q, k, v, **kw)
        out = F.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV), **kw)
        assert not ref.isnan().any()
        torch.testing.assert_close(out.cpu(), ref)
        return
    compare(q, k, v, **kw)


def test_gradients_accumulate_over_shared_kv_heads():
    q, k, v = qkv(1, 6, 2, 4, 5, 8)
    compare(q, k, v, enable_gqa=True, is_causal=True)


@pytest.mark.parametrize("case", ["dropout", "mask_grad", "3d", "empty"])
def test_calls_outside_the_fused_path_keep_the_math_path(case):
    q, k, v = qkv(2, 2, 2, 4, 5, 8)
    if case == "dropout":
        # Random values differ from the CPU's by design: check the path and the shape only.
        before = fused_runs()
        out = F.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV), dropout_p=0.5)
        assert out.shape == q.shape and fused_runs() == before
        return
    if case == "mask_grad":
        mask = torch.randn(4, 5)
        m_cpu, m_dev = mask.clone().requires_grad_(), mask.clone().to(DEV).requires_grad_()
        F.scaled_dot_product_attention(q, k, v, attn_mask=m_cpu).sum().backward()
        before = ops_run().get(FUSED, 0)
        F.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV), attn_mask=m_dev).sum().backward()
        torch.testing.assert_close(m_dev.grad.cpu(), m_cpu.grad)
        assert ops_run().get(FUSED, 0) == before
        return
    if case == "3d":
        compare(q[0], k[0], v[0], fused=False)
    else:
        compare(q[:, :, :0], k, v, grad=False, fused=False)


def test_mismatched_heads_raise_pytorch_error():
    q, k, v = qkv(1, 4, 3, 2, 5, 8)
    with pytest.raises(RuntimeError) as cpu_error:
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    with pytest.raises(RuntimeError) as tpu_error:
        F.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV), enable_gqa=True)
    assert str(cpu_error.value).split("\n")[0][:40] == str(tpu_error.value).split("\n")[0][:40]


def test_mask_of_another_float_dtype_raises_like_the_cpu():
    q, k, v = qkv(1, 2, 2, 3, 5, 8)
    mask = torch.randn(3, 5, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="attn_mask dtype"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    with pytest.raises(RuntimeError, match="attn_mask dtype"):
        F.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV), attn_mask=mask.to(DEV))


def test_bad_mask_shape_names_the_shapes():
    q, k, v = qkv(1, 2, 2, 3, 5, 8)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, k, v, attn_mask=torch.randn(4, 5))
    with pytest.raises(RuntimeError, match=r"\[4, 5\]"):
        F.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV), attn_mask=torch.randn(4, 5).to(DEV))


def test_direct_fused_op_matches_the_cpu_kernel():
    q, k, v = qkv(2, 3, 3, 6, 7, 16)
    mask = torch.randn(1, 1, 6, 7)
    ref = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False, attn_mask=mask)
    out = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q.to(DEV), k.to(DEV), v.to(DEV), 0.0, False,
                                                                    attn_mask=mask.to(DEV))
    torch.testing.assert_close(out[0].cpu(), ref[0])
    torch.testing.assert_close(out[1].cpu(), ref[1])
    assert out[1].shape == ref[1].shape and out[1].stride() == ref[1].stride()


@pytest.mark.parametrize("compute_log_sumexp", [False, True])
def test_direct_efficient_attention_op(compute_log_sumexp):
    # PyTorch has no CPU kernel for it: the reference is the CPU's flash kernel, and the shapes
    # and strides are its meta kernel's (logsumexp padded to 32 rows; +inf past the queries).
    q, k, v = qkv(2, 4, 4, 37, 7, 16)
    mask = torch.rand(1, 1, 37, 7) > 0.3
    mask[..., 0] = True  # no row left empty (their logsumexp is the CPU kernel's own business)
    ref, ref_lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, 0.0, True, attn_mask=torch.zeros(37, 7).masked_fill(~mask[0, 0], float("-inf")))
    out, lse, seed, offset = torch.ops.aten._scaled_dot_product_efficient_attention(
        q.to(DEV), k.to(DEV), v.to(DEV), mask.to(DEV), compute_log_sumexp, 0.0, True)
    meta = torch.ops.aten._scaled_dot_product_efficient_attention(
        q.to("meta"), k.to("meta"), v.to("meta"), mask.to("meta"), compute_log_sumexp, 0.0, True)
    assert out.shape == meta[0].shape and out.stride() == meta[0].stride() and lse.shape == meta[1].shape
    torch.testing.assert_close(out.cpu(), ref)
    if compute_log_sumexp:
        torch.testing.assert_close(lse[..., :37].cpu(), ref_lse)
        assert (lse[..., 37:].cpu() == float("inf")).all()
    assert seed.cpu().item() == 0 and offset.cpu().item() == 0


def test_sdpa_kernel_context_is_respected():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = qkv(1, 2, 2, 3, 4, 8)
    before = fused_runs()
    with sdpa_kernel([SDPBackend.MATH]):
        out = F.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV))
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v))
    assert fused_runs() == before


def test_compiled_graph_uses_the_fused_rules():
    def f(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)
    q, k, v = qkv(2, 8, 2, 5, 7, 16)
    m = torch.randn(2, 1, 5, 7)
    compiled = torch.compile(f, backend="tpu", fullgraph=True)
    ref_args = [t.clone().requires_grad_() for t in (q, k, v)]
    dev_args = [t.clone().to(DEV).requires_grad_() for t in (q, k, v)]
    f(*ref_args, m).pow(2).sum().backward()
    out = compiled(*dev_args, m.to(DEV))
    out.pow(2).sum().backward()
    torch.testing.assert_close(out.detach().cpu(), f(q, k, v, m))
    for a, b in zip(dev_args, ref_args):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dynamic", [True, None])
def test_backend_choice_under_symbolic_shapes(dynamic):
    """The backend choice runs on fake tensors with symbolic sizes when Dynamo traces with dynamic
    shapes (Diffusers' compile tests do): it must compare sym sizes, not call numel()."""
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)
    compiled = torch.compile(f, backend="tpu", dynamic=dynamic)
    for length in (5, 9, 13):
        q, k, v = qkv(2, 4, 4, length, length, 8)
        out = compiled(q.to(DEV), k.to(DEV), v.to(DEV))
        torch.testing.assert_close(out.cpu(), f(q, k, v))
