"""embedding_bag (sum / mean / max, offsets, include_last_offset, per_sample_weights,
padding_idx) and its gradients on tpu against PyTorch on the CPU."""
import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

from helpers import DEV, fallbacks, rand

NAN, INF = float("nan"), float("inf")


def run(device, weight, idx, offsets=None, psw=None, grad=True, **kw):
    w = weight.detach().clone().to(device)
    p = None if psw is None else psw.detach().clone().to(device)
    if grad:
        w.requires_grad_()
        if p is not None:
            p.requires_grad_()
    out = F.embedding_bag(idx.to(device), w, None if offsets is None else offsets.to(device),
                          per_sample_weights=p, **kw)
    res = [out]
    if grad:
        up = torch.randn(out.shape, generator=torch.Generator().manual_seed(5)).to(out.dtype).to(device)
        (out * up).sum().backward()
        res += [w.grad] + ([p.grad] if p is not None else [])
    return res


def check(weight, idx, offsets=None, psw=None, grad=True, tol=None, **kw):
    before = fallbacks()
    got = run(DEV, weight, idx, offsets, psw, grad, **kw)
    assert fallbacks() == before, fallbacks()
    want = run("cpu", weight, idx, offsets, psw, grad, **kw)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.detach().cpu(), w.detach(), equal_nan=True, **(tol or {}))


IDX = torch.tensor([1, 2, 4, 5, 4, 3, 2, 0, 9, 9, 7])
OFFS = torch.tensor([0, 2, 2, 5, 8])  # an empty bag, uneven bags


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 4, -1])
def test_embedding_bag_offsets(mode, padding_idx):
    w = rand(10, 3)
    check(w, IDX, OFFS, mode=mode, padding_idx=padding_idx)
    check(w, IDX, torch.cat([OFFS, torch.tensor([11])]), mode=mode, padding_idx=padding_idx, include_last_offset=True)
    check(w, IDX.int(), OFFS.int(), mode=mode, padding_idx=padding_idx)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_input(mode):
    check(rand(7, 5), torch.tensor([[0, 2, 6], [1, 1, 3], [6, 5, 4], [2, 2, 2]]), mode=mode)


def test_embedding_bag_per_sample_weights():
    w, psw = rand(10, 4), rand(11, seed=3)
    check(w, IDX, OFFS, psw=psw, mode="sum")
    check(w, IDX, OFFS, psw=psw, mode="sum", padding_idx=9)
    check(w, IDX, torch.cat([OFFS, torch.tensor([11])]), psw=psw, mode="sum", include_last_offset=True)


def test_embedding_bag_max_nan_inf_ties():
    w = torch.tensor([[1.0, NAN], [NAN, 2.0], [3.0, 3.0], [NAN, NAN], [-INF, -INF], [3.0, INF]])
    idx = torch.tensor([0, 1, 3, 2, 5, 2, 2, 4, 4, 1, 3, 4, 1])
    offs = torch.tensor([0, 5, 7, 9, 10])
    check(w, idx, offs, mode="max", grad=False)
    check(w, idx, offs, mode="max", padding_idx=4, grad=False)
    check(w, idx, offs, mode="sum", grad=False)
    check(w, idx, offs, mode="mean", grad=False)
    w2 = torch.tensor([[1.0, 2.0], [1.0, 5.0], [0.0, 5.0]])  # ties: the first entry keeps the gradient
    check(w2, torch.tensor([2, 1, 0, 1]), torch.tensor([0, 2]), mode="max")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
def test_embedding_bag_dtypes(dtype):
    w = rand(10, 3, dtype=dtype)
    # bf16 sums: the CPU adds in bf16 steps, we add in f32 and round once.
    tol = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else None
    for mode in ("sum", "mean", "max"):
        check(w, IDX, OFFS, mode=mode, tol=tol)


def test_embedding_bag_noncontiguous_and_empty():
    w = rand(4, 10).T  # [10, 4], non-contiguous
    check(w, IDX, OFFS, mode="mean")
    check(w, IDX[:0], torch.tensor([0, 0]), mode="sum")  # no indices
    check(w, IDX, torch.tensor([0]), mode="max")  # one bag


def test_embedding_bag_errors():
    w = rand(5, 2)
    for kw in [dict(input=torch.tensor([1, 2]), offsets=torch.tensor([0]), mode="mean",
                    per_sample_weights=torch.ones(2)),
               dict(input=torch.tensor([1.0, 2.0]), offsets=torch.tensor([0])),
               dict(input=torch.tensor([[1, 2]]), offsets=torch.tensor([0]))]:
        with pytest.raises(Exception) as cpu:
            F.embedding_bag(weight=w, **kw)
        dev = {k: v.to(DEV) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
        with pytest.raises(type(cpu.value)):
            F.embedding_bag(weight=w.to(DEV), **dev).cpu()


def test_embedding_bag_bad_index_raises_on_device():
    # The CPU raises RuntimeError at the op; the tpu asserts on the device and raises IndexError
    # at the next host read (like every device-side index check).
    w = rand(5, 2).to(DEV)
    out = F.embedding_bag(torch.tensor([1, 7], device=DEV), w, torch.tensor([0], device=DEV))
    with pytest.raises(IndexError, match="not in the valid range"):
        out.cpu()
    out = F.embedding_bag(torch.tensor([1, 2], device=DEV), w, torch.tensor([1], device=DEV))
    with pytest.raises(IndexError, match="offsets\\[0\\] has to be 0"):
        out.cpu()


def test_embedding_bag_module_and_compiled():
    torch._dynamo.reset()
    m = torch.nn.EmbeddingBag(10, 4, mode="mean")
    d = torch.nn.EmbeddingBag(10, 4, mode="mean")
    d.load_state_dict(m.state_dict())
    d.to(DEV)
    f = torch.compile(lambda mod, i, o: mod(i, o) * 2, backend="tpu", fullgraph=True)
    before = fallbacks()
    got = f(d, IDX.to(DEV), OFFS.to(DEV))
    assert fallbacks() == before, fallbacks()
    torch.testing.assert_close(got.cpu(), m(IDX, OFFS) * 2)
