"""torch.cdist / torch.pdist and their backward (_cdist_forward/_backward, _pdist_forward/
_backward) against the CPU: every p family, compute modes, the matrix-product path."""
import pytest
import torch

from helpers import DEV, fallbacks

inf, nan = float("inf"), float("nan")
PS = [0.0, 1.0, 2.0, inf, 0.5, 1.5, 3.0]


def no_fallback(f):
    before = fallbacks()
    out = f()
    assert fallbacks() == before, fallbacks()
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("p", PS)
def test_cdist_forward_backward(dtype, p):
    torch.manual_seed(0)
    x1 = torch.randn(2, 5, 3, dtype=dtype)
    x2 = torch.randn(1, 4, 3, dtype=dtype)  # broadcast batch
    x2[0, 1] = x1[0, 2]  # a zero distance: the gradient's special case
    x2[0, 2, 0] = x1[1, 0, 0]  # equal components
    c1, c2 = x1.clone().requires_grad_(), x2.clone().requires_grad_()
    d1, d2 = x1.to(DEV).requires_grad_(), x2.to(DEV).requires_grad_()
    g = torch.randn(2, 5, 4, dtype=dtype)
    yd = no_fallback(lambda: torch.cdist(d1, d2, p=p, compute_mode="donot_use_mm_for_euclid_dist"))
    no_fallback(lambda: yd.backward(g.to(DEV)))
    yc = torch.cdist(c1, c2, p=p, compute_mode="donot_use_mm_for_euclid_dist")
    yc.backward(g)
    torch.testing.assert_close(yd.detach().cpu(), yc.detach())
    torch.testing.assert_close(d1.grad.cpu(), c1.grad)
    torch.testing.assert_close(d2.grad.cpu(), c2.grad)


@pytest.mark.parametrize("mode", [None, "use_mm_for_euclid_dist", "use_mm_for_euclid_dist_if_necessary"])
@pytest.mark.parametrize("rows", [7, 40])
def test_cdist_euclidean_compute_modes(mode, rows):
    torch.manual_seed(1)
    x1, x2 = torch.randn(rows, 6), torch.randn(30, 6)
    kw = {} if mode is None else {"compute_mode": mode}
    yd = no_fallback(lambda: torch.cdist(x1.to(DEV), x2.to(DEV), **kw))
    torch.testing.assert_close(yd.cpu(), torch.cdist(x1, x2, **kw))
    # The low-level op with each mode, as the CPU computes it (mm path when r > 25 or mode 1).
    for m in (0, 1, 2):
        yd = no_fallback(lambda: torch.ops.aten._cdist_forward(x1.to(DEV), x2.to(DEV), 2.0, m))
        torch.testing.assert_close(yd.cpu(), torch.ops.aten._cdist_forward(x1, x2, 2.0, m))


def test_cdist_mm_path_gradient():
    torch.manual_seed(2)
    x1, x2 = torch.randn(30, 4), torch.randn(28, 4)
    c1, d1 = x1.clone().requires_grad_(), x1.to(DEV).requires_grad_()
    yd = no_fallback(lambda: torch.cdist(d1, x2.to(DEV)))
    no_fallback(lambda: yd.sum().backward())
    torch.cdist(c1, x2).sum().backward()
    torch.testing.assert_close(d1.grad.cpu(), c1.grad)


def test_cdist_bfloat16_mm_path():
    torch.manual_seed(3)
    x1, x2 = torch.randn(30, 8).bfloat16(), torch.randn(26, 8).bfloat16()
    yd = no_fallback(lambda: torch.cdist(x1.to(DEV), x2.to(DEV)))
    # The CPU computes the product form in bf16 (rounded |a|^2 and 2ab terms); we round once.
    torch.testing.assert_close(yd.cpu(), torch.cdist(x1, x2), atol=0.1, rtol=2e-2)


@pytest.mark.parametrize("p", PS)
def test_cdist_nan_inf_and_noncontiguous(p):
    torch.manual_seed(4)
    x1 = torch.randn(6, 5).t()  # (5, 6) transposed
    x2 = torch.randn(3, 6)
    x1[1, 2] = nan
    x1[3, 0] = inf
    yd = no_fallback(lambda: torch.ops.aten._cdist_forward(x1.to(DEV), x2.to(DEV), p, 2))
    torch.testing.assert_close(yd.cpu(), torch.ops.aten._cdist_forward(x1, x2, p, 2), equal_nan=True)


