import pytest
import torch
import torch_tpu
import torch.nn.functional as F
import helpers
from helpers import DEV, executables_built


def tol(dtype):
    return dict(atol=2e-2, rtol=2e-2) if dtype in (torch.bfloat16, torch.float16) else {}


def rand(*shape, dtype=torch.float32):
    return helpers.rand(*shape, dtype=dtype, low=-5, high=5)


# Every test here must run without a CPU fallback (fixture in conftest.py).
pytestmark = pytest.mark.usefixtures("no_fallbacks")


def cmp(out, ref, dtype=torch.float32):
    assert out.device.type == DEV
    torch.testing.assert_close(out.cpu(), ref, **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32])
def test_mm_bmm(dtype):
    a, b = rand(3, 4, dtype=dtype), rand(4, 5, dtype=dtype)
    cmp(torch.mm(a.to(DEV), b.to(DEV)), torch.mm(a, b), dtype)
    a, b = rand(2, 3, 4, dtype=dtype), rand(2, 4, 5, dtype=dtype)
    cmp(torch.bmm(a.to(DEV), b.to(DEV)), torch.bmm(a, b), dtype)


def test_mm_noncontiguous_and_out():
    a, b = torch.randn(4, 3), torch.randn(5, 4)
    cmp(torch.mm(a.to(DEV).t(), b.to(DEV).t()), a.t() @ b.t())
    s = torch.randn(6, 8)
    cmp(torch.mm(s.to(DEV)[::2, 1:5], b.to(DEV).t()), s[::2, 1:5] @ b.t())
    out = torch.empty(3, 5, device=DEV)
    torch.mm(a.to(DEV).t(), b.to(DEV).t(), out=out)
    cmp(out, a.t() @ b.t())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1.5)])
def test_addmm_baddbmm(dtype, beta, alpha):
    s, a, b = rand(3, 5, dtype=dtype), rand(3, 4, dtype=dtype), rand(4, 5, dtype=dtype)
    cmp(torch.addmm(s.to(DEV), a.to(DEV), b.to(DEV), beta=beta, alpha=alpha),
        torch.addmm(s, a, b, beta=beta, alpha=alpha), dtype)
    bias = rand(5, dtype=dtype)  # broadcast self
    cmp(torch.addmm(bias.to(DEV), a.to(DEV), b.to(DEV), beta=beta, alpha=alpha),
        torch.addmm(bias, a, b, beta=beta, alpha=alpha), dtype)
    s, a, b = rand(2, 3, 5, dtype=dtype), rand(2, 3, 4, dtype=dtype), rand(2, 4, 5, dtype=dtype)
    cmp(torch.baddbmm(s.to(DEV), a.to(DEV), b.to(DEV), beta=beta, alpha=alpha),
        torch.baddbmm(s, a, b, beta=beta, alpha=alpha), dtype)


def test_addmm_beta_zero_ignores_nan():
    s = torch.full((3, 5), float("nan"))
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    out = torch.addmm(s.to(DEV), a.to(DEV), b.to(DEV), beta=0)
    assert not torch.isnan(out.cpu()).any()
    cmp(out, torch.addmm(s, a, b, beta=0))
    v = torch.randn(4)
    cmp(torch.addmv(torch.full((3,), float("nan")).to(DEV), a.to(DEV), v.to(DEV), beta=0), a @ v)


def test_addmm_int_and_inplace():
    s, a, b = rand(3, 5, dtype=torch.int64), rand(3, 4, dtype=torch.int64), rand(4, 5, dtype=torch.int64)
    cmp(torch.addmm(s.to(DEV), a.to(DEV), b.to(DEV), beta=2, alpha=3), torch.addmm(s, a, b, beta=2, alpha=3))
    t = s.float().to(DEV)
    t.addmm_(a.float().to(DEV), b.float().to(DEV), alpha=0.5)
    cmp(t, s.float().addmm(a.float(), b.float(), alpha=0.5))


