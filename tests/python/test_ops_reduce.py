import pytest
import torch

import torch_tpu

from helpers import DEV, check, close, fallbacks  # noqa: F401


FLOATS = [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("dtype", FLOATS)
def test_sum_mean_prod(dtype):
    x = torch.randn(4, 5, 6).to(dtype)
    check(lambda v: v.sum(), x, dtype=dtype)
    check(lambda v: v.sum(1), x, dtype=dtype)
    check(lambda v: v.sum((0, 2), keepdim=True), x, dtype=dtype)
    check(lambda v: v.sum(dim=[]), x, dtype=dtype)
    check(lambda v: v.sum(-1, dtype=torch.float32), x, dtype=dtype)
    check(lambda v: v.mean(), x, dtype=dtype)
    check(lambda v: v.mean((0, -1), keepdim=True), x, dtype=dtype)
    check(lambda v: (v * 0.5).prod(2), x, dtype=dtype)
    check(lambda v: (v * 0.5).prod(), x, dtype=dtype)
    check(lambda v: v.transpose(0, 2).sum(0), x, dtype=dtype)
    check(lambda v: v[:, 1:4, ::2].mean(1), x, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.bool])
def test_int_sum_promotes(dtype):
    x = torch.randint(0, 5, (3, 4)).to(dtype)
    check(lambda v: v.sum(), x)
    check(lambda v: v.sum(0), x)
    check(lambda v: v.prod(1), x)
    check(lambda v: v.cumsum(1), x)
    r = x.to(DEV).sum()
    assert r.dtype == torch.int64


def test_sum_out():
    x = torch.randn(3, 4)
    out = torch.empty(3, device=DEV)
    torch.sum(x.to(DEV), 1, out=out)
    close(out, x.sum(1))
    out = torch.empty(4, device=DEV)
    torch.mean(x.to(DEV), 0, out=out)
    close(out, x.mean(0))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32])
def test_amax_amin_max_min(dtype):
    x = (torch.randn(4, 6) * 10).to(dtype)
    check(lambda v: v.amax(1), x, dtype=dtype)
    check(lambda v: v.amin((0, 1), keepdim=True), x, dtype=dtype)
    check(lambda v: v.max(), x, dtype=dtype)
    check(lambda v: v.min(), x, dtype=dtype)
    check(lambda v: tuple(v.max(1)), x, dtype=dtype)
    check(lambda v: tuple(v.min(0, keepdim=True)), x, dtype=dtype)
    check(lambda v: v.argmax(), x)
    check(lambda v: v.argmin(1), x)
    check(lambda v: v.argmax(0, keepdim=True), x)
    check(lambda v: v.t().argmax(1), x)


def test_max_first_index_and_nan():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, float("nan"), 5.0, float("nan")], [-1.0, -1.0, -1.0, -1.0]])
    check(lambda v: tuple(v.max(1)), x)
    check(lambda v: tuple(v.min(1)), x)
    check(lambda v: v.argmax(1), x)
    check(lambda v: v.amax(1), x)
    check(lambda v: v.max(), x)


def test_max_out_variants():
    x = torch.randn(3, 5)
    v, i = torch.empty(3, device=DEV), torch.empty(3, dtype=torch.long, device=DEV)
    torch.max(x.to(DEV), 1, out=(v, i))
    close(v, x.max(1).values)
    close(i, x.max(1).indices)
    y = torch.randn(3, 5)
    check(lambda a: torch.max(a, y.to(a.device)), x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_var_std(dtype):
    x = torch.randn(5, 7).to(dtype)
    check(lambda v: v.var(), x, dtype=dtype)
    check(lambda v: v.var(1), x, dtype=dtype)
    check(lambda v: v.std(0, keepdim=True), x, dtype=dtype)
    check(lambda v: v.var(1, correction=0), x, dtype=dtype)
    check(lambda v: v.std(unbiased=False), x, dtype=dtype)
    check(lambda v: torch.var_mean(v, 1), x, dtype=dtype)
    check(lambda v: torch.std_mean(v, (0, 1), correction=2), x, dtype=dtype)


@pytest.mark.parametrize("ord", [2, 1, float("inf"), -float("inf"), 0, 3, 0.5])
def test_vector_norm(ord):
    x = torch.randn(4, 5)
    x[0, 0] = 0
    check(lambda v: torch.linalg.vector_norm(v, ord), x)
    check(lambda v: torch.linalg.vector_norm(v, ord, dim=1, keepdim=True), x)


def test_norm_bf16_and_dtype():
    x = torch.randn(4, 5).to(torch.bfloat16)
    check(lambda v: v.norm(), x, dtype=torch.bfloat16)
    check(lambda v: torch.linalg.vector_norm(v, 2, dim=0, dtype=torch.float32), x, dtype=torch.bfloat16)


@pytest.mark.parametrize("dtype", FLOATS)
def test_logsumexp_cumsum(dtype):
    x = (torch.randn(3, 6) * 30).to(dtype)
    check(lambda v: v.logsumexp(1), x, dtype=dtype)
    check(lambda v: v.logsumexp((0, 1), keepdim=True), x, dtype=dtype)
    y = torch.randn(3, 6).to(dtype)
    check(lambda v: v.cumsum(1), y, dtype=dtype, atol=5e-2, rtol=5e-2)
    check(lambda v: v.cumsum(0, dtype=torch.float32), y, dtype=dtype)
    check(lambda v: (v * 0.5 + 1).cumprod(1), y, dtype=dtype, atol=5e-2, rtol=5e-2)


def test_logsumexp_inf():
    x = torch.tensor([[-float("inf"), -float("inf")], [1.0, float("inf")]])
    check(lambda v: v.logsumexp(1), x)


def test_cumsum_inplace_and_out():
    x = torch.randn(4, 5)
    t = x.to(DEV)
    t.cumsum_(0)
    close(t, x.cumsum(0))
    out = torch.empty(4, 5, device=DEV)
    torch.cumsum(x.to(DEV), 1, out=out)
    close(out, x.cumsum(1))


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.int64, torch.uint8])
def test_any_all(dtype):
    x = (torch.rand(4, 5) > 0.6).to(dtype)
    x[1] = 1
    x[2] = 0
    check(lambda v: v.any(), x)
    check(lambda v: v.all(), x)
    check(lambda v: v.any(1), x)
    check(lambda v: v.all(1, keepdim=True), x)
    check(lambda v: v.any((0, 1)), x)
    check(lambda v: v.all(dim=(0,)), x)


def test_zero_dim_and_empty():
    x = torch.tensor(3.5)
    check(lambda v: v.sum(), x)
    check(lambda v: v.sum(0), x)
    check(lambda v: tuple(v.max(0)), x)
    check(lambda v: v.cumsum(0), x)
    e = torch.randn(0, 3)
    check(lambda v: v.sum(0), e)
    check(lambda v: v.prod(0), e)


def test_bad_dim_raises():
    x = torch.randn(3, 4, device=DEV)
    with pytest.raises((IndexError, RuntimeError)):
        x.sum(5)
    with pytest.raises((IndexError, RuntimeError)):
        x.max(2)
    with pytest.raises((IndexError, RuntimeError)):
        x.cumsum(-3)