@pytest.mark.parametrize("shapes", [((0, 3), (4, 3)), ((2, 3), (0, 3)), ((2, 0), (3, 0)), ((0, 2, 3), (1, 4, 3))])
def test_cdist_empty(shapes):
    a, b = torch.randn(shapes[0]), torch.randn(shapes[1])
    da, db = a.to(DEV).requires_grad_(), b.to(DEV).requires_grad_()
    yd = no_fallback(lambda: torch.cdist(da, db, p=1.0))
    torch.testing.assert_close(yd.detach().cpu(), torch.cdist(a, b, p=1.0))
    no_fallback(lambda: yd.sum().backward())
    assert da.grad.shape == a.shape


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("p", PS)
def test_pdist_forward_backward(dtype, p):
    torch.manual_seed(5)
    x = torch.randn(6, 4, dtype=dtype)
    x[4] = x[1]  # a zero distance
    c, d = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    yd = no_fallback(lambda: torch.pdist(d, p=p))
    g = torch.randn(yd.shape, dtype=dtype)
    no_fallback(lambda: yd.backward(g.to(DEV)))
    yc = torch.pdist(c, p=p)
    yc.backward(g)
    torch.testing.assert_close(yd.detach().cpu(), yc.detach())
    torch.testing.assert_close(d.grad.cpu(), c.grad)


@pytest.mark.parametrize("n", [0, 1, 2, 9])
def test_pdist_sizes_and_nan(n):
    torch.manual_seed(6)
    x = torch.randn(n, 3)
    if n > 2:
        x[2, 1] = nan
    for p in (2.0, inf, 0.0):
        yd = no_fallback(lambda: torch.pdist(x.to(DEV), p=p))
        torch.testing.assert_close(yd.cpu(), torch.pdist(x, p=p), equal_nan=True)


@pytest.mark.parametrize("case", ["cdist_1d", "cdist_cols", "cdist_int", "cdist_neg_p", "cdist_bf16", "cdist_mode",
                                  "pdist_3d", "pdist_neg_p", "pdist_bf16", "pdist_int",
                                  "pdist_api_int", "cdist_backward_bf16"])
def test_bad_arguments_raise_like_cpu(case):
    a, b = torch.randn(3, 4), torch.randn(5, 4)
    calls = {
        "cdist_1d": lambda d: torch.ops.aten._cdist_forward(torch.randn(4).to(d), b.to(d), 2.0, None),
        "cdist_cols": lambda d: torch.ops.aten._cdist_forward(a.to(d), torch.randn(5, 3).to(d), 2.0, None),
        "cdist_int": lambda d: torch.ops.aten._cdist_forward(a.long().to(d), b.long().to(d), 2.0, None),
        "cdist_neg_p": lambda d: torch.ops.aten._cdist_forward(a.to(d), b.to(d), -1.0, None),
        "cdist_bf16": lambda d: torch.ops.aten._cdist_forward(a.bfloat16().to(d), b.bfloat16().to(d), 1.0, None),
        "cdist_mode": lambda d: torch.ops.aten._cdist_forward(a.to(d), b.to(d), 2.0, 3),
        "pdist_3d": lambda d: torch.pdist(torch.randn(2, 3, 4).to(d), 2.0),
        "pdist_neg_p": lambda d: torch.pdist(a.to(d), -2.0),
        "pdist_bf16": lambda d: torch.ops.aten._pdist_forward(a.bfloat16().to(d), 2.0),
        "pdist_int": lambda d: torch.ops.aten._pdist_forward(a.long().to(d), 2.0),
        "pdist_api_int": lambda d: torch.pdist(a.long().to(d), 2.0),
        "cdist_backward_bf16": lambda d: torch.ops.aten._cdist_backward(
            torch.randn(3, 5).bfloat16().to(d), a.bfloat16().to(d), b.bfloat16().to(d), 1.0,
            torch.randn(3, 5).bfloat16().to(d)),
    }
    with pytest.raises(Exception) as cpu:
        calls[case]("cpu")
    with pytest.raises(type(cpu.value)) as dev:
        calls[case](DEV)
    assert str(cpu.value).split("\n")[0] in str(dev.value)


def test_cdist_mm_path_batched_broadcast():
    torch.manual_seed(7)
    x1, x2 = torch.randn(2, 1, 27, 5), torch.randn(3, 9, 5)  # batch (2, 3) broadcast, rows > 25
    c1, d1 = x1.clone().requires_grad_(), x1.to(DEV).requires_grad_()
    yd = no_fallback(lambda: torch.cdist(d1, x2.to(DEV)))
    no_fallback(lambda: yd.sum().backward())
    yc = torch.cdist(c1, x2)
    yc.sum().backward()
    torch.testing.assert_close(yd.detach().cpu(), yc.detach())
    torch.testing.assert_close(d1.grad.cpu(), c1.grad)
