"""Adaptive average pooling 2-D/3-D and their backwards on tpu against PyTorch on the CPU, with
NaN/inf inputs: each output (and each input gradient) reads only its own window, so a NaN must
reach exactly the positions whose window holds it (a dense matrix form spread it everywhere)."""
import pytest
import torch
import torch.nn.functional as F

from helpers import DEV, rand

NAN, INF = float("nan"), float("inf")


def pool(n):
    return F.adaptive_avg_pool2d if n == 2 else F.adaptive_avg_pool3d


def run(n, x, size, device, up=None):
    xs = x.detach().clone().to(device).requires_grad_()
    out = pool(n)(xs, size)
    if up is None:
        up = rand(*out.shape, seed=3).to(out.dtype)
    out.backward(up.to(device))
    return out, xs.grad


def check(n, x, size, up=None, **kw):
    got, want = run(n, x, size, DEV, up), run(n, x, size, "cpu", up)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.detach().cpu(), w.detach(), equal_nan=True, **kw)


CASES_2D = [((2, 3, 7, 5), (3, 4)), ((3, 9, 10), (4, 3)), ((1, 2, 5, 5), (7, 8)), ((2, 1, 6, 6), (3, 2)),
            ((1, 1, 13, 1), (5, 1)), ((0, 2, 4, 4), (2, 3))]
CASES_3D = [((2, 3, 7, 5, 6), (3, 4, 4)), ((2, 5, 4, 9), (3, 2, 4)), ((1, 1, 3, 4, 5), (5, 5, 6)),
            ((0, 2, 3, 3, 3), (2, 2, 2))]


@pytest.mark.parametrize("shape,size", CASES_2D)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_adaptive_avg_pool2d(shape, size, dtype, no_fallbacks):
    check(2, rand(*shape, dtype=dtype), size)


@pytest.mark.parametrize("shape,size", CASES_3D)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_adaptive_avg_pool3d(shape, size, dtype, no_fallbacks):
    check(3, rand(*shape, dtype=dtype), size)


@pytest.mark.parametrize("n", [2, 3])
def test_adaptive_avg_pool_bfloat16(n, no_fallbacks):
    shape, size = ((2, 3, 7, 5), (3, 4)) if n == 2 else ((2, 3, 7, 5, 6), (3, 2, 4))
    x = rand(*shape, dtype=torch.bfloat16)
    up = rand(*(shape[:-n] + size), seed=3, dtype=torch.bfloat16)
    got = run(n, x, size, DEV, up)
    # The CPU divides and accumulates the gradient in bfloat16 step by step; we work in float32
    # and round once, so compare with the float32 computation rounded to bfloat16.
    want = run(n, x.float(), size, "cpu", up.float())
    for g, w in zip(got, want):
        torch.testing.assert_close(g.detach().cpu(), w.detach().bfloat16())


@pytest.mark.parametrize("n", [2, 3])
def test_nan_and_inf_stay_in_their_windows(n, no_fallbacks):
    shape, size = ((2, 3, 7, 5), (3, 4)) if n == 2 else ((2, 3, 7, 5, 6), (3, 2, 4))
    x = rand(*shape)
    x[(0, 0) + (1,) * n] = NAN
    x[(1, 2) + (-1,) * n] = INF
    x[(1, 1) + (2,) * n] = -INF
    check(n, x, size)
    out = pool(n)(x.to(DEV), size).cpu()
    assert 0 < torch.isnan(out).sum() < out.numel() // 4


@pytest.mark.parametrize("n", [2, 3])
def test_nan_gradient_stays_in_its_window(n, no_fallbacks):
    shape, size = ((1, 2, 7, 5), (3, 4)) if n == 2 else ((1, 2, 7, 5, 6), (3, 2, 4))
    x = rand(*shape)
    up = rand(*((1, 2) + size), seed=9)
    up[(0, 0) + (0,) * n] = NAN
    up[(0, 1) + (-1,) * n] = INF
    check(n, x, size, up)
    _, grad = run(n, x, size, DEV, up)
    assert 0 < torch.isnan(grad.cpu()).sum() < grad.numel() // 4


def test_non_contiguous_input(no_fallbacks):
    check(2, rand(2, 3, 8, 9)[:, :, ::2].transpose(2, 3), (2, 3))
    check(3, rand(2, 3, 6, 8, 5).permute(0, 1, 4, 2, 3), (2, 3, 3))


@pytest.mark.parametrize("call", [
    lambda d: F.adaptive_avg_pool2d(torch.ones(1, 2, 4, 4, dtype=torch.long, device=d), 3),
    lambda d: F.adaptive_avg_pool2d(torch.ones(2, 4, 4, dtype=torch.bool, device=d), 2),
    lambda d: F.adaptive_avg_pool2d(torch.ones(2, 4, 4, dtype=torch.complex64, device=d), 3),
    lambda d: F.adaptive_avg_pool3d(torch.ones(1, 2, 4, 4, 4, dtype=torch.long, device=d), 3),
    lambda d: F.adaptive_max_pool2d(torch.ones(1, 2, 4, 4, dtype=torch.int32, device=d), 3),
    lambda d: F.adaptive_max_pool3d(torch.ones(1, 2, 4, 4, 4, dtype=torch.long, device=d), 3),
])
def test_non_float_inputs_raise_like_cpu(call, no_fallbacks):
    with pytest.raises(NotImplementedError) as cpu_err:
        call("cpu")
    with pytest.raises(NotImplementedError, match=str(cpu_err.value).split(" not")[0]):
        call(DEV)