@pytest.mark.strict_eager
def test_lr_changes_do_not_recompile():
    s, a, b = torch.randn(3, 5), torch.randn(3, 4), torch.randn(4, 5)
    st, at, bt = s.to(DEV), a.to(DEV), b.to(DEV)
    torch.addmm(st, at, bt, beta=0.3, alpha=0.7)
    c0 = executables_built()
    for k in range(3):
        cmp(torch.addmm(st, at, bt, beta=0.1 * k + 0.2, alpha=1.1 + k), torch.addmm(s, a, b, beta=0.1 * k + 0.2, alpha=1.1 + k))
    assert executables_built() == c0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_mv_addmv_dot_vdot_addr(dtype):
    m, v, w = rand(3, 4, dtype=dtype), rand(4, dtype=dtype), rand(4, dtype=dtype)
    cmp(torch.mv(m.to(DEV), v.to(DEV)), torch.mv(m, v), dtype)
    s = rand(3, dtype=dtype)
    cmp(torch.addmv(s.to(DEV), m.to(DEV), v.to(DEV), beta=2, alpha=3), torch.addmv(s, m, v, beta=2, alpha=3), dtype)
    cmp(torch.dot(v.to(DEV), w.to(DEV)), torch.dot(v, w), dtype)
    cmp(torch.vdot(v.to(DEV), w.to(DEV)), torch.vdot(v, w), dtype)
    s2 = rand(3, 4, dtype=dtype)
    u = rand(3, dtype=dtype)
    cmp(torch.addr(s2.to(DEV), u.to(DEV), v.to(DEV), beta=2, alpha=3), torch.addr(s2, u, v, beta=2, alpha=3), dtype)
    cmp(torch.outer(u.to(DEV), v.to(DEV)), torch.outer(u, v), dtype)


@pytest.mark.parametrize("sa,sb", [((3, 4), (4,)), ((4,), (4, 5)), ((2, 3, 4), (4, 5)),
                                   ((2, 1, 3, 4), (5, 4, 2)), ((4,), (4,)), ((3, 4), (2, 4, 5))])
def test_matmul_composite(sa, sb):
    a, b = torch.randn(*sa), torch.randn(*sb)
    cmp(torch.matmul(a.to(DEV), b.to(DEV)), torch.matmul(a, b))


def test_matmul_backward():
    a, b = torch.randn(2, 1, 3, 4), torch.randn(5, 4, 2)
    at, bt = a.to(DEV).requires_grad_(), b.to(DEV).requires_grad_()
    ac, bc = a.clone().requires_grad_(), b.clone().requires_grad_()
    (at @ bt).square().sum().backward()
    (ac @ bc).square().sum().backward()
    cmp(at.grad, ac.grad)
    cmp(bt.grad, bc.grad)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 6)])
def test_linear_forward_backward(bias, shape):
    x, w = torch.randn(*shape), torch.randn(5, 6)
    b = torch.randn(5) if bias else None
    xt, wt = x.to(DEV).requires_grad_(), w.to(DEV).requires_grad_()
    bt = b.to(DEV).requires_grad_() if bias else None
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    bc = b.clone().requires_grad_() if bias else None
    yt, yc = F.linear(xt, wt, bt), F.linear(xc, wc, bc)
    cmp(yt, yc.detach())
    g = torch.randn(*yc.shape)
    yt.backward(g.to(DEV))
    yc.backward(g)
    cmp(xt.grad, xc.grad)
    cmp(wt.grad, wc.grad)
    if bias:
        cmp(bt.grad, bc.grad)


def test_bad_shapes_raise():
    with pytest.raises(RuntimeError):
        torch.mm(torch.randn(3, 4, device=DEV), torch.randn(5, 6, device=DEV))
    with pytest.raises((RuntimeError, ValueError)):
        torch.dot(torch.randn(3, device=DEV), torch.randn(4, device=DEV))
    # Shape errors found by Python meta kernels are re-raised by the CPU kernel (fallback path).
    torch_tpu.metrics.reset()


def _k_major(t):
    """The layout PyTorch's CPU _grouped_mm requires of mat2 (contraction dim contiguous)."""
    return t.transpose(-2, -1).contiguous().transpose(-2, -1)


