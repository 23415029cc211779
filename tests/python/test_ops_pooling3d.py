"""avg_pool3d, max_pool3d (with indices), adaptive avg pool 3d and adaptive max pool 2d/3d, with
their backwards, on tpu against PyTorch on the CPU."""
import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

from helpers import DEV, fallbacks, rand

NAN, INF = float("nan"), float("inf")


def fwd_bwd(f, x, device, grad=True):
    """f(x) on device, and x's gradient for a fixed upstream gradient."""
    xs = x.detach().clone().to(device)
    if grad:
        xs.requires_grad_()
    out = f(xs)
    outs = out if isinstance(out, tuple) else (out,)
    if not grad:
        return list(outs)
    g = torch.Generator().manual_seed(1)
    up = torch.randn(outs[0].shape, generator=g).to(outs[0].dtype).to(device)
    (outs[0] * up).sum().backward()
    return list(outs) + [xs.grad]


def check_grad(f, x, grad=True, **kw):
    before = fallbacks()
    got = fwd_bwd(f, x, DEV, grad)
    assert fallbacks() == before, fallbacks()
    want = fwd_bwd(f, x, "cpu", grad)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.detach().cpu(), w.detach(), equal_nan=True, **kw)


AVG3D = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
         dict(kernel_size=(1, 3, 2), stride=(1, 2, 1), padding=(0, 1, 1), ceil_mode=True),
         dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
         dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
         dict(kernel_size=2, divisor_override=3)]


@pytest.mark.parametrize("kw", AVG3D)
@pytest.mark.parametrize("shape", [(2, 3, 5, 6, 7), (3, 4, 5, 5)])
def test_avg_pool3d(kw, shape):
    check_grad(lambda t: F.avg_pool3d(t, **kw), rand(*shape))


MAX3D = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
         dict(kernel_size=(2, 3, 2), stride=(1, 2, 2), dilation=(1, 2, 1)),
         dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)]


@pytest.mark.parametrize("kw", MAX3D)
@pytest.mark.parametrize("shape", [(2, 3, 5, 6, 7), (2, 5, 5, 5)])
def test_max_pool3d(kw, shape):
    check_grad(lambda t: F.max_pool3d(t, return_indices=True, **kw), rand(*shape))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
def test_pool3d_dtypes_and_noncontiguous(dtype):
    x = rand(2, 3, 4, 6, 5, dtype=dtype)
    check_grad(lambda t: F.max_pool3d(t, 2, return_indices=True), x)
    if dtype == torch.float64:
        check_grad(lambda t: F.avg_pool3d(t, 3, 1, 1), x)
        check_grad(lambda t: F.adaptive_avg_pool3d(t, (2, 3, 4)), x)
    else:  # the CPU's bf16 kernel rounds partial sums; we sum in f32 and round once
        torch.testing.assert_close(F.adaptive_avg_pool3d(x.to(DEV), (2, 3, 4)).cpu(),
                                   F.adaptive_avg_pool3d(x.float(), (2, 3, 4)).bfloat16())
    xt = rand(2, 6, 5, 4, 3).transpose(1, 4)  # non-contiguous
    check_grad(lambda t: F.max_pool3d(t, 2, return_indices=True), xt)
    check_grad(lambda t: F.avg_pool3d(t, 2), xt)
    check_grad(lambda t: F.adaptive_max_pool3d(t, (2, 2, 3), return_indices=True), xt)
    cl = rand(2, 3, 4, 4, 4).to(memory_format=torch.channels_last_3d)
    check_grad(lambda t: F.max_pool3d(t, 2, return_indices=True), cl)


def test_avg_pool3d_bfloat16_against_float32():
    # PyTorch's CPU has no bf16 avg_pool3d (CUDA does): compare with the f32 result rounded once.
    x = rand(2, 3, 4, 6, 5, dtype=torch.bfloat16)
    for kw in AVG3D:
        before = fallbacks()
        got = F.avg_pool3d(x.to(DEV), **kw).cpu()
        assert fallbacks() == before, fallbacks()
        torch.testing.assert_close(got, F.avg_pool3d(x.float(), **kw).bfloat16())


def test_integer_pools():
    x = torch.randint(-50, 50, (2, 3, 5, 4, 6))
    check_grad(lambda t: F.max_pool3d(t, 2, return_indices=True), x, grad=False)
    for kw in AVG3D:  # integer division truncates, as on the CPU
        check_grad(lambda t: F.avg_pool3d(t, **kw), x, grad=False)
    for f in (lambda t: F.adaptive_max_pool2d(t[0], 2), lambda t: F.adaptive_avg_pool3d(t, 2)):
        with pytest.raises(NotImplementedError):  # as on the CPU
            f(x.to(DEV))


