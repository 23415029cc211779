"""sort/topk, and data-dependent shapes (nonzero, masked_select, unique) with one host sync."""
import pytest
import torch

import torch_tpu


def data(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-5, 6, shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("dim,descending", [(0, False), (1, True), (-1, False)])
def test_sort_matches_stable_cpu_sort(dtype, dim, descending, no_fallbacks):
    x = data((6, 7), dtype)
    values, indices = torch.sort(x.to("tpu"), dim=dim, descending=descending, stable=True)
    ev, ei = torch.sort(x, dim=dim, descending=descending, stable=True)
    assert torch.equal(values.cpu(), ev)
    assert torch.equal(indices.cpu(), ei)


def test_sort_nan_order(no_fallbacks):
    x = torch.tensor([3.0, float("nan"), -1.0, 2.0])
    for descending in (False, True):
        v, i = torch.sort(x.to("tpu"), descending=descending)
        ev, ei = torch.sort(x, descending=descending, stable=True)
        torch.testing.assert_close(v.cpu(), ev, equal_nan=True)
        assert torch.equal(i.cpu(), ei)


@pytest.mark.parametrize("largest", [True, False])
def test_topk(largest, no_fallbacks):
    x = torch.randperm(40).float().reshape(5, 8)
    v, i = torch.topk(x.to("tpu"), 3, dim=1, largest=largest)
    ev, ei = torch.topk(x, 3, dim=1, largest=largest)
    assert torch.equal(v.cpu(), ev) and torch.equal(i.cpu(), ei)
    assert torch.equal(torch.argsort(x.to("tpu"), dim=0).cpu(), torch.argsort(x, dim=0, stable=True))


def test_topk_k_too_big_is_an_error():
    with pytest.raises((IndexError, RuntimeError), match="k"):
        torch.topk(torch.ones(3, device="tpu"), 5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_nonzero_and_masked_select(dtype, no_fallbacks):
    x = data((5, 6), dtype, seed=1)
    x[1] = 0
    assert torch.equal(torch.nonzero(x.to("tpu")).cpu(), torch.nonzero(x))
    assert torch.equal(x.to("tpu").nonzero(as_tuple=True)[1].cpu(), x.nonzero(as_tuple=True)[1])
    mask = data((5, 6), torch.bool, seed=2)
    assert torch.equal(torch.masked_select(x.to("tpu"), mask.to("tpu")).cpu(), torch.masked_select(x, mask))
    assert torch.equal(torch.nonzero(torch.zeros(3, 4, device="tpu")).cpu(), torch.zeros(0, 2, dtype=torch.long))


def test_boolean_mask_indexing_uses_nonzero():
    x = data((4, 5), torch.float32, seed=3)
    assert torch.equal(x.to("tpu")[x.to("tpu") > 0].cpu(), x[x > 0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_unique(dtype, no_fallbacks):
    x = torch.tensor([3, 1, 2, 3, 1, 1, 7], dtype=dtype)
    v, inv, cnt = torch.unique(x.to("tpu"), return_inverse=True, return_counts=True)
    ev, einv, ecnt = torch.unique(x, return_inverse=True, return_counts=True)
    assert torch.equal(v.cpu(), ev) and torch.equal(inv.cpu(), einv) and torch.equal(cnt.cpu(), ecnt)
    m = torch.tensor([[1, 2], [2, 5]], dtype=dtype)
    assert torch.equal(torch.unique(m.to("tpu")).cpu(), torch.unique(m))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_sort_signed_nan_and_signed_zero_like_cpu(dtype, no_fallbacks):
    """inf - inf is a NaN with the sign bit set on x86: it sorts last like every NaN, and -0.0
    equals +0.0 (a stable sort keeps their order); topk/argsort/msort agree."""
    x = torch.tensor([float("nan"), 1.0, -float("nan"), 3.0, float("inf") - float("inf"), -0.0, 0.0, -0.0,
                      float("inf"), -float("inf")], dtype=dtype)
    t = x.to("tpu")
    for descending in (False, True):
        v, i = torch.sort(t, descending=descending, stable=True)
        rv, ri = torch.sort(x, descending=descending, stable=True)
        torch.testing.assert_close(v.cpu(), rv, equal_nan=True)
        assert i.cpu().tolist() == ri.tolist()
    torch.testing.assert_close(torch.topk(t, 4).values.cpu(), torch.topk(x, 4).values, equal_nan=True)
    torch.testing.assert_close(torch.topk(t, 4, largest=False).values.cpu(), torch.topk(x, 4, largest=False).values,
                               equal_nan=True)
    assert torch.argsort(t, stable=True).cpu().tolist() == torch.argsort(x, stable=True).tolist()
