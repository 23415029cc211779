"""unique_consecutive / unique_dim_consecutive on tpu (one host sync for the number of runs)
against the CPU: NaN runs, bool, bfloat16, 0-d, empty and zero-size dims, bad arguments."""
import pytest
import torch

from helpers import DEV, fallbacks

nan = float("nan")


def both(f, x):
    before = fallbacks()
    d = f(x.to(DEV))
    assert fallbacks() == before, fallbacks()
    c = f(x)
    for a, b in zip(d, c):
        assert a.device.type == "tpu"
        torch.testing.assert_close(a.cpu(), b, equal_nan=True)


INPUTS = {
    "float_nan": torch.tensor([1., 1., nan, nan, 2., 2., 1., -0., 0.]),
    "int_2d": torch.tensor([[3, 3, 1], [1, 1, 1], [2, 2, 3]]),
    "bool": torch.tensor([True, True, False, True]),
    "bf16": torch.tensor([1.5, 1.5, 2.0, 2.0, 2.0, -1.0]).bfloat16(),
    "f64_odd": torch.randint(0, 3, (7, 5)).double(),
    "zero_d": torch.tensor(4.0),
    "single": torch.tensor([9]),
}


@pytest.mark.parametrize("name", sorted(INPUTS))
@pytest.mark.parametrize("inverse,counts", [(False, False), (True, False), (False, True), (True, True)])
def test_unique_consecutive_flat(name, inverse, counts):
    both(lambda t: torch.unique_consecutive(t, return_inverse=inverse, return_counts=counts)
         if inverse or counts else (torch.unique_consecutive(t),), INPUTS[name])
    both(lambda t: torch.ops.aten.unique_consecutive(t, inverse, counts), INPUTS[name])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unique_consecutive_dim(dim):
    torch.manual_seed(0)
    x = torch.randint(0, 2, (6, 4, 3)).float()
    x[1] = x[0]
    x[:, 2] = x[:, 1]
    x[4, 1, 1] = nan
    x[5] = x[4]  # rows with NaN never compare equal
    both(lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True, dim=dim), x)
    both(lambda t: torch.ops.aten.unique_dim_consecutive(t, dim, False, False), x)


def test_unique_consecutive_noncontiguous():
    x = torch.tensor([[1, 2], [1, 2], [1, 3]]).t()  # (2, 3), transposed
    both(lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True), x)
    both(lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True, dim=1), x)
    both(lambda t: torch.unique_consecutive(t, return_counts=True, dim=0), x[:, ::2])


@pytest.mark.parametrize("shape,dim", [((0,), None), ((0, 3), None), ((0, 3), 0), ((2, 0), 1), ((3,), 0)])
def test_unique_consecutive_empty(shape, dim):
    x = torch.arange(int(torch.tensor(shape).prod())).reshape(shape).float()
    both(lambda t: torch.ops.aten.unique_consecutive(t, True, True, dim), x)


@pytest.mark.parametrize("case", ["zero_size_unselected", "dim_range", "complex", "complex_dim", "zero_d_dim"])
def test_bad_arguments_raise_like_cpu(case):
    calls = {
        "zero_size_unselected": lambda d: torch.ops.aten.unique_consecutive(torch.ones(2, 0).to(d), True, True, 0),
        "dim_range": lambda d: torch.unique_consecutive(torch.tensor([2, 2, 3]).to(d), dim=1),
        "complex": lambda d: torch.unique_consecutive(torch.tensor([1j, 1j]).to(d)),
        "complex_dim": lambda d: torch.unique_consecutive(torch.tensor([[1j, 1j]]).to(d), dim=0),
        "zero_d_dim": lambda d: torch.unique_consecutive(torch.tensor(3.0).to(d), dim=0),
    }
    with pytest.raises(Exception) as cpu:
        calls[case]("cpu")
    with pytest.raises(type(cpu.value)) as dev:
        calls[case](DEV)
    assert str(cpu.value).split("\n")[0] in str(dev.value)
