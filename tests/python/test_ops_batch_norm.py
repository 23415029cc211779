"""Eager batch norm (native_batch_norm with in-place running statistics, and its backward) on
tpu against PyTorch on the CPU."""
import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

import helpers
from helpers import DEV, fallbacks

NAN, INF = float("nan"), float("inf")


def rand(*shape, dtype=torch.float32, seed=0):
    """Inputs off zero mean and unit variance, so normalisation has work to do."""
    return helpers.rand(*shape, dtype=dtype, seed=seed, scale=2.0, offset=0.5)


def no_fallback(fn):
    before = fallbacks()
    out = fn()
    assert fallbacks() == before, fallbacks()
    return out


def run_bn(x, weight, bias, rm, rv, training, momentum=0.1, eps=1e-5, device="cpu", grad=True):
    """F.batch_norm on `device`; returns output, running stats after, and the gradients."""
    to = lambda t: None if t is None else t.detach().clone().to(device)  # noqa: E731
    xs, w, b = to(x), to(weight), to(bias)
    r_m, r_v = to(rm), to(rv)
    leaves = [t for t in (xs, w, b) if t is not None and t.is_floating_point()]
    if grad:
        for t in leaves:
            t.requires_grad_()
    y = F.batch_norm(xs, r_m, r_v, w, b, training=training, momentum=momentum, eps=eps)
    grads = []
    if grad:
        g = torch.Generator().manual_seed(3)
        up = torch.randn(y.shape, generator=g).to(y.dtype).to(device)
        (y * up).sum().backward()
        grads = [t.grad for t in leaves]
    return [y, r_m, r_v] + grads


def compare(got, want, **kw):
    for g, w in zip(got, want):
        if w is None:
            assert g is None
            continue
        torch.testing.assert_close(g.detach().cpu(), w.detach(), equal_nan=True, **kw)


@pytest.mark.parametrize("shape", [(4, 3), (5, 3, 7), (2, 3, 4, 5), (2, 3, 2, 3, 3)])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_float32(shape, training, affine):
    c = shape[1]
    x = rand(*shape)
    w, b = (rand(c, seed=1), rand(c, seed=2)) if affine else (None, None)
    rm, rv = rand(c, seed=4), rand(c, seed=5).abs() + 0.5
    want = run_bn(x, w, b, rm, rv, training)
    got = no_fallback(lambda: run_bn(x, w, b, rm, rv, training, device=DEV))
    compare(got, want)


def test_batch_norm_without_running_stats():
    x = rand(6, 4, 5)
    want = run_bn(x, rand(4), rand(4, seed=1), None, None, True)
    got = no_fallback(lambda: run_bn(x, rand(4), rand(4, seed=1), None, None, True, device=DEV))
    compare(got, want)


def test_batch_norm_momentum_eps_and_noncontiguous():
    x = rand(2, 3, 5, 4).to(memory_format=torch.channels_last)
    for momentum, eps in [(0.0, 1e-3), (1.0, 0.5), (0.3, 1e-5)]:
        want = run_bn(x, rand(3), rand(3, seed=1), torch.zeros(3), torch.ones(3), True, momentum, eps)
        got = no_fallback(lambda: run_bn(x, rand(3), rand(3, seed=1), torch.zeros(3), torch.ones(3), True,
                                         momentum, eps, device=DEV))
        compare(got, want)
    xt = rand(5, 3).T  # (3, 5): channels are the non-contiguous dim 1
    compare(no_fallback(lambda: run_bn(xt, None, None, torch.zeros(5), torch.ones(5), True, device=DEV)),
            run_bn(xt, None, None, torch.zeros(5), torch.ones(5), True))


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_bfloat16(training):
    # bf16 activations with f32 parameters and statistics (autocast-style) and all-bf16.
    x = rand(4, 3, 6, dtype=torch.bfloat16)
    for pdtype in (torch.float32, torch.bfloat16):
        args = (rand(3).to(pdtype), rand(3, seed=1).to(pdtype), torch.zeros(3, dtype=pdtype),
                torch.ones(3, dtype=pdtype))
        want = run_bn(x, *args, training)
        got = no_fallback(lambda: run_bn(x, *args, training, device=DEV))
        # One bf16 rounding apart (the CPU rounds some intermediates to bf16; we compute in f32).
        compare(got, want, atol=3e-2, rtol=3e-2)