# bfloat16: PyTorch's meta kernel for _grouped_mm accepts only bf16 (float32 runs on the CPU
# fallback because its output shape cannot be inferred; docs/limits.md).
@pytest.mark.parametrize("offsets", [[2, 2, 7], [0, 3, 7], [7, 7, 7]])
def test_grouped_mm_2d_3d_matches_cpu(offsets, no_fallbacks):
    torch.manual_seed(0)
    a, b = torch.randn(7, 8).bfloat16(), _k_major(torch.randn(3, 8, 8)).bfloat16()
    offs = torch.tensor(offsets, dtype=torch.int32)
    ref = torch._grouped_mm(a, b, offs=offs)
    got = torch._grouped_mm(a.to("tpu"), b.to("tpu"), offs=offs.to("tpu"))
    torch.testing.assert_close(got.cpu(), ref)


def test_grouped_mm_2d_2d_and_3d_3d_match_cpu(no_fallbacks):
    torch.manual_seed(0)
    a, b = torch.randn(8, 16).bfloat16(), _k_major(torch.randn(16, 8)).bfloat16()
    offs = torch.tensor([8, 16], dtype=torch.int32)
    torch.testing.assert_close(torch._grouped_mm(a.to("tpu"), b.to("tpu"), offs=offs.to("tpu")).cpu(),
                               torch._grouped_mm(a, b, offs=offs))
    a3, b3 = torch.randn(3, 8, 8).bfloat16(), _k_major(torch.randn(3, 8, 8)).bfloat16()
    torch.testing.assert_close(torch._grouped_mm(a3.to("tpu"), b3.to("tpu")).cpu(), torch._grouped_mm(a3, b3))


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular_matches_cpu(upper, left, unit):
    """Gated DeltaNet (Qwen3.5) solves a unit lower-triangular system per chunk."""
    torch.manual_seed(0)
    a = torch.randn(2, 1, 5, 5) + 4 * torch.eye(5)   # batch broadcast against b's [3]
    b = torch.randn(3, 5, 7) if left else torch.randn(3, 7, 5)
    got = torch.linalg.solve_triangular(a.to(DEV), b.to(DEV), upper=upper, left=left, unitriangular=unit)
    ref = torch.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit)
    assert got.shape == ref.shape == (2, 3, 5, 7) if left else (2, 3, 7, 5)
    torch.testing.assert_close(got.cpu(), ref, rtol=1e-4, atol=1e-4)  # f32 solve: error grows with n


def test_solve_triangular_nan_and_backward():
    # NaN spreads down its column as on the CPU, rows above it stay exact (XLA's blocked solve
    # alone would spread it up the column too; ±inf arithmetic below: docs/limits.md).
    a = torch.tril(torch.randn(4, 4)) + 3 * torch.eye(4)
    b = torch.randn(4, 3)
    b[0, 0], b[2, 1] = float("nan"), float("nan")
    got = torch.linalg.solve_triangular(a.t().to(DEV), b.to(DEV), upper=True)  # back substitution
    torch.testing.assert_close(got.cpu(), torch.linalg.solve_triangular(a.t(), b, upper=True), equal_nan=True)
    got = torch.linalg.solve_triangular(a.to(DEV), b.to(DEV), upper=False)
    torch.testing.assert_close(got.cpu(), torch.linalg.solve_triangular(a, b, upper=False), equal_nan=True)
    a.requires_grad_(), (bb := torch.randn(4, 3)).requires_grad_()
    ta, tb = a.detach().to(DEV).requires_grad_(), bb.detach().to(DEV).requires_grad_()
    torch.linalg.solve_triangular(a, bb, upper=False).square().sum().backward()
    torch.linalg.solve_triangular(ta, tb, upper=False).square().sum().backward()
    torch.testing.assert_close(ta.grad.cpu(), a.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(tb.grad.cpu(), bb.grad, rtol=1e-4, atol=1e-4)


def test_solve_triangular_bad_shapes_raise():
    with pytest.raises(RuntimeError, match="solve_triangular"):
        torch.linalg.solve_triangular(torch.eye(3, device=DEV), torch.ones(4, 2, device=DEV), upper=False)
