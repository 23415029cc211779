"""torch.optim.Adagrad(fused=True) on tpu: one _fused_adagrad_ module per step, the same values as
the CPU's unfused optimizer."""
import copy

import pytest
import torch
import torch_tpu

from helpers import DEV, fallbacks


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def fused_runs():
    return sum(v for k, v in torch_tpu.metrics.counters()["ops"].items() if k.startswith("_fused_adagrad"))


CONFIGS = {
    "plain": dict(lr=0.05),
    "decay_wd": dict(lr=0.05, lr_decay=0.01, weight_decay=0.02, initial_accumulator_value=0.1),
    "maximize_eps": dict(lr=0.02, eps=1e-3, maximize=True),
    "tensor_lr": dict(lr=torch.tensor(0.05)),
}


@pytest.mark.strict_eager
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_fused_adagrad_matches_cpu_unfused(name):
    steps = 20
    ref = make_model()
    dev = copy.deepcopy(ref).to(DEV)
    kw = CONFIGS[name]
    ro = torch.optim.Adagrad(ref.parameters(), foreach=False, **kw)
    do = torch.optim.Adagrad(dev.parameters(), fused=True, **kw)
    torch.manual_seed(1)
    data = [(torch.randn(6, 8), torch.randn(6, 4)) for _ in range(steps)]
    before = fallbacks()
    runs_before = fused_runs()
    for model, opt, device in ((ref, ro, "cpu"), (dev, do, DEV)):
        for x, y in data:
            opt.zero_grad()
            ((model(x.to(device)) - y.to(device)) ** 2).mean().backward()
            opt.step()
    assert fallbacks() == before
    assert fused_runs() - runs_before == steps  # one launch per step for all parameters
    # 20 steps of the fused kernel against PyTorch's reference loop: 1e-6 relative (the brief).
    for p, q in zip(dev.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-6, atol=1e-7)
    for rp, dp in zip(ref.parameters(), dev.parameters()):
        torch.testing.assert_close(do.state[dp]["sum"].cpu(), ro.state[rp]["sum"], rtol=1e-6, atol=1e-7)
        assert float(do.state[dp]["step"]) == steps


@pytest.mark.parametrize("found", [0.0, 1.0])
def test_fused_adagrad_grad_scale_and_found_inf(found):
    """The AMP path: grads unscaled in place; with found_inf == 1 nothing is written."""
    torch.manual_seed(2)
    params = [torch.randn(5, 3), torch.randn(4)]
    grads = [torch.randn(5, 3), torch.randn(4)]
    sums = [torch.rand(5, 3), torch.rand(4)]
    steps = [torch.tensor(3.0), torch.tensor(3.0)]
    cpu = [[t.clone() for t in lst] for lst in (params, grads, sums, steps)]
    dev = [[t.clone().to(DEV) for t in lst] for lst in (params, grads, sums, steps)]
    before = fallbacks()
    for lists, device in ((cpu, "cpu"), (dev, DEV)):
        torch._fused_adagrad_(*lists, lr=0.1, lr_decay=0.01, weight_decay=0.01, eps=1e-10, maximize=False,
                              grad_scale=torch.tensor(4.0, device=device),
                              found_inf=torch.tensor(found, device=device))
    assert fallbacks() == before
    for c_list, d_list in zip(cpu, dev):
        for c_t, d_t in zip(c_list, d_list):
            torch.testing.assert_close(d_t.cpu(), c_t)


def test_fused_adagrad_bfloat16_params():
    torch.manual_seed(3)
    p = [torch.randn(7, 5).bfloat16()]
    g = [torch.randn(7, 5).bfloat16()]
    s = [torch.zeros(7, 5).bfloat16()]
    st = [torch.tensor(1.0)]
    cpu = [[t.clone() for t in lst] for lst in (p, g, s, st)]
    dev = [[t.clone().to(DEV) for t in lst] for lst in (p, g, s, st)]
    before = fallbacks()
    for lists in (cpu, dev):
        torch._fused_adagrad_(*lists, lr=0.1, lr_decay=0.0, weight_decay=0.0, eps=1e-10, maximize=False)
    assert fallbacks() == before
    torch.testing.assert_close(dev[0][0].cpu(), cpu[0][0])
    torch.testing.assert_close(dev[2][0].cpu(), cpu[2][0])


def test_fused_adagrad_mismatched_lists_raise():
    p = [torch.randn(3, device=DEV)]
    with pytest.raises((ValueError, RuntimeError)):
        torch._fused_adagrad_(p, [torch.randn(4, device=DEV)], [torch.zeros(3, device=DEV)],
                              [torch.tensor(1.0, device=DEV)], lr=0.1, lr_decay=0.0, weight_decay=0.0, eps=1e-10,
                              maximize=False)
