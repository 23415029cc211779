import os
import subprocess
import sys
import pytest
import torch
import torch_tpu
import torch.nn.functional as F

from helpers import DEV, rand


# Every test here must run without a CPU fallback (fixture in conftest.py).
pytestmark = pytest.mark.usefixtures("no_fallbacks")


def same(out, ref, **kw):
    assert out.device.type == DEV
    assert out.dtype == ref.dtype and out.shape == ref.shape
    kw = kw or dict(atol=0, rtol=0)
    torch.testing.assert_close(out.cpu(), ref, **kw)


DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(dtype, dim):
    x = rand(4, 5, 3, dtype=dtype, low=-50, high=50)
    idx = torch.tensor([0, 2, 2, 1, 0])  # PyTorch rejects negative index_select indices
    same(torch.index_select(x.to(DEV), dim, idx.to(DEV)), torch.index_select(x, dim, idx))
    same(torch.index_select(x.to(DEV).transpose(0, 2), dim, idx.to(DEV)),
         torch.index_select(x.transpose(0, 2), dim, idx))
    i32 = torch.tensor([1, 0], dtype=torch.int32)
    same(torch.index_select(x.to(DEV), dim, i32.to(DEV)), torch.index_select(x, dim, i32))
    same(torch.index_select(x.to(DEV), dim, torch.tensor(1, device=DEV)), torch.index_select(x, dim, torch.tensor(1)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_scatter(dtype, dim):
    x = rand(4, 5, dtype=dtype, low=-50, high=50)
    size = x.shape[dim]
    idx = torch.randint(0, size, (3, 4))  # gather/scatter reject negatives in PyTorch
    same(torch.gather(x.to(DEV), dim, idx.to(DEV)), torch.gather(x, dim, idx))
    # scatter without duplicate targets (the winner of duplicates is unspecified)
    perm = torch.stack([torch.randperm(size)[:3] for _ in range(4)], 1 if dim == 0 else 0)
    if dim != 0:
        perm = torch.stack([torch.randperm(size)[:3] for _ in range(3)], 0)
    src = rand(4, 5, dtype=dtype, seed=1, low=-50, high=50)
    same(torch.scatter(x.to(DEV), dim, perm.to(DEV), src.to(DEV)), torch.scatter(x, dim, perm, src))
    v = True if dtype == torch.bool else 7
    same(torch.scatter(x.to(DEV), dim, perm.to(DEV), v), torch.scatter(x, dim, perm, v))
    if dtype != torch.bool:
        same(torch.scatter_add(x.to(DEV), dim, idx.remainder(size).to(DEV), src.to(DEV)),
             torch.scatter_add(x, dim, idx.remainder(size), src),
             **({} if dtype != torch.bfloat16 else dict(atol=2e-2, rtol=2e-2)))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    x = torch.randn(5, 4)
    idx = torch.randint(0, 5, (6, 4))
    src = torch.randn(6, 4)
    same(torch.scatter_reduce(x.to(DEV), 0, idx.to(DEV), src.to(DEV), reduce, include_self=include_self),
         torch.scatter_reduce(x, 0, idx, src, reduce, include_self=include_self), atol=1e-5, rtol=1e-5)


def test_scatter_reduce_legacy_and_inplace():
    x, src = torch.randn(5, 4), torch.randn(6, 4)
    idx = torch.randint(0, 5, (6, 4))
    for r in ["add", "multiply"]:
        same(torch.scatter(x.to(DEV), 0, idx.to(DEV), src.to(DEV), reduce=r),
             torch.scatter(x, 0, idx, src, reduce=r), atol=1e-5, rtol=1e-5)
    t = x.to(DEV)
    t.scatter_add_(0, idx.to(DEV), src.to(DEV))
    same(t, x.scatter_add(0, idx, src), atol=1e-5, rtol=1e-5)
    t = x.to(DEV)
    t.scatter_(1, torch.tensor([[0], [1], [2], [3], [0]], device=DEV), 2.5)
    same(t, x.scatter(1, torch.tensor([[0], [1], [2], [3], [0]]), 2.5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_advanced_index(dtype):
    x = rand(4, 5, 6, dtype=dtype, low=-50, high=50)
    t = x.to(DEV)
    i = torch.tensor([[0, 1], [-1, 2]])
    j = torch.tensor([3, -2])
    ti, tj = i.to(DEV), j.to(DEV)
    same(t[ti], x[i])
    same(t[ti, tj], x[i, j])            # broadcast, consecutive at front
    same(t[:, ti, tj], x[:, i, j])      # consecutive in the middle: stays in place
    same(t[ti, :, tj], x[i, :, j])      # separated: broadcast dims go first
    same(t[:, :, tj], x[:, :, j])
    same(t[1:3, tj], x[1:3, j])
    same(t.transpose(0, 2)[tj, 1], x.transpose(0, 2)[j, 1])
    same(t[..., tj], x[..., j])
    same(t[ti, None, tj], x[i, None, j])


def test_bool_mask_index_on_device(no_fallbacks):
    """x[mask] with a tpu mask: its coordinates through nonzero (one host sync), then a gather."""
    x = torch.randn(4, 5, 3)
    t = x.to(DEV)
    same(t[t > 0], x[x > 0])
    m = torch.rand(4, 5) > 0.5
    same(t[m.to(DEV)], x[m])                            # a mask over the leading dims
    same(t[:, m[0].to(DEV)], x[:, m[0]])                # after a full slice
    same(t[torch.zeros(4, 5, dtype=torch.bool, device=DEV)], x[torch.zeros(4, 5, dtype=torch.bool)])  # empty
    same(t[m.to(DEV).to(torch.uint8).bool()], x[m])
    y, ty = x.clone(), t.clone()
    v = torch.randn(int(m.sum()), 3)
    y[m] = v
    ty[m.to(DEV)] = v.to(DEV)                           # a tensor of values: coordinates too
    same(ty, y)
    y[m] = -1.0
    ty[m.to(DEV)] = -1.0                                # a single value: a select, no host sync
    same(ty, y)


def test_bool_mask_of_wrong_shape_raises():
    t = torch.randn(4, 5, device=DEV)
    for mask in (torch.ones(3, 5, dtype=torch.bool), torch.ones(4, 5, 2, dtype=torch.bool)):
        with pytest.raises(IndexError, match="shape of the mask|too many indices"):
            t[mask.to(DEV)]
        with pytest.raises(IndexError, match="shape of the mask|too many indices"):
            t[mask]  # a CPU mask is checked the same way


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(accumulate):
    x = torch.randn(4, 5, 6)
    i = torch.tensor([0, 2, -1])
    j = torch.tensor([1, 3, 4])
    for index, vshape in [((i,), (3, 5, 6)), ((i, j), (3, 6)), ((slice(None), i, j), (4, 3)),
                          ((i, slice(None), j), (3, 5)), ((i,), (6,)), ((i, j), ())]:
        v = torch.randn(vshape)
        dev_index = tuple(k.to(DEV) if isinstance(k, torch.Tensor) else k for k in index)
        t = x.to(DEV)
        t.index_put_(tuple(k for k in dev_index if isinstance(k, torch.Tensor)), v.to(DEV), accumulate) \
            if all(isinstance(k, torch.Tensor) for k in index) else t.__setitem__(dev_index, v.to(DEV))
        r = x.clone()
        r.index_put_(tuple(index), v, accumulate) if all(isinstance(k, torch.Tensor) for k in index) \
            else r.__setitem__(index, v)
        same(t, r)
    # functional form and duplicates with accumulate
    dup = torch.tensor([1, 1, 2, 1])
    vals = torch.randn(4, 5, 6)
    same(torch.index_put(x.to(DEV), (dup.to(DEV),), vals.to(DEV), accumulate=True),
         torch.index_put(x, (dup,), vals, accumulate=True), atol=1e-5, rtol=1e-5)


def test_index_put_mask_scalar():
    x = torch.randn(4, 5)
    t = x.to(DEV)
    t[t > 0] = 0.5
    r = x.clone()
    r[r > 0] = 0.5
    same(t, r)
    t = x.to(DEV)
    m = torch.tensor([True, False, True, False])
    t[m.to(DEV)] = torch.tensor(2.0, device=DEV)
    r = x.clone()
    r[m] = 2.0
    same(t, r)


def test_index_backward():
    x = torch.randn(5, 4)
    i = torch.tensor([0, 2, 2, -1])
    xt = x.to(DEV).requires_grad_()
    xc = x.clone().requires_grad_()
    g = torch.randn(4, 4)
    xt[i.to(DEV)].backward(g.to(DEV))
    xc[i].backward(g)
    same(xt.grad, xc.grad, atol=1e-6, rtol=1e-6)
    gi = torch.tensor([[0, 0], [1, 3], [2, 2], [3, 1], [0, 3]])
    xt.grad = None
    xc.grad = None
    torch.gather(xt, 1, gi.to(DEV)).backward(g[:, :2].repeat(2, 1)[:5].to(DEV))  # scatter_add backward
    torch.gather(xc, 1, gi).backward(g[:, :2].repeat(2, 1)[:5])
    same(xt.grad, xc.grad, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("padding_idx", [None, 1])
@pytest.mark.parametrize("scale", [False, True])
def test_embedding(padding_idx, scale):
    w = torch.randn(6, 3)
    idx = torch.tensor([[0, 1, 1], [5, 2, 1]])
    wt = w.to(DEV).requires_grad_()
    wc = w.clone().requires_grad_()
    yt = F.embedding(idx.to(DEV), wt, padding_idx=padding_idx, scale_grad_by_freq=scale)
    yc = F.embedding(idx, wc, padding_idx=padding_idx, scale_grad_by_freq=scale)
    same(yt, yc.detach())
    g = torch.randn(2, 3, 3)
    yt.backward(g.to(DEV))
    yc.backward(g)
    same(wt.grad, wc.grad, atol=1e-6, rtol=1e-6)
    emb = torch.nn.Embedding(10, 4)
    e2 = torch.nn.Embedding(10, 4).to(DEV)
    e2.load_state_dict(emb.state_dict())
    k = torch.tensor([3, 9, 0])
    same(e2(k.to(DEV)), emb(k).detach())


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_masked_scatter(dtype):
    x = rand(3, 4, dtype=dtype, low=-50, high=50)
    mask = torch.rand(3, 4) > 0.5
    src = rand(12, dtype=dtype, low=-50, high=50)
    same(x.to(DEV).masked_scatter(mask.to(DEV), src.to(DEV)), x.masked_scatter(mask, src))
    row = torch.tensor([True, False, True, True])  # broadcast mask
    same(x.to(DEV).masked_scatter(row.to(DEV), src.to(DEV)), x.masked_scatter(row, src))


OUT_OF_RANGE_CASES = {
    "index_select": lambda t, bad: t.index_select(0, bad),
    "index": lambda t, bad: t[bad],
    "gather": lambda t, bad: torch.gather(t, 0, bad),
    "index_put_": lambda t, bad: t.clone().index_put_((bad,), torch.tensor([10.0, 20.0], device=DEV)),
    "scatter": lambda t, bad: torch.scatter(t, 0, bad, torch.tensor([10.0, 20.0], device=DEV)),
    "embedding": lambda t, bad: torch.nn.functional.embedding(bad, t.reshape(5, 1)),
}


@pytest.mark.parametrize("case", sorted(OUT_OF_RANGE_CASES))
def test_out_of_range_index_raises_at_next_sync(case):
    # Checked on the device (an assertion flag per op), raised at the next host read like a
    # CUDA device-side assert: the op itself returns at once.
    t = torch.arange(5.0).to(DEV)
    bad = torch.tensor([7, 1], device=DEV)
    result = OUT_OF_RANGE_CASES[case](t, bad)
    # The CPU kernels' exception types: RuntimeError for gather/scatter, IndexError otherwise.
    expected = RuntimeError if case in ("gather", "scatter") else IndexError
    with pytest.raises(expected, match="index out of range for a dimension of size 5") as error:
        result.cpu()
    assert type(error.value) is expected
    # The error is reported once; the device keeps working.
    assert (t + 1).cpu().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_out_of_range_index_raises_at_the_op_with_launch_blocking():
    code = (
        "import torch, torch_tpu\n"
        "t = torch.arange(5.0, device='tpu')\n"
        "try:\n"
        "    t.index_select(0, torch.tensor([9], device='tpu'))\n"
        "except IndexError as e:\n"
        "    print('raised at the op:', e)\n"
    )
    env = dict(os.environ, TPU_LAUNCH_BLOCKING="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "raised at the op: index_select: index out of range" in out.stdout


def test_bad_inputs_raise():
    t = torch.zeros(3, 4, device=DEV)
    with pytest.raises((IndexError, RuntimeError)):
        t.index_select(2, torch.tensor([0], device=DEV))
    with pytest.raises((IndexError, RuntimeError, ValueError)):
        torch.gather(t, 0, torch.zeros(2, 2, 2, dtype=torch.long, device=DEV))
    with pytest.raises((IndexError, RuntimeError)):
        t[torch.tensor([0], device=DEV), torch.tensor([0], device=DEV), torch.tensor([0], device=DEV)]
    torch_tpu.metrics.reset()


def test_cpu_index_tensors_are_moved_to_the_device():
    # As on CUDA, indices may be CPU tensors (transformers does this): copied, not an error.
    x = torch.arange(20.0).reshape(4, 5)
    t = x.to(DEV)
    idx = torch.tensor([3, 0, 2])
    assert torch.equal(t[idx].cpu(), x[idx])
    assert torch.equal(t[:, idx].cpu(), x[:, idx])
    t[idx] = 0.0
    x[idx] = 0.0
    assert torch.equal(t.cpu(), x)
    mask = torch.tensor([True, False, True, False])
    assert torch.equal(t[mask].cpu(), x[mask])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_copy_and_index_add_match_cpu(dim, no_fallbacks):
    torch.manual_seed(0)
    x = torch.randn(5, 6, 7)
    x[0, 0, 0] = float("nan")
    size = x.shape[dim]
    index = torch.tensor([size - 1, 0, 2])
    src_shape = list(x.shape)
    src_shape[dim] = 3
    src = torch.randn(src_shape)
    src[-1, -1, -1] = float("inf")
    for f in (lambda a, i, s: a.index_copy(dim, i, s), lambda a, i, s: a.index_add(dim, i, s, alpha=2.5),
              lambda a, i, s: a.clone().index_copy_(dim, i, s)):
        torch.testing.assert_close(f(x.to("tpu"), index.to("tpu"), src.to("tpu")).cpu(), f(x, index, src),
                                   equal_nan=True)


def test_index_copy_out_of_range_raises_index_error():
    x = torch.zeros(4, 3, device="tpu")
    with pytest.raises(IndexError, match="out of range"):
        x.index_copy_(0, torch.tensor([1, -1], device="tpu"), torch.ones(2, 3, device="tpu"))
        torch.tpu.synchronize()
    y = torch.zeros(2, 3, device="tpu").index_copy(0, torch.tensor([1], device="tpu"), torch.ones(1, 3, device="tpu"))
    assert torch.equal(y.cpu(), torch.tensor([[0.0] * 3, [1.0] * 3]))  # the device stays usable


@pytest.mark.parametrize("dim,start,end,step", [(0, 1, 4, 1), (1, -5, None, 2), (2, 0, 7, 3), (-1, 2, 2, 1)])
def test_slice_scatter_matches_cpu(dim, start, end, step, no_fallbacks):
    x = torch.randn(5, 6, 7)
    x[0, 0, 0] = float("nan")
    src = torch.randn_like(x[(slice(None),) * (dim % 3) + (slice(start, end, step),)])
    ref = torch.slice_scatter(x, src, dim, start, end, step)
    got = torch.slice_scatter(x.to("tpu"), src.to("tpu"), dim, start, end, step)
    torch.testing.assert_close(got.cpu(), ref, equal_nan=True)


@pytest.mark.parametrize("dim,index", [(0, 2), (1, -1), (2, 0)])
def test_select_scatter_matches_cpu(dim, index, no_fallbacks):
    x = torch.randn(4, 5, 6)
    src = torch.randn_like(x.select(dim, index))
    torch.testing.assert_close(torch.select_scatter(x.to("tpu"), src.to("tpu"), dim, index).cpu(),
                               torch.select_scatter(x, src, dim, index))
