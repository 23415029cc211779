"""polygamma, histc, bincount, equal, the legacy torch.norm overloads, tril/triu_indices,
_assert_async and _efficientzerotensor on tpu against PyTorch on the CPU."""
import pytest
import torch

from helpers import DEV, rand

NAN, INF = float("nan"), float("inf")
SPECIAL = [0.5, 1.0, 0.0, -0.0, INF, -INF, NAN, 3.7, -2.0, 25.0, 1e-3, 1e4, 2.5e-7, 7.0, 0.25]


def close(got, want, **kw):
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **kw)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 6])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_polygamma(n, dtype, no_fallbacks):
    x = torch.cat([torch.tensor(SPECIAL, dtype=dtype), rand(40, dtype=dtype).abs() * 6])
    close(torch.polygamma(n, x.to(DEV)), torch.polygamma(n, x))
    # Non-contiguous input.
    close(torch.polygamma(n, x.to(DEV).reshape(5, -1).t()), torch.polygamma(n, x.reshape(5, -1).t()))


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_polygamma_negative_arguments_float64(n, no_fallbacks):
    # Negative non-integers: the series cancels (terms of both signs); float64 holds enough digits.
    x = torch.tensor([-0.5, -1.5, -2.3, -0.3, -7.75, -1.0, -3.0], dtype=torch.float64)
    close(torch.polygamma(n, x.to(DEV)), torch.polygamma(n, x))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_polygamma_negative_arguments_float32(n, no_fallbacks):
    # Negative arguments down to -100 (the paired series), away from the half-integers where
    # the result itself is a cancellation (docs/limits.md).
    x = torch.tensor([-0.5, -1.5, -2.3, -0.3, -7.75, -1.0, -3.0, -0.01, -0.99, -19.2, -20.7, -64.7, -99.3])
    if n % 2 == 0:
        x = x[(x - x.floor() - 0.5).abs() > 0.1]
    close(torch.polygamma(n, x.to(DEV)), torch.polygamma(n, x))


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.bfloat16])
def test_polygamma_other_dtypes(dtype, no_fallbacks):
    x = torch.tensor([1, 2, 3, 5, 0], dtype=torch.int64).to(dtype)
    for n in (0, 1, 3):
        close(torch.polygamma(n, x.to(DEV)), torch.polygamma(n, x))
    close(torch.special.polygamma(2, x.to(DEV)), torch.special.polygamma(2, x))


def test_polygamma_backward_and_out(no_fallbacks):
    x = torch.tensor([0.5, 2.0, 4.5], requires_grad=True)
    xt = x.detach().to(DEV).requires_grad_()
    torch.polygamma(2, xt).sum().backward()
    torch.polygamma(2, x).sum().backward()
    close(xt.grad, x.grad)
    out = torch.empty(3, device=DEV)
    torch.polygamma(3, x.detach().to(DEV), out=out)
    close(out, torch.polygamma(3, x.detach()))


def test_polygamma_negative_n():
    with pytest.raises(RuntimeError, match="does not support negative n"):
        torch.polygamma(-1, torch.ones(2, device=DEV))


