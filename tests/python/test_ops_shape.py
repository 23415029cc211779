import pytest
import torch
import torch_tpu
import torch.nn.functional as F
from helpers import DEV, executables_built, rand

DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool]


# Every test here must run without a CPU fallback (fixture in conftest.py).
pytestmark = pytest.mark.usefixtures("no_fallbacks")


def same(out, ref):
    assert out.device.type == DEV
    assert out.dtype == ref.dtype and out.shape == ref.shape
    torch.testing.assert_close(out.cpu(), ref, atol=0, rtol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat(dtype, dim):
    xs = [rand(2, 3, dtype=dtype, seed=i, low=-50, high=50) for i in range(3)]
    same(torch.cat([x.to(DEV) for x in xs], dim), torch.cat(xs, dim))
    same(torch.stack([x.to(DEV) for x in xs], dim), torch.stack(xs, dim))


def test_cat_promotion_empty_noncontiguous_out():
    a, b = torch.randn(2, 3), torch.randint(0, 5, (4, 3))
    same(torch.cat([a.to(DEV), b.to(DEV)]), torch.cat([a, b]))
    e = torch.empty(0)
    same(torch.cat([a.to(DEV), e.to(DEV), a.to(DEV)], 1), torch.cat([a, e, a], 1))
    z = torch.empty(0, 3)
    same(torch.cat([z.to(DEV), a.to(DEV)]), torch.cat([z, a]))
    x = torch.randn(4, 6)
    same(torch.cat([x.to(DEV).t(), x.to(DEV)[:, ::2].t()], 0), torch.cat([x.t(), x[:, ::2].t()], 0))
    out = torch.empty(4, 3, device=DEV)
    torch.cat([a.to(DEV), a.to(DEV)], out=out)
    same(out, torch.cat([a, a]))
    same(torch.hstack([a.to(DEV), a.to(DEV)]), torch.hstack([a, a]))
    same(torch.vstack([a.to(DEV), a.to(DEV)]), torch.vstack([a, a]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_flip_roll_repeat(dtype):
    x = rand(3, 4, 5, dtype=dtype, low=-50, high=50)
    t = x.to(DEV)
    for dims in [(0,), (1, 2), (-1,), (0, 1, 2)]:
        same(torch.flip(t, dims), torch.flip(x, dims))
    same(torch.fliplr(t), torch.fliplr(x))
    for shifts, dims in [(1, 0), (-2, 1), ((1, 3), (0, 2)), (7, -1), (0, 0)]:
        same(torch.roll(t, shifts, dims), torch.roll(x, shifts, dims))
    same(torch.roll(t, 5), torch.roll(x, 5))
    same(torch.roll(t, -3), torch.roll(x, -3))
    for reps in [(2, 1, 1), (1, 2, 3), (2, 1, 1, 2)]:
        same(t.repeat(*reps), x.repeat(*reps))
    same(t.transpose(0, 2).repeat(2, 1, 2), x.transpose(0, 2).repeat(2, 1, 2))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("diagonal", [0, 1, -1, 5, -5])
def test_tril_triu(dtype, diagonal):
    x = rand(2, 4, 5, dtype=dtype, low=-50, high=50)
    t = x.to(DEV)
    same(torch.tril(t, diagonal), torch.tril(x, diagonal))
    same(torch.triu(t, diagonal), torch.triu(x, diagonal))
    y = t.clone()
    y.tril_(diagonal)
    same(y, torch.tril(x, diagonal))
    same(torch.triu(t.transpose(1, 2), diagonal), torch.triu(x.transpose(1, 2), diagonal))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_constant_pad(dtype):
    x = rand(2, 3, 4, dtype=dtype, low=-50, high=50)
    t = x.to(DEV)
    value = True if dtype == torch.bool else 3
    for pad in [(1, 1), (0, 2, 1, 0), (1, -1), (-1, -2, 2, 1), (1, 1, 1, 1, 1, 1)]:
        same(F.pad(t, pad, value=value), F.pad(x, pad, value=value))
        same(torch.constant_pad_nd(t, pad), torch.constant_pad_nd(x, pad))
    same(F.pad(t.transpose(0, 2), (1, 2)), F.pad(x.transpose(0, 2), (1, 2)))


@pytest.mark.strict_eager
def test_pad_value_does_not_recompile():
    x = torch.randn(3, 4)
    t = x.to(DEV)
    F.pad(t, (1, 1), value=1.0)
    c0 = executables_built()
    for v in [2.0, -3.5, 7.25]:
        same(F.pad(t, (1, 1), value=v), F.pad(x, (1, 1), value=v))
    assert executables_built() == c0


def test_clone_contiguous_unsafe_view():
    x = torch.randn(4, 6)
    t = x.to(DEV).t()
    same(t.contiguous(), x.t().contiguous())
    assert t.contiguous().is_contiguous()
    same(t.clone(), x.t().clone())
    same(torch.ops.aten._unsafe_view(t.contiguous(), [6, 4]), torch.ops.aten._unsafe_view(x.t().contiguous(), [6, 4]))
    same(t.reshape(24), x.t().reshape(24))


def test_cat_backward():
    a, b = torch.randn(2, 3), torch.randn(4, 3)
    at, bt = a.to(DEV).requires_grad_(), b.to(DEV).requires_grad_()
    y = torch.cat([at, bt]).flip(0).roll(1, 0)
    g = torch.randn(6, 3)
    y.backward(g.to(DEV))
    ac, bc = a.clone().requires_grad_(), b.clone().requires_grad_()
    torch.cat([ac, bc]).flip(0).roll(1, 0).backward(g)
    same(at.grad, ac.grad)
    same(bt.grad, bc.grad)


def test_bad_inputs_raise():
    t = torch.zeros(2, 3, device=DEV)
    with pytest.raises((IndexError, RuntimeError)):
        torch.flip(t, (3,))
    with pytest.raises((IndexError, RuntimeError)):
        torch.cat([t, t], 4)
    with pytest.raises((RuntimeError, ValueError)):
        torch.cat([t, torch.zeros(3, 3, device=DEV)], 1)
    with pytest.raises((RuntimeError, ValueError)):
        t.repeat(2)
    with pytest.raises((RuntimeError, ValueError)):
        F.pad(t, (-4, 0))
    torch_tpu.metrics.reset()  # errors found by Python meta kernels re-raise on the CPU path
