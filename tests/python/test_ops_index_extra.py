"""searchsorted, bucketize, take, put_, index_fill_, index_reduce, count_nonzero and aminmax on
tpu against PyTorch on the CPU."""
import warnings

import pytest
import torch
import torch._dynamo

from helpers import check, DEV, fallbacks, rand

NAN, INF = float("nan"), float("inf")
warnings.filterwarnings("ignore", message="index_reduce")


def raises_like_cpu(f, *xs):
    """f raises on the tpu (at the op or at the next host read) with the CPU's exception type."""
    with pytest.raises(Exception) as cpu:
        f(*xs)
    with pytest.raises(type(cpu.value)):
        r = f(*[x.to(DEV) if isinstance(x, torch.Tensor) else x for x in xs])
        (r[0] if isinstance(r, tuple) else r).cpu()


# ----- searchsorted / bucketize -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.int32])
def test_searchsorted_1d(dtype):
    seq = torch.sort(rand(11, dtype=dtype)).values
    vals = rand(3, 5, dtype=dtype, seed=3)
    vals[0, :3] = seq[:3]  # exact hits: left and right differ
    for kw in [{}, {"right": True}, {"side": "right"}, {"side": "left"}, {"out_int32": True}]:
        check(lambda s, v: torch.searchsorted(s, v, **kw), seq, vals)
        check(lambda s, v: torch.bucketize(v, s, right=kw.get("right", False)), seq, vals)
    check(lambda s, v: torch.searchsorted(s, v), seq[:1], vals)  # one boundary
    check(lambda s, v: torch.searchsorted(s, v), seq[:0], vals)  # no boundaries


def test_searchsorted_nan_inf():
    seq = torch.tensor([-INF, -1.0, 0.0, 0.0, 2.0, INF, NAN, NAN])
    vals = torch.tensor([NAN, INF, -INF, 0.0, 5.0, -3.0, 2.0])
    for right in (False, True):
        check(lambda s, v: torch.searchsorted(s, v, right=right), seq, vals)
        check(lambda s, v: torch.bucketize(v, s, right=right), seq, vals)


def test_searchsorted_batched_sorter_and_noncontiguous():
    seq = torch.sort(rand(2, 3, 9), dim=-1).values
    vals = rand(2, 3, 4, seed=5)
    check(lambda s, v: torch.searchsorted(s, v), seq, vals)
    check(lambda s, v: torch.searchsorted(s, v, right=True), seq, vals)
    unsorted = rand(2, 9, seed=9)
    sorter = torch.argsort(unsorted, dim=-1)
    check(lambda s, v, o: torch.searchsorted(s, v, sorter=o), unsorted, rand(2, 5), sorter)
    check(lambda s, v, o: torch.searchsorted(s, v, side="right", sorter=o), unsorted, rand(2, 5), sorter)
    t = torch.sort(rand(9, 2), dim=0).values
    check(lambda s, v: torch.searchsorted(s.T, v.T), t, rand(4, 2))  # non-contiguous operands
    check(lambda s, v: torch.searchsorted(s, v), seq, rand(2, 3, 0))  # no values


def test_searchsorted_scalar_and_bucketize_scalar():
    seq = torch.tensor([1.0, 2.0, 2.0, 3.5])
    for v in (2.0, 0.0, 9.0, 2.5):
        check(lambda s: torch.searchsorted(s, v), seq)
        check(lambda s: torch.searchsorted(s, v, right=True), seq)
        check(lambda s: torch.bucketize(v, s), seq)
    check(lambda s: torch.bucketize(2, s, right=True), torch.tensor([1, 2, 3]))


def test_searchsorted_errors():
    seq = torch.tensor([1.0, 2.0, 3.0])
    raises_like_cpu(lambda s, v: torch.searchsorted(s, v, right=True, side="left"), seq, seq)
    raises_like_cpu(lambda s, v: torch.searchsorted(s, v), torch.ones(2, 3), torch.ones(3, 3))
    raises_like_cpu(lambda s, v: torch.bucketize(v, s), torch.ones(2, 3), torch.ones(3))


def test_searchsorted_sorter_out_of_range_raises():
    # The CPU raises RuntimeError at the op; the tpu checks on the device and raises IndexError
    # at the next host read, like every device-side index assertion (docs/ARCHITECTURE.md).
    seq = torch.tensor([1.0, 2.0, 3.0], device=DEV)
    r = torch.searchsorted(seq, seq, sorter=torch.tensor([0, 1, 5], device=DEV))
    with pytest.raises(IndexError, match="sorter index out of range"):
        r.cpu()