@pytest.mark.parametrize("kw", [dict(bins=7), dict(bins=5, min=-1, max=1), dict(bins=1), dict(bins=10, min=2, max=2),
                                dict(bins=4, min=0.25, max=0.75)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_histc(kw, dtype, no_fallbacks):
    x = rand(200, dtype=dtype)
    x[:4] = torch.tensor([NAN, 5.0, -5.0, 1.0]).to(dtype) if "min" in kw and kw["min"] != kw["max"] else x[:4]
    close(torch.histc(x.to(DEV), **kw), torch.histc(x, **kw))
    close(torch.histc(x.to(DEV).reshape(10, 20).t(), **kw), torch.histc(x.reshape(10, 20).t(), **kw))


def test_histc_edges_and_empty(no_fallbacks):
    x = torch.tensor([0.0, 1.0, 0.5, 0.25, 0.75, 1.0, 0.999999])
    close(torch.histc(x.to(DEV), bins=4, min=0, max=1), torch.histc(x, bins=4, min=0, max=1))
    close(torch.histc(torch.full((5,), 3.0).to(DEV), bins=3), torch.histc(torch.full((5,), 3.0), bins=3))
    close(torch.histc(torch.empty(0).to(DEV), bins=3), torch.histc(torch.empty(0), bins=3))


@pytest.mark.parametrize("x,kw,err", [
    (torch.tensor([1.0, INF]), dict(bins=3), RuntimeError),          # data range not finite
    (torch.tensor([1.0, NAN]), dict(bins=3), RuntimeError),
    (torch.tensor([1.0, 2.0]), dict(bins=3, min=3, max=1), RuntimeError),
    (torch.tensor([1.0, 2.0]), dict(bins=3, min=NAN, max=3), RuntimeError),
    (torch.tensor([1.0, 2.0]), dict(bins=0), RuntimeError),
    (torch.tensor([1, 2]), dict(bins=3), NotImplementedError),
])
def test_histc_invalid(x, kw, err):
    with pytest.raises(err):
        torch.histc(x, **kw)
    with pytest.raises(err):
        torch.histc(x.to(DEV), **kw)
        torch.tpu.synchronize()  # range checks that need the data are device-side checks


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.int8])
def test_bincount(dtype, no_fallbacks):
    x = torch.tensor([1, 2, 2, 5, 0, 7, 7, 7], dtype=dtype)
    close(torch.bincount(x.to(DEV)), torch.bincount(x))
    close(torch.bincount(x.to(DEV), minlength=12), torch.bincount(x, minlength=12))
    close(torch.bincount(x.to(DEV)[::2]), torch.bincount(x[::2]))


