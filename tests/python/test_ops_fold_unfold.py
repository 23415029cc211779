"""im2col / col2im (nn.Unfold / nn.Fold), unfold_backward (Tensor.unfold's gradient) and
channel_shuffle on tpu against PyTorch on the CPU."""
import pytest
import torch
import torch.nn.functional as F

from helpers import DEV, rand

NAN, INF = float("nan"), float("inf")


def run(f, x, device, grad):
    xs = x.detach().clone().to(device).requires_grad_(grad)
    out = f(xs)
    if not grad:
        return [out]
    up = rand(*out.shape, seed=5).to(out.dtype).to(device)
    (out * up).sum().backward()
    return [out, xs.grad]


def check(f, x, grad=True, **kw):
    got, want = run(f, x, DEV, grad), run(f, x, "cpu", grad)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.detach().cpu(), w.detach(), equal_nan=True, **kw)


UNFOLD = [dict(kernel_size=2), dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3)),
          dict(kernel_size=3, padding=1), dict(kernel_size=(1, 4), stride=(3, 1)), dict(kernel_size=(3, 2), dilation=2)]


@pytest.mark.parametrize("kw", UNFOLD)
@pytest.mark.parametrize("shape", [(2, 3, 9, 8), (3, 7, 5), (1, 1, 6, 6)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_unfold_forward_backward(kw, shape, dtype, no_fallbacks):
    x = rand(*shape, dtype=dtype)
    x.view(-1)[3], x.view(-1)[-1] = NAN, INF
    check(lambda t: F.unfold(t, **kw), x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.bool, torch.complex64])
def test_unfold_other_dtypes(dtype, no_fallbacks):
    x = (rand(2, 3, 6, 5) * 4).to(dtype)
    check(lambda t: F.unfold(t, (2, 3), padding=1, stride=(1, 2)), x, grad=False)


def test_unfold_non_contiguous_and_empty(no_fallbacks):
    check(lambda t: F.unfold(t.transpose(2, 3), 2, stride=2), rand(2, 3, 8, 6))
    check(lambda t: F.unfold(t, 2), rand(0, 3, 4, 4))


FOLD = [(dict(output_size=(4, 5), kernel_size=2), (2, 3 * 4, 12)),
        (dict(output_size=(7, 8), kernel_size=(2, 3), dilation=(2, 1), padding=(1, 1), stride=(2, 2)), (2, 18, 16)),
        (dict(output_size=(5, 5), kernel_size=3, padding=1), (9, 25)),
        (dict(output_size=(6, 3), kernel_size=(4, 1), stride=(1, 2)), (1, 8, 6))]


@pytest.mark.parametrize("kw,shape", FOLD)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fold_forward_backward(kw, shape, dtype, no_fallbacks):
    x = rand(*shape, dtype=dtype)
    x.view(-1)[0], x.view(-1)[5] = NAN, -INF
    check(lambda t: F.fold(t, **kw), x)


def test_fold_bfloat16_and_empty(no_fallbacks):
    x = rand(2, 12, 12, dtype=torch.bfloat16)
    got = F.fold(x.to(DEV), (4, 5), 2).cpu()
    # The CPU adds the overlapping columns in bfloat16 (one rounding per add); we add in float32
    # and round once: compare with the float32 sum rounded to bfloat16.
    want = F.fold(x.float(), (4, 5), 2).bfloat16()
    torch.testing.assert_close(got, want)
    check(lambda t: F.fold(t, (4, 5), 2), rand(0, 12, 12))


def test_fold_nan_stays_in_its_windows(no_fallbacks):
    x = torch.zeros(1, 4, 16)
    x[0, 0, 0] = NAN  # column 0, kernel offset (0, 0): output (0, 0) only
    out = F.fold(x.to(DEV), (5, 5), 2).cpu()
    assert torch.isnan(out[0, 0, 0, 0]) and torch.isnan(out).sum() == 1


@pytest.mark.parametrize("shape,dim,size,step", [((4, 9, 3), 1, 3, 2), ((10,), 0, 4, 1), ((6, 5), 0, 2, 3),
                                                 ((3, 8), -1, 8, 1), ((2, 7, 2), 1, 1, 1), ((), 0, 1, 1),
                                                 ((3, 50, 2), 1, 20, 3), ((45,), 0, 40, 1), ((2, 30), 1, 17, 17)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_tensor_unfold_backward(shape, dim, size, step, dtype, no_fallbacks):
    x = rand(*shape, dtype=dtype) if shape else torch.tensor(1.5, dtype=dtype)
    if dtype != torch.bfloat16:
        check(lambda t: t.unfold(dim, size, step), x)
        return
    # Overlapping windows add up to `size` gradients: the CPU rounds each add to bfloat16, we add
    # in float32 and round once. Compare with the float32 sums rounded to bfloat16.
    grads = []
    for t, dev in ((x, DEV), (x.float(), "cpu")):
        t = t.to(dev).requires_grad_()
        out = t.unfold(dim, size, step)
        out.backward(rand(*out.shape, seed=5).bfloat16().to(out.dtype).to(dev))
        grads.append(t.grad.cpu())
    torch.testing.assert_close(grads[0], grads[1].bfloat16())


def test_unfold_backward_direct(no_fallbacks):
    g = rand(4, 3, 5)  # windows of size 5 with step 2 over a dim of 9 -> 3 windows
    got = torch.ops.aten.unfold_backward(g.to(DEV), [4, 9], 1, 5, 2).cpu()
    torch.testing.assert_close(got, torch.ops.aten.unfold_backward(g, [4, 9], 1, 5, 2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool])
@pytest.mark.parametrize("shape,groups", [((2, 6, 3, 2), 3), ((1, 4, 5), 2), ((3, 6, 2, 2, 2), 6), ((0, 4, 1), 4)])
def test_channel_shuffle(shape, groups, dtype, no_fallbacks):
    x = (rand(*shape) * 5).to(dtype)
    check(lambda t: F.channel_shuffle(t, groups), x, grad=False)
    strided = x.transpose(0, -1).contiguous().transpose(0, -1)  # same shape, not contiguous
    check(lambda t: F.channel_shuffle(t, groups), strided, grad=False)


@pytest.mark.parametrize("call", [
    lambda d: F.channel_shuffle(torch.zeros(1, 5, 2, device=d), 2),
    lambda d: F.channel_shuffle(torch.zeros(1, 4, 2, device=d), 0),
    lambda d: torch.channel_shuffle(torch.zeros(4, device=d), 2),
    lambda d: F.unfold(torch.zeros(1, 2, 3, 3, device=d), 5),
    lambda d: F.unfold(torch.zeros(2, 3, device=d), 1),
    lambda d: F.fold(torch.zeros(1, 5, 4, device=d), (3, 3), 2),
    lambda d: F.fold(torch.zeros(1, 4, 5, device=d), (3, 3), 2),
    lambda d: F.unfold(torch.zeros(2, 0, 4, 4, device=d), 2),
    lambda d: F.unfold(torch.zeros(1, 1, 3, 3, dtype=torch.int64, device=d), 2),
    lambda d: F.fold(torch.zeros(1, 4, 4, dtype=torch.int32, device=d), (3, 3), 2),
])
def test_invalid_calls_raise_like_cpu(call):
    with pytest.raises(Exception) as cpu_err:
        call("cpu")
    with pytest.raises(type(cpu_err.value)):
        call(DEV)


@pytest.mark.parametrize("dtype", [torch.bool, torch.complex64])
def test_fold_other_dtypes(dtype, no_fallbacks):
    x = (rand(1, 8, 6) * 3).to(dtype)
    check(lambda t: F.fold(t, (3, 4), 2), x, grad=False)