def test_max_pools_nan_inf_ties():
    x = torch.tensor([[1.0, NAN, 3.0, 3.0], [NAN, 2.0, 2.0, -INF], [5.0, 5.0, 0.0, INF], [-INF, -INF, -INF, -INF]])
    x3 = torch.stack([x, x.flip(0), torch.full((4, 4), 3.0)]).reshape(1, 1, 3, 4, 4)
    check_grad(lambda t: F.max_pool3d(t, 2, return_indices=True), x3)
    check_grad(lambda t: F.max_pool3d(t, (3, 4, 4), return_indices=True), x3)
    check_grad(lambda t: F.max_pool3d(t, 2, 1, 1, return_indices=True), x3)
    x2 = x.reshape(1, 4, 4)
    for os in [(1, 1), (2, 2), (3, 3), (4, 1), (1, 3)]:
        check_grad(lambda t: F.adaptive_max_pool2d(t, os, return_indices=True), x2)
    check_grad(lambda t: F.adaptive_max_pool3d(t, (2, 3, 2), return_indices=True), x3)
    ties = torch.tensor([[[3.0, 3.0, 1.0], [3.0, 0.0, 3.0], [1.0, 1.0, 7.0]]])
    for os in [(1, 1), (2, 2)]:
        check_grad(lambda t: F.adaptive_max_pool2d(t, os, return_indices=True), ties)


@pytest.mark.parametrize("os", [(2, 3), (3, 3), (1, 5), (4, 2), (7, 7)])
@pytest.mark.parametrize("shape", [(2, 3, 7, 5), (3, 8, 6)])
def test_adaptive_max_pool2d(os, shape):
    check_grad(lambda t: F.adaptive_max_pool2d(t, os, return_indices=True), rand(*shape))


@pytest.mark.parametrize("os", [(1, 1, 1), (2, 3, 4), (3, 2, 5), (5, 6, 7)])
def test_adaptive_pool3d(os):
    x = rand(2, 3, 5, 6, 7)
    check_grad(lambda t: F.adaptive_avg_pool3d(t, os), x)
    check_grad(lambda t: F.adaptive_max_pool3d(t, os, return_indices=True), x)
    check_grad(lambda t: F.adaptive_avg_pool3d(t, os), x[0])  # no batch dim


def test_adaptive_max_pool2d_dtypes():
    for dtype in (torch.bfloat16, torch.float64):
        check_grad(lambda t: F.adaptive_max_pool2d(t, (3, 2), return_indices=True), rand(2, 3, 7, 5, dtype=dtype))


def test_empty_batches():
    check_grad(lambda t: F.avg_pool3d(t, 2), torch.zeros(0, 2, 4, 4, 4), grad=False)
    check_grad(lambda t: F.max_pool3d(t, 2, return_indices=True), torch.zeros(0, 2, 4, 4, 4), grad=False)
    check_grad(lambda t: F.adaptive_avg_pool3d(t, 2), torch.zeros(0, 2, 4, 4, 4), grad=False)
    check_grad(lambda t: F.adaptive_max_pool2d(t, 2, return_indices=True), torch.zeros(0, 2, 4, 4), grad=False)


def test_errors_match_cpu():
    cases = [(lambda t: F.avg_pool3d(t, 2), rand(2, 3)),
             (lambda t: F.avg_pool3d(t, 2, padding=2), rand(1, 4, 4, 4)),  # padding > kernel/2
             (lambda t: F.max_pool3d(t, 5), rand(1, 4, 4, 4)),  # output size 0
             (lambda t: F.max_pool3d(t, 2, stride=0), rand(1, 4, 4, 4)),
             (lambda t: F.adaptive_max_pool2d(t, (2, 2)), rand(4)),
             (lambda t: F.adaptive_avg_pool3d(t, (2, -1, 2)), rand(1, 4, 4, 4)),
             (lambda t: F.avg_pool3d(t, 2, divisor_override=0), rand(1, 4, 4, 4))]
    for f, x in cases:
        with pytest.raises(Exception) as cpu:
            f(x)
        with pytest.raises(type(cpu.value)):
            f(x.to(DEV)).cpu()


def test_pool3d_in_compiled_graph():
    torch._dynamo.reset()

    def f(x):
        y, i = F.max_pool3d(x, 2, return_indices=True)
        return F.avg_pool3d(x, 3, 1, 1) + 1, y, i, F.adaptive_max_pool2d(x[:, 0], (2, 3))

    x = rand(2, 3, 4, 6, 6)
    before = fallbacks()
    got = torch.compile(f, backend="tpu", fullgraph=True)(x.to(DEV))
    assert fallbacks() == before, fallbacks()
    torch.testing.assert_close(torch.utils._pytree.tree_map(lambda t: t.cpu(), got), f(x))
