import pytest
import torch

import torch_tpu

from helpers import DEV

N = 10000


# Every test here must run without a CPU fallback (fixture in conftest.py).
pytestmark = pytest.mark.usefixtures("no_fallbacks")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_normal_uniform_stats(dtype):
    torch.manual_seed(0)
    x = torch.randn(N, device=DEV, dtype=dtype).cpu().double()
    assert abs(x.mean()) < 0.05 and abs(x.std() - 1) < 0.05
    x = torch.empty(N, device=DEV, dtype=dtype).normal_(3.0, 2.0).cpu().double()
    assert abs(x.mean() - 3) < 0.1 and abs(x.std() - 2) < 0.1
    u = torch.rand(N, device=DEV, dtype=dtype).cpu().double()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.02
    u = torch.empty(N, device=DEV, dtype=dtype).uniform_(-2, 5).cpu().double()
    assert u.min() >= -2 and u.max() < 5 and abs(u.mean() - 1.5) < 0.1


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_normal_stats(dtype):
    """As in PyTorch: real and imaginary parts each normal(mean, std / sqrt(2)), independent."""
    torch.manual_seed(0)
    z = torch.randn(N, device=DEV, dtype=dtype).cpu()
    assert z.dtype == dtype
    for part in (z.real.double(), z.imag.double()):
        assert abs(part.mean()) < 0.05 and abs(part.var() - 0.5) < 0.05
    assert abs(torch.corrcoef(torch.stack([z.real, z.imag]).double())[0, 1]) < 0.05
    z = torch.empty(N, device=DEV, dtype=dtype).normal_(3.0, 2.0).cpu()
    for part in (z.real.double(), z.imag.double()):
        assert abs(part.mean() - 3) < 0.1 and abs(part.var() - 2) < 0.2


def test_reproducible_and_advancing():
    torch.manual_seed(123)
    a = torch.randn(1000, device=DEV).cpu()
    b = torch.randn(1000, device=DEV).cpu()
    assert not torch.equal(a, b)
    # successive draws must not be shifted copies of each other
    assert not torch.equal(a[1:], b[:-1])
    torch.manual_seed(123)
    torch.testing.assert_close(torch.randn(1000, device=DEV).cpu(), a)
    g = torch.Generator(device=DEV).manual_seed(7)
    c = torch.rand(100, device=DEV, generator=g).cpu()
    g.manual_seed(7)
    torch.testing.assert_close(torch.rand(100, device=DEV, generator=g).cpu(), c)


def test_bernoulli():
    torch.manual_seed(0)
    x = torch.empty(N, device=DEV).bernoulli_(0.3).cpu()
    assert set(x.unique().tolist()) <= {0.0, 1.0} and abs(x.mean() - 0.3) < 0.03
    p = torch.full((N,), 0.8, device=DEV)
    y = torch.bernoulli(p).cpu()
    assert abs(y.mean() - 0.8) < 0.03
    z = torch.empty(N, device=DEV).bernoulli_(p).cpu()
    assert abs(z.mean() - 0.8) < 0.03
    assert torch.bernoulli(torch.zeros(10, device=DEV)).cpu().sum() == 0


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.float32])
def test_random_ints(dtype):
    torch.manual_seed(0)
    x = torch.empty(N, device=DEV, dtype=dtype).random_(3, 10).cpu()
    assert x.min() == 3 and x.max() == 9
    assert abs(x.double().mean() - 6) < 0.15
    x = torch.empty(N, device=DEV, dtype=dtype).random_(5).cpu()
    assert x.min() == 0 and x.max() == 4
    x = torch.randint(0, 7, (N,), device=DEV, dtype=dtype).cpu()
    assert x.min() == 0 and x.max() == 6
    x = torch.empty(N, device=DEV, dtype=dtype).random_().cpu()
    assert x.min() >= 0


def test_exponential():
    torch.manual_seed(0)
    x = torch.empty(N, device=DEV).exponential_(2.0).cpu()
    assert x.min() >= 0 and abs(x.mean() - 0.5) < 0.03