# ----- take / put_ ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_take(dtype):
    x = rand(3, 5, dtype=dtype)
    idx = torch.tensor([[0, -1, 14], [7, -15, 3]])
    check(lambda a, i: torch.take(a, i), x, idx)
    check(lambda a, i: torch.take(a.T, i), x, idx)  # non-contiguous: row-major order of the view
    raises_like_cpu(lambda a, i: torch.take(a, i), x, idx.int())  # long indices only
    check(lambda a, i: torch.take(a, i), x, torch.zeros(0, dtype=torch.long))
    check(lambda a, i: torch.take(a, i), torch.tensor(3.0), torch.tensor(0))


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_put(accumulate, dtype):
    x = rand(4, 5, dtype=dtype)
    idx = torch.tensor([[1, -1], [7, 19]]) if not accumulate else torch.tensor([[1, -1], [1, 19]])
    src = rand(4, dtype=dtype, seed=1)
    check(lambda a, i, s: a.clone().put_(i, s, accumulate=accumulate), x, idx, src)
    check(lambda a, i, s: torch.put(a, i, s, accumulate=accumulate), x, idx, src)
    check(lambda a, i, s: a.clone().T.put_(i, s, accumulate=accumulate), x, idx, src)  # non-contiguous self
    check(lambda a, i, s: a.clone().put_(i, s, accumulate=accumulate), x, idx[:0], src[:0])


def test_put_nan_inf():
    x = torch.tensor([1.0, NAN, INF, -INF])
    check(lambda a, i, s: a.clone().put_(i, s, accumulate=True), x, torch.tensor([0, 1, 2, 2]),
          torch.tensor([NAN, 1.0, -INF, 1.0]))


def test_take_put_out_of_range_raise():
    x = torch.arange(6.0)
    raises_like_cpu(lambda a, i: torch.take(a, i), x, torch.tensor([6]))
    raises_like_cpu(lambda a, i: torch.take(a, i), x, torch.tensor([-7]))
    raises_like_cpu(lambda a, i, s: a.clone().put_(i, s), x, torch.tensor([6]), torch.tensor([1.0]))
    raises_like_cpu(lambda a, i, s: a.clone().put_(i, s), x, torch.tensor([1, 2]), torch.tensor([1.0]))
    raises_like_cpu(lambda a, i: torch.take(a, i), x, torch.tensor([1.0]))
    raises_like_cpu(lambda a, i, s: a.clone().put_(i, s), x, torch.tensor([1, 2]).int(), torch.tensor([1.0, 2.0]))


# ----- index_fill_ -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool])
def test_index_fill(dtype):
    x = rand(3, 4, 5, dtype=torch.float32).to(dtype)
    idx = torch.tensor([0, -1, 2])
    for dim in (0, 1, -1):
        check(lambda a, i: a.index_fill(dim, i, 1), x, idx)
        check(lambda a, i: a.clone().index_fill_(dim, i, 0), x, idx)
        check(lambda a, i, v: a.index_fill(dim, i, v), x, idx, torch.tensor(1).to(dtype))
    check(lambda a, i: a.transpose(0, 2).index_fill(1, i, 1), x, idx)
    check(lambda a, i: a.index_fill(0, i, 1), x, torch.tensor(1))  # 0-d index
    check(lambda a, i: a.index_fill(0, i, 1), x, idx[:0])
    check(lambda a, i: a.index_fill(0, i, 1), torch.tensor(2).to(dtype), torch.tensor([0]))  # 0-d self


def test_index_fill_nan_inf_and_errors():
    x = torch.tensor([[1.0, NAN], [INF, -INF]])
    check(lambda a, i: a.index_fill(1, i, NAN), x, torch.tensor([1]))
    check(lambda a, i: a.index_fill(0, i, -INF), x, torch.tensor([0]))
    raises_like_cpu(lambda a, i: a.index_fill(1, i, 1.0), x, torch.tensor([2]))
    raises_like_cpu(lambda a, i: a.index_fill(1, i, 1.0), x, torch.tensor([-3]))
    raises_like_cpu(lambda a, i: a.index_fill(2, i, 1.0), x, torch.tensor([0]))
    raises_like_cpu(lambda a, i, v: a.index_fill(1, i, v), x, torch.tensor([0]), torch.ones(2))


# ----- index_reduce -------------------------------------------------------------------------------------

@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_index_reduce(reduce, include_self, dtype):
    x = rand(5, 3, dtype=dtype)
    idx = torch.tensor([0, 4, 0, 2, 0, 4])
    for dim, src in [(0, rand(6, 3, dtype=dtype, seed=2)), (1, rand(5, 6, dtype=dtype, seed=4)),
                     (-1, rand(5, 6, dtype=dtype, seed=4))]:
        i = idx if dim == 0 else idx % 3
        check(lambda a, j, s: a.index_reduce(dim, j, s, reduce, include_self=include_self), x, i, src, dtype=dtype)
        check(lambda a, j, s: a.clone().index_reduce_(dim, j, s, reduce, include_self=include_self), x, i, src,
              dtype=dtype)
    check(lambda a, j, s: a.T.index_reduce(0, j, s, reduce, include_self=include_self), x, idx % 3,
          rand(6, 5, dtype=dtype), dtype=dtype)  # non-contiguous self


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
def test_index_reduce_nan_inf_empty(reduce):
    x = torch.tensor([[1.0, NAN], [INF, 2.0], [-INF, 0.5]])
    src = torch.tensor([[NAN, 1.0], [3.0, INF], [-1.0, -INF], [2.0, 2.0]])
    idx = torch.tensor([0, 1, 1, 2])
    for include_self in (True, False):
        check(lambda a, j, s: a.index_reduce(0, j, s, reduce, include_self=include_self), x, idx, src)
    check(lambda a, j, s: a.index_reduce(0, j, s, reduce), x, idx[:0], src[:0])


