"""_masked_softmax / _masked_softmax_backward against the CPU kernel: every mask_type, fully
masked rows (NaN, as on the CPU), NaN/inf scores, bfloat16, bad arguments."""
import pytest
import torch

from helpers import DEV, fallbacks

inf, nan = float("inf"), float("nan")


def run_both(f, *xs):
    before = fallbacks()
    out = f(*[x.to(DEV) for x in xs])
    assert fallbacks() == before, fallbacks()
    return out.cpu(), f(*xs)


def scores(shape, dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    x = torch.randn(shape) * 3
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("dim", [-1, 3, 1])
def test_generic_mask(dtype, dim):
    x = scores((2, 3, 4, 5), dtype)
    mask = torch.rand(2, 3, 4, 5) < 0.4
    mask[0, 0, 0, :] = True  # a fully masked row (dim -1)
    mask[1, :, 2, 1] = True
    x[1, 1, 1, 2] = inf
    x[1, 2, 3, 0] = -inf
    x[0, 2, 1, 4] = nan
    d, c = run_both(lambda a, m: torch.ops.aten._masked_softmax(a, m, dim, 2), x, mask)
    torch.testing.assert_close(d, c, equal_nan=True)


@pytest.mark.parametrize("mask_type", [0, 1])
@pytest.mark.parametrize("dim", [-1, 3, 2])
def test_attention_and_padding_masks(mask_type, dim):
    x = scores((2, 3, 4, 4))
    if mask_type == 0:
        mask = torch.rand(4, 4) < 0.3
        mask[2] = True  # a query that sees nothing
    else:
        mask = torch.rand(2, 4) < 0.3
        mask[1] = True  # a fully padded batch entry
    d, c = run_both(lambda a, m: torch.ops.aten._masked_softmax(a, m, dim, mask_type), x, mask)
    torch.testing.assert_close(d, c, equal_nan=True)


def test_mask_type_ignored_for_other_ranks():
    x = scores((3, 7))
    mask = torch.rand(3, 7) < 0.5
    for mt in (None, 0, 1):  # a 2-D input: the mask must match and the type does not matter
        d, c = run_both(lambda a, m: torch.ops.aten._masked_softmax(a, m, 1, mt), x, mask)
        torch.testing.assert_close(d, c, equal_nan=True)


def test_zero_dim_and_noncontiguous():
    for m in (False, True):
        d, c = run_both(lambda a, mm: torch.ops.aten._masked_softmax(a, mm, None, None), torch.tensor(1.5),
                        torch.tensor(m))
        torch.testing.assert_close(d, c, equal_nan=True)
    x = scores((5, 6)).t()
    mask = (torch.rand(5, 6) < 0.4).t()
    d, _ = run_both(lambda a, mm: torch.ops.aten._masked_softmax(a, mm, 0, 2), x, mask)
    # The CPU kernel writes a contiguous result into a tensor with the input's (transposed) strides,
    # so its own result for a transposed input is scrambled: compare with contiguous copies.
    c = torch.ops.aten._masked_softmax(x.contiguous(), mask.contiguous(), 0, 2)
    torch.testing.assert_close(d, c, equal_nan=True)


def test_empty_rows():
    x = torch.randn(3, 0, 2)
    before = fallbacks()
    out = torch.ops.aten._masked_softmax(x.to(DEV), torch.ones(3, 0, 2, dtype=torch.bool).to(DEV), 2, 2)
    assert out.shape == (3, 0, 2) and fallbacks() == before


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("dim", [-1, 0])
def test_backward(dtype, dim):
    x = scores((4, 3, 6), dtype)
    mask = torch.rand(4, 3, 6) < 0.4
    mask[0, 0, :] = True
    y = torch.ops.aten._masked_softmax(x, mask, dim, 2)
    g = torch.randn(4, 3, 6).to(dtype)
    d, c = run_both(lambda gg, yy, mm: torch.ops.aten._masked_softmax_backward(gg, yy, mm, dim), g, y, mask)
    torch.testing.assert_close(d, c, equal_nan=True)


def test_autograd_through_masked_softmax():
    x = scores((2, 5, 7))
    mask = torch.rand(2, 5, 7) < 0.3
    xc, xd = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    g = torch.randn(2, 5, 7)
    before = fallbacks()
    yd = torch.ops.aten._masked_softmax(xd, mask.to(DEV), 2, 2)
    yd.backward(g.to(DEV))
    assert fallbacks() == before
    yc = torch.ops.aten._masked_softmax(xc, mask, 2, 2)
    yc.backward(g)
    torch.testing.assert_close(yd.detach().cpu(), yc.detach(), equal_nan=True)
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, equal_nan=True)


@pytest.mark.parametrize("case", ["float_mask", "int_input", "shape_type2", "shape_type1", "shape_type0",
                                  "no_type", "bad_type", "backward_shape"])
def test_bad_arguments_raise_like_cpu(case):
    x4, m2 = torch.randn(2, 2, 3, 3), torch.zeros(3, 3, dtype=torch.bool)
    calls = {
        "float_mask": lambda d: torch.ops.aten._masked_softmax(x4.to(d), m2.float().to(d), 3, 0),
        "int_input": lambda d: torch.ops.aten._masked_softmax(x4.long().to(d), m2.to(d), 3, 0),
        "shape_type2": lambda d: torch.ops.aten._masked_softmax(x4.to(d), torch.zeros(2, 2, 3, dtype=torch.bool).to(d), 2, 2),
        "shape_type1": lambda d: torch.ops.aten._masked_softmax(x4.to(d), torch.zeros(3, 3, dtype=torch.bool).to(d), 3, 1),
        "shape_type0": lambda d: torch.ops.aten._masked_softmax(x4.to(d), torch.zeros(2, 3, dtype=torch.bool).to(d), 3, 0),
        "no_type": lambda d: torch.ops.aten._masked_softmax(x4.to(d), m2.to(d), 3, None),
        "bad_type": lambda d: torch.ops.aten._masked_softmax(x4.to(d), m2.to(d), 3, 5),
        "backward_shape": lambda d: torch.ops.aten._masked_softmax_backward(x4.to(d), x4.to(d), m2.to(d), 3),
    }
    with pytest.raises(Exception) as cpu:
        calls[case]("cpu")
    with pytest.raises(type(cpu.value)) as dev:
        calls[case](DEV)
    assert str(cpu.value).split("\n")[0] in str(dev.value)