def test_multinomial():
    torch.manual_seed(0)
    p = torch.tensor([0.1, 0.0, 0.6, 0.3], device=DEV)
    s = torch.multinomial(p, N, replacement=True).cpu()
    counts = torch.bincount(s, minlength=4).double() / N
    torch.testing.assert_close(counts, torch.tensor([0.1, 0.0, 0.6, 0.3], dtype=torch.double), atol=0.03, rtol=0)
    p2 = torch.rand(3, 6, device=DEV)
    s2 = torch.multinomial(p2, 6, replacement=False).cpu()
    for row in s2:
        assert sorted(row.tolist()) == list(range(6))
    s3 = torch.multinomial(torch.tensor([1.0, 0.0, 1.0, 0.0], device=DEV), 2).cpu()
    assert sorted(s3.tolist()) == [0, 2]


def test_randperm():
    torch.manual_seed(0)
    p = torch.randperm(50, device=DEV).cpu()
    assert sorted(p.tolist()) == list(range(50))
    assert p.dtype == torch.int64
    q = torch.randperm(50, device=DEV).cpu()
    assert not torch.equal(p, q)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32, torch.bfloat16])
def test_arange(dtype):
    for args in [(10,), (2, 11, 3), (-5, 5)]:
        torch.testing.assert_close(torch.arange(*args, device=DEV, dtype=dtype).cpu(), torch.arange(*args, dtype=dtype))
    if dtype.is_floating_point:
        torch.testing.assert_close(torch.arange(0, 1, 0.1, device=DEV, dtype=dtype).cpu(),
                                   torch.arange(0, 1, 0.1, dtype=dtype))
        torch.testing.assert_close(torch.arange(1.5, -2, -0.25, device=DEV, dtype=dtype).cpu(),
                                   torch.arange(1.5, -2, -0.25, dtype=dtype))


def test_arange_out():
    out = torch.empty(5, device=DEV)
    torch.arange(5, out=out)
    torch.testing.assert_close(out.cpu(), torch.arange(5.0))


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_arange_after_an_empty_arange(dtype):
    """The length is a function of the (runtime) scalars: an empty result once (arange(0),
    arange(1, 1)) must not make later calls of the same dtype empty, as it did."""
    for args in [(0,), (5,), (1, 1, 1), (0, 2**40, 2**38), (3,), (7, 7), (2, 9, 2)]:
        torch.testing.assert_close(torch.arange(*args, device=DEV, dtype=dtype).cpu(), torch.arange(*args, dtype=dtype))


def test_arange_errors_like_the_cpu():
    for args, message in [((0, 5, 0), "step must be nonzero"), ((5, 0, 1), "inconsistent with step sign"),
                          ((0, float("inf"), 1), "unsupported range")]:
        with pytest.raises(RuntimeError, match=message):
            torch.arange(*args, device=DEV)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16])
def test_linspace_eye(dtype):
    # Fractional endpoints: an integer result truncates them first (2.5 -> 2), as the CPU does.
    for s, e, n in [(0, 1, 7), (-3, 10, 5), (2, 2, 1), (0, 1, 0), (2.5, 1, 7), (-2.7, 3.9, 5)]:
        torch.testing.assert_close(torch.linspace(s, e, n, device=DEV, dtype=dtype).cpu(),
                                   torch.linspace(s, e, n, dtype=dtype))
    torch.testing.assert_close(torch.eye(4, device=DEV, dtype=dtype).cpu(), torch.eye(4, dtype=dtype))
    torch.testing.assert_close(torch.eye(3, 5, device=DEV, dtype=dtype).cpu(), torch.eye(3, 5, dtype=dtype))


def test_bad_args_raise():
    with pytest.raises((ValueError, RuntimeError)):
        torch.empty(4, device=DEV).random_(5, 3)
    with pytest.raises((ValueError, RuntimeError)):
        torch.empty(4, device=DEV).uniform_(3, 1)