def test_index_reduce_integer_mean_floors():
    x = torch.tensor([[-7, 2], [3, -4], [5, 6]])
    src = torch.tensor([[7, 7], [-2, 3], [1, 1]])
    for include_self in (True, False):
        check(lambda a, j, s: a.index_reduce(0, j, s, "mean", include_self=include_self), x,
              torch.tensor([0, 0, 2]), src)


def test_index_reduce_errors():
    x = torch.ones(3, 2)
    raises_like_cpu(lambda a, j, s: a.index_reduce(0, j, s, "amax"), x, torch.tensor([3]), torch.ones(1, 2))
    raises_like_cpu(lambda a, j, s: a.index_reduce(0, j, s, "amax"), x, torch.tensor([-1]), torch.ones(1, 2))
    raises_like_cpu(lambda a, j, s: a.index_reduce(0, j, s, "sum"), x, torch.tensor([0]), torch.ones(1, 2))
    raises_like_cpu(lambda a, j, s: a.index_reduce(0, j, s, "prod"), x, torch.tensor([0]), torch.ones(1, 3))


# ----- count_nonzero / aminmax --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.complex64])
def test_count_nonzero(dtype):
    x = rand(4, 5, 3).to(dtype) if dtype != torch.bool else rand(4, 5, 3) > 0
    x = torch.where(rand(4, 5, 3, seed=1) > 0.3, x, torch.zeros((), dtype=dtype))
    if dtype == torch.complex64:
        x = x + 1j * (rand(4, 5, 3, seed=3) > 1).to(torch.float32)
    for dim in (None, 0, -1, (0, 2), ()):
        check(lambda a: torch.count_nonzero(a, dim=dim), x)
    check(lambda a: torch.count_nonzero(a.transpose(0, 2), dim=1), x)
    check(lambda a: torch.count_nonzero(a), torch.zeros(0, 3, dtype=dtype))
    check(lambda a: torch.count_nonzero(a), torch.tensor([NAN, 0.0, INF, -0.0]).to(dtype if dtype.is_floating_point else torch.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int32, torch.uint8, torch.bool])
def test_aminmax(dtype):
    x = rand(4, 7, dtype=torch.float32) * 10
    x = (x > 0) if dtype == torch.bool else x.to(dtype)
    check(lambda a: torch.aminmax(a), x)
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            check(lambda a: torch.aminmax(a, dim=dim, keepdim=keepdim), x)
    check(lambda a: torch.aminmax(a.T, dim=0), x)
    check(lambda a: torch.aminmax(a, dim=0), x[:, :0])
    check(lambda a: torch.aminmax(a, dim=0), torch.tensor(3).to(dtype))


def test_aminmax_nan_inf_and_errors():
    x = torch.tensor([[1.0, NAN, -INF], [INF, 2.0, 3.0]])
    check(lambda a: torch.aminmax(a), x)
    check(lambda a: torch.aminmax(a, dim=1), x)
    check(lambda a: torch.aminmax(a, dim=0), x)
    raises_like_cpu(lambda a: torch.aminmax(a), torch.zeros(0))
    raises_like_cpu(lambda a: torch.aminmax(a, dim=1), torch.zeros(2, 0))
    raises_like_cpu(lambda a: torch.aminmax(a, dim=2), torch.zeros(2, 3))


# ----- torch.compile -------------------------------------------------------------------------------------

def test_new_index_ops_in_compiled_graph():
    torch._dynamo.reset()

    def f(seq, v, x, i):
        pos = torch.searchsorted(seq, v)
        return pos, torch.take(x, i), x.index_fill(1, i % 4, -1.0), torch.aminmax(x, dim=0), torch.count_nonzero(x > 0, dim=1)

    args = (torch.sort(rand(9)).values, rand(6), rand(3, 4), torch.tensor([0, 5, -1]))
    before = fallbacks()
    got = torch.compile(f, backend="tpu", fullgraph=True)(*[a.to(DEV) for a in args])
    want = f(*args)
    torch.testing.assert_close(tuple(torch.utils._pytree.tree_map(lambda t: t.cpu(), got)), want)
    assert fallbacks() == before, fallbacks()