def test_batch_norm_float64():
    x = rand(4, 3, 5, dtype=torch.float64)
    want = run_bn(x, rand(3, dtype=torch.float64), None, torch.zeros(3, dtype=torch.float64),
                  torch.ones(3, dtype=torch.float64), True)
    got = no_fallback(lambda: run_bn(x, rand(3, dtype=torch.float64), None, torch.zeros(3, dtype=torch.float64),
                                     torch.ones(3, dtype=torch.float64), True, device=DEV))
    compare(got, want)


def test_batch_norm_nan_inf():
    x = rand(4, 3, 5)
    x[0, 0, 0] = NAN
    x[1, 1, 2] = INF
    x[2, 2, 1] = -INF
    want = run_bn(x, rand(3), rand(3, seed=1), torch.zeros(3), torch.ones(3), True, grad=False)
    got = no_fallback(lambda: run_bn(x, rand(3), rand(3, seed=1), torch.zeros(3), torch.ones(3), True,
                                     device=DEV, grad=False))
    compare(got, want)
    want = run_bn(x, None, None, torch.tensor([0.0, NAN, INF]), torch.tensor([1.0, 1.0, INF]), False, grad=False)
    got = no_fallback(lambda: run_bn(x, None, None, torch.tensor([0.0, NAN, INF]), torch.tensor([1.0, 1.0, INF]),
                                     False, device=DEV, grad=False))
    compare(got, want)


def test_batch_norm_empty_batch():
    x = torch.zeros(0, 3, 4)
    want = run_bn(x, None, None, torch.zeros(3), torch.ones(3), False, grad=False)
    got = no_fallback(lambda: run_bn(x, None, None, torch.zeros(3), torch.ones(3), False, device=DEV, grad=False))
    compare(got, want)


def test_batchnorm_module_training_steps():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    d = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    d.load_state_dict(m.state_dict())
    d.to(DEV)
    for step in range(3):
        x = rand(2, 3, 6, 6, seed=step)
        m(x).sum().backward()
        no_fallback(lambda: d(x.to(DEV)).sum().backward())
    for (name, a), (_, b) in zip(m.state_dict().items(), d.state_dict().items()):
        torch.testing.assert_close(b.cpu(), a, msg=name)
    for a, b in zip(m.parameters(), d.parameters()):
        torch.testing.assert_close(b.grad.cpu(), a.grad, rtol=1e-4, atol=1e-5)  # sums over 3 steps
    m.eval()
    d.eval()
    x = rand(2, 3, 6, 6, seed=9)
    torch.testing.assert_close(no_fallback(lambda: d(x.to(DEV))).cpu(), m(x))


def test_batch_norm_errors_match_cpu():
    x = rand(4, 3)
    for f in [lambda t: F.batch_norm(t, torch.zeros(2, device=t.device), torch.ones(2, device=t.device)),
              lambda t: F.batch_norm(t, None, None, training=False),
              lambda t: F.batch_norm(t[:1], None, None, training=True)]:
        with pytest.raises(Exception) as cpu:
            f(x)
        with pytest.raises(type(cpu.value)):
            f(x.to(DEV)).cpu()


def test_batchnorm_in_compiled_training_graph():
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = torch.nn.BatchNorm1d(5)
    d = torch.nn.BatchNorm1d(5)
    d.load_state_dict(m.state_dict())
    d.to(DEV)
    step = torch.compile(lambda mod, x: mod(x) * 2, backend="tpu", fullgraph=True)
    x = rand(8, 5, 3)
    torch.testing.assert_close(step(d, x.to(DEV)).cpu(), m(x) * 2)
    torch.testing.assert_close(d.running_mean.cpu(), m.running_mean)
    torch.testing.assert_close(d.running_var.cpu(), m.running_var)
