"""Reflection and replication padding (1d/2d/3d) and their backward vs PyTorch on the CPU:
asymmetric, zero and negative (cropping) amounts, odd extents, batched and unbatched inputs,
non-contiguous inputs, NaN/inf values, float32/bfloat16/float64 and integer dtypes, gradients,
bad padding, and a torch.compile graph."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu

from helpers import DEV

NAN, INF = float("nan"), float("inf")


def fallbacks():
    return dict(torch_tpu.metrics.counters()["fallbacks"])


@pytest.fixture
def no_fallbacks():
    before = fallbacks()
    yield
    assert fallbacks() == before, fallbacks()


def data(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if not dtype.is_floating_point:
        return torch.randint(-50, 50, shape, generator=g).to(dtype)
    x = torch.randn(shape, generator=g)
    flat = x.view(-1)
    for i, v in enumerate([NAN, INF, -INF, -0.0][: flat.numel()]):
        flat[-1 - 3 * i] = v
    return x.to(dtype)


def close(got, exp):
    assert got.dtype == exp.dtype and got.shape == exp.shape, (got.dtype, exp.dtype, got.shape, exp.shape)
    torch.testing.assert_close(got.cpu(), exp, equal_nan=True)


# (input shape, padding) per spatial rank; shapes are unbatched and batched.
CASES = {
    1: [((3, 9), (2, 3)), ((2, 3, 9), (0, 4)), ((2, 3, 9), (3, 0)), ((2, 3, 9), (-2, 3)), ((1, 2, 5), (4, -1)),
        ((2, 1, 9), (-3, -2))],
    2: [((3, 5, 7), (1, 2, 3, 1)), ((2, 3, 5, 7), (2, 2, 0, 4)), ((2, 3, 5, 7), (-1, 3, 2, -2)), ((1, 1, 4, 3), (2, 2, 3, 3))],
    3: [((2, 4, 5, 6), (1, 2, 0, 3, 2, 1)), ((1, 2, 3, 5, 7), (2, 1, 3, 1, 1, 2)), ((1, 2, 4, 5, 6), (-1, 2, 1, -1, 0, 3))],
}
MODES = ["reflect", "replicate"]


def cases():
    for r, items in CASES.items():
        for i, (shape, pad) in enumerate(items):
            yield pytest.param(shape, pad, id=f"{r}d-{i}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.int32])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,pad", list(cases()))
def test_pad_forward(shape, pad, mode, dtype, no_fallbacks):
    x = data(shape, dtype)
    close(F.pad(x.to(DEV), pad, mode=mode), F.pad(x, pad, mode=mode))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,pad", list(cases()))
def test_pad_non_contiguous(shape, pad, mode, no_fallbacks):
    rev = list(reversed(range(len(shape))))
    base = data(tuple(reversed(shape)), seed=1)  # transposed views of it have `shape`
    close(F.pad(base.to(DEV).permute(*rev), pad, mode=mode), F.pad(base.permute(*rev), pad, mode=mode))
    y = data(shape[:-1] + (2 * shape[-1],), seed=2)
    close(F.pad(y.to(DEV)[..., ::2], pad, mode=mode), F.pad(y[..., ::2], pad, mode=mode))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,pad", list(cases()))
def test_pad_backward(shape, pad, mode, dtype, no_fallbacks):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(shape, generator=g).to(dtype)
    xc = x.clone().requires_grad_()
    yc = F.pad(xc, pad, mode=mode)
    r = torch.randn(yc.shape, generator=g).to(dtype)
    (yc * r).sum().backward()
    xd = x.to(DEV).requires_grad_()
    yd = F.pad(xd, pad, mode=mode)
    (yd * r.to(DEV)).sum().backward()
    close(yd.detach(), yc.detach())
    if dtype == torch.bfloat16:
        # The CPU accumulates the folded borders in bf16, we in float32 (rounded once).
        xf = x.float().requires_grad_()
        (F.pad(xf, pad, mode=mode) * r.float()).sum().backward()
        close(xd.grad, xf.grad.to(dtype))
    else:
        close(xd.grad, xc.grad)


def test_pad_backward_ops_direct(no_fallbacks):
    x = data((2, 3, 6, 7))
    g = torch.randn(2, 3, 9, 12)
    pad = [2, 3, 1, 2]
    for op in [torch.ops.aten.reflection_pad2d_backward, torch.ops.aten.replication_pad2d_backward]:
        close(op(g.to(DEV), x.to(DEV), pad), op(g, x, pad))  # NaN in self does not matter


def test_pad_zero_batch_and_out(no_fallbacks):
    x = torch.empty(0, 3, 5)
    for mode in MODES:
        close(F.pad(x.to(DEV), (2, 1), mode=mode), F.pad(x, (2, 1), mode=mode))
    x = data((2, 7))
    out = torch.empty(2, 10)
    outd = out.to(DEV)
    torch._C._nn.reflection_pad1d(x.to(DEV), [1, 2], out=outd)
    torch._C._nn.reflection_pad1d(x, [1, 2], out=out)
    close(outd, out)


def test_pad_modules_and_conv_stack(no_fallbacks):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.ReflectionPad2d((1, 2, 2, 1)), torch.nn.Conv2d(3, 4, 3),
                                torch.nn.ReplicationPad2d(1), torch.nn.ReLU(), torch.nn.ReplicationPad3d((1, 0, 0, 1, 1, 1)))
    x = torch.randn(2, 3, 8, 9)
    close(model.to(DEV)(x.to(DEV)).detach(), model.cpu()(x).detach())


@pytest.mark.parametrize("mode", MODES)
def test_bad_padding_raises_like_cpu(mode):
    x = torch.randn(2, 3, 4)
    bad = [(4, 0), (0, 5)] if mode == "reflect" else [(-5, 0)]
    for pad in bad:
        with pytest.raises(RuntimeError) as cpu_err:
            F.pad(x, pad, mode=mode)
        with pytest.raises(type(cpu_err.value)):
            F.pad(x.to(DEV), pad, mode=mode)


def test_pad_in_compiled_graph(no_fallbacks):
    import torch._dynamo
    torch._dynamo.reset()

    def f(x):
        a = F.pad(x, (1, 2, 2, 1), mode="reflect")
        b = F.pad(x, (3, 0, 1, 1), mode="replicate")
        return a.sum(1), b * 2, F.pad(x[0], (2, 2), mode="reflect")

    x = data((2, 3, 5, 6), seed=4)
    got = torch.compile(f, backend="tpu", fullgraph=True)(x.to(DEV))
    for g, e in zip(got, f(x)):
        close(g, e)
    torch._dynamo.reset()


def test_pad_training_step_compiled(no_fallbacks):
    import torch._dynamo
    torch._dynamo.reset()

    def f(x, w):
        y = F.pad(x * w, (2, 1, 1, 2), mode="reflect")
        return (F.pad(y, (1, 1, 1, 1), mode="replicate") ** 2).mean()

    x = torch.randn(2, 3, 5, 6)
    w = torch.randn(6)
    wc = w.clone().requires_grad_()
    f(x, wc).backward()
    wd = w.to(DEV).requires_grad_()
    loss = torch.compile(f, backend="tpu", fullgraph=True)(x.to(DEV), wd)
    loss.backward()
    torch.testing.assert_close(loss.detach().cpu(), f(x, w))
    torch.testing.assert_close(wd.grad.cpu(), wc.grad)
    torch._dynamo.reset()
