"""segment_reduce and its backward against the CPU kernel: every reduction, lengths and offsets,
axis > 0, empty segments, initial values, NaN/inf/zeros, bad arguments."""
import pytest
import torch

from helpers import DEV, fallbacks

nan, inf = float("nan"), float("inf")
REDUCTIONS = ["sum", "mean", "max", "min", "prod", "amax"]


def seg(data, reduce, **kw):
    return torch.segment_reduce(data, reduce, **kw)


def compare(data, reduce, grad_seed=0, **kw):
    """Forward values and data's gradient, tpu vs CPU, with no fallback."""
    dev_kw = {k: v.to(DEV) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    c = data.clone().requires_grad_()
    d = data.to(DEV).requires_grad_()
    before = fallbacks()
    yd = seg(d, reduce, **dev_kw)
    torch.manual_seed(grad_seed)
    g = torch.randn(yd.shape, dtype=data.dtype)
    yd.backward(g.to(DEV))
    assert fallbacks() == before, fallbacks()
    yc = seg(c, reduce, **kw)
    yc.backward(g)
    torch.testing.assert_close(yd.detach().cpu(), yc.detach(), equal_nan=True)
    torch.testing.assert_close(d.grad.cpu(), c.grad, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("form", ["lengths", "offsets"])
def test_1d(dtype, reduce, form):
    torch.manual_seed(1)
    data = torch.randn(9, dtype=dtype)
    data[4] = data[3]  # a tie for max/min
    lengths = torch.tensor([2, 0, 3, 4])
    kw = {"lengths": lengths} if form == "lengths" else {"offsets": torch.cat([torch.zeros(1, dtype=torch.long),
                                                                             lengths.cumsum(0)])}
    compare(data, reduce, **kw)
    compare(data, reduce, initial=0.5, **kw)


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_axis_1_and_inner_dims(reduce):
    torch.manual_seed(2)
    data = torch.randn(2, 6, 3)
    lengths = torch.tensor([[1, 2, 3], [0, 6, 0]])
    compare(data, reduce, lengths=lengths, axis=1)
    compare(data, reduce, lengths=lengths.int(), axis=-2, unsafe=True)
    compare(data, reduce, offsets=torch.tensor([[0, 1, 3, 6], [0, 0, 6, 6]]), axis=1)


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_special_values(reduce):
    data = torch.tensor([1.0, nan, 2.0, 0.0, 3.0, inf, -inf, 0.0, 0.0, 2.0, 2.0, -1.0])
    lengths = torch.tensor([3, 2, 2, 2, 3])
    compare(data, reduce, lengths=lengths)


def test_bfloat16():
    torch.manual_seed(3)
    data = torch.randn(8, 2).bfloat16()
    lengths = torch.tensor([3, 5])
    before = fallbacks()
    for reduce in REDUCTIONS:
        yd = seg(data.to(DEV), reduce, lengths=lengths.to(DEV))
        # The CPU rounds the running value to bf16 after every element; we round once.
        torch.testing.assert_close(yd.cpu(), seg(data, reduce, lengths=lengths), atol=2e-2, rtol=2e-2)
    assert fallbacks() == before


def test_noncontiguous_data():
    torch.manual_seed(4)
    data = torch.randn(3, 7).t()  # (7, 3)
    compare(data, "sum", lengths=torch.tensor([3, 4]))
    compare(data, "max", lengths=torch.tensor([7, 0]))


@pytest.mark.parametrize("case", ["reduction", "indices", "none", "axis", "int_data"])
def test_bad_arguments_raise_like_cpu(case):
    data, lengths = torch.randn(5), torch.tensor([2, 3])
    calls = {
        "reduction": lambda d: seg(data.to(d), "median", lengths=lengths.to(d)),
        "indices": lambda d: seg(data.to(d), "sum", indices=lengths.to(d)),
        "none": lambda d: seg(data.to(d), "sum"),
        "axis": lambda d: seg(torch.randn(2, 5).to(d), "sum", lengths=torch.tensor([[2, 3], [1, 4]]).to(d), axis=0),
        "int_data": lambda d: seg(torch.arange(5).to(d), "sum", lengths=lengths.to(d)),
    }
    with pytest.raises(Exception) as cpu:
        calls[case]("cpu")
    with pytest.raises(type(cpu.value)) as dev:
        calls[case](DEV)
    assert str(cpu.value).split("\n")[0] in str(dev.value)


@pytest.mark.parametrize("lengths", [[2, 2], [6, -1]])
def test_bad_lengths_raise_at_sync(lengths):
    data = torch.randn(5)
    with pytest.raises(RuntimeError):
        seg(data, "sum", lengths=torch.tensor(lengths))
    with pytest.raises(RuntimeError):
        seg(data.to(DEV), "sum", lengths=torch.tensor(lengths).to(DEV)).cpu()


def test_empty_data_and_all_empty_segments():
    data = torch.randn(0, 3)
    for reduce in REDUCTIONS:
        before = fallbacks()
        yd = seg(data.to(DEV), reduce, lengths=torch.tensor([0, 0]).to(DEV))
        assert fallbacks() == before
        torch.testing.assert_close(yd.cpu(), seg(data, reduce, lengths=torch.tensor([0, 0])), equal_nan=True)


@pytest.mark.parametrize("reduce", ["sum", "max", "prod"])
def test_offsets_not_starting_at_zero_and_long_axis(reduce):
    torch.manual_seed(5)
    data = torch.rand(10) + 0.5
    compare(data, reduce, offsets=torch.tensor([2, 4, 4, 9]))  # positions 0-1 and 9 in no segment
    long = torch.rand(3000) + 0.5
    lengths = torch.randint(0, 40, (120,))
    lengths[-1] += 3000 - lengths.sum()
    if lengths[-1] < 0:
        pytest.skip("random lengths overshoot")
    compare(long, "sum" if reduce == "prod" else reduce, lengths=lengths)