@pytest.mark.parametrize("wdtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32])
def test_bincount_weights(wdtype, no_fallbacks):
    x = torch.tensor([1, 2, 2, 5, 0])
    w = torch.tensor([0.5, 2.0, -1.0, 3.0, NAN if wdtype.is_floating_point else 4]).to(wdtype)
    got, want = torch.bincount(x.to(DEV), w.to(DEV), minlength=3), torch.bincount(x, w, minlength=3)
    assert got.dtype == want.dtype
    close(got, want)


def test_bincount_empty(no_fallbacks):
    e = torch.tensor([], dtype=torch.long)
    close(torch.bincount(e.to(DEV)), torch.bincount(e))
    close(torch.bincount(e.to(DEV), minlength=4), torch.bincount(e, minlength=4))


@pytest.mark.parametrize("call,err", [
    (lambda d: torch.bincount(torch.tensor([1, -2], device=d)), RuntimeError),
    (lambda d: torch.bincount(torch.tensor([[1]], device=d)), RuntimeError),
    (lambda d: torch.bincount(torch.tensor([1.0], device=d)), NotImplementedError),
    (lambda d: torch.bincount(torch.tensor([1], device=d), minlength=-1), RuntimeError),
    (lambda d: torch.bincount(torch.tensor([1, 2], device=d), torch.tensor([1.0], device=d)), RuntimeError),
])
def test_bincount_invalid(call, err):
    with pytest.raises(err):
        call("cpu")
    with pytest.raises(err):
        call(DEV)


@pytest.mark.parametrize("a,b", [
    (torch.tensor([1, 2]), torch.tensor([1.0, 2.0])), (torch.tensor([NAN]), torch.tensor([NAN])),
    (torch.ones(2), torch.ones(3)), (torch.ones(2, 3), torch.ones(2, 3)), (torch.empty(0), torch.empty(0)),
    (torch.tensor([1.0, -0.0]), torch.tensor([1.0, 0.0])), (torch.tensor([True, False]), torch.tensor([True, True])),
    (torch.arange(6.0).reshape(2, 3).t(), torch.arange(6.0).reshape(2, 3).t().contiguous()),
])
def test_equal(a, b, no_fallbacks):
    assert torch.equal(a.to(DEV), b.to(DEV)) == torch.equal(a, b)


def test_equal_across_devices():
    with pytest.raises(RuntimeError, match="different devices"):
        torch.equal(torch.ones(2, device=DEV), torch.ones(2))


@pytest.mark.parametrize("call", [
    lambda x: torch.norm(x, 3), lambda x: torch.norm(x), lambda x: torch.norm(x, 1, dim=1, keepdim=True),
    lambda x: torch.norm(x, 2, dim=(0,), dtype=torch.float64), lambda x: torch.norm(x, INF, dim=0),
    lambda x: torch.norm(x, -INF, dim=1), lambda x: torch.norm(x, 0, dim=1), lambda x: torch.norm(x, 2.5),
    lambda x: torch.ops.aten.norm.Scalar(x, 3), lambda x: torch.ops.aten.norm.ScalarOpt_dtype(x, 2, dtype=torch.float64),
    lambda x: torch.norm(x, 2, dim=0, out=torch.empty(0, device=x.device)),
    lambda x: torch.norm(x, 2, dim=0, dtype=torch.float64, out=torch.empty(0, dtype=torch.float64, device=x.device)),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.complex64])
def test_legacy_norm(call, dtype, no_fallbacks):
    x = rand(3, 4).to(dtype)
    x[1, 1] = 0
    try:
        want = call(x)
    except RuntimeError:  # e.g. a real dtype= for a complex input, a float32 out= for bfloat16
        with pytest.raises(RuntimeError):
            call(x.to(DEV))
        return
    close(call(x.to(DEV)), want)


def test_legacy_norm_nan_and_grad(no_fallbacks):
    x = rand(3, 4)
    x[0, 0] = NAN
    close(torch.norm(x.to(DEV), 2, dim=1), torch.norm(x, 2, dim=1))
    xs = [rand(3, 4).requires_grad_(), rand(3, 4).to(DEV).requires_grad_()]
    for t in xs:
        torch.norm(t, 3, dim=0).sum().backward()
    close(xs[1].grad, xs[0].grad)


def test_legacy_norm_integer_input():
    with pytest.raises(RuntimeError):
        torch.norm(torch.tensor([1, 2], device=DEV), 2)


@pytest.mark.parametrize("rows,cols,offset", [(3, 4, 1), (7, 5, -2), (0, 3, 0), (4, 0, 0), (5, 5, -10), (5, 5, 10),
                                              (1, 1, 0), (40, 33, 3), (9, 1, -3)])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_tril_triu_indices(rows, cols, offset, dtype, no_fallbacks):
    for f in (torch.tril_indices, torch.triu_indices):
        got = f(rows, cols, offset, dtype=dtype, device=DEV)
        want = f(rows, cols, offset, dtype=dtype)
        assert got.device.type == DEV and got.dtype == want.dtype
        assert torch.equal(got.cpu(), want)


def test_tril_indices_invalid():
    with pytest.raises(RuntimeError, match="row must be non-negative"):
        torch.tril_indices(-1, 3, device=DEV)
    with pytest.raises(NotImplementedError):
        torch.triu_indices(3, 3, dtype=torch.float32, device=DEV)


@pytest.mark.parametrize("value", [1, -3, 0.5, NAN, True])
def test_assert_async_passes(value, no_fallbacks):
    torch._assert_async(torch.tensor(value, device=DEV))
    torch._assert_async(torch.tensor([value], device=DEV), "never raised")
    torch.tpu.synchronize()


@pytest.mark.parametrize("value", [0, 0.0, -0.0, False])
def test_assert_async_fails_at_next_sync(value):
    torch._assert_async(torch.tensor(value, device=DEV))
    with pytest.raises(RuntimeError, match="Expected Tensor with single nonzero value, but got zero"):
        torch.tpu.synchronize()
    torch._assert_async(torch.tensor(value, device=DEV), "custom message")
    with pytest.raises(RuntimeError, match="custom message"):
        torch.ones(1, device=DEV).cpu()


@pytest.mark.parametrize("shape,msg", [((2,), "more than one value"), ((0,), "no values")])
def test_assert_async_ambiguous(shape, msg):
    with pytest.raises(RuntimeError, match=msg):
        torch._assert_async(torch.ones(shape))
    with pytest.raises(RuntimeError, match=msg):
        torch._assert_async(torch.ones(shape, device=DEV))


def test_efficientzerotensor(no_fallbacks):
    z = torch._efficientzerotensor((2, 3), device=DEV)
    assert z.device.type == DEV and z.shape == (2, 3) and z._is_zerotensor()
    close(z + torch.ones(2, 3, device=DEV), torch.ones(2, 3))
    close(torch._efficientzerotensor((4,), dtype=torch.float64, device=DEV) * 3, torch.zeros(4, dtype=torch.float64))
