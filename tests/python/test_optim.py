import copy

import pytest
import torch
import torch_tpu
from helpers import DEV, executables_built


def base_name(op):
    name = op.split(".")[0]
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def lowered_fallbacks():
    rules = {r.split(".")[0] for r in torch_tpu._C._lowering_rules()}
    fb = torch_tpu.metrics.counters()["fallbacks"]
    return {k: v for k, v in fb.items() if base_name(k) in rules or k.startswith("_foreach")}


def foreach_fallbacks():
    return {k: v for k, v in torch_tpu.metrics.counters()["fallbacks"].items() if k.startswith("_foreach")}


@pytest.fixture(autouse=True)
def no_foreach_fallbacks():
    torch_tpu.metrics.reset()
    yield
    assert foreach_fallbacks() == {}


def lists(n=3, dtype=torch.float32):
    shapes = [(3, 4), (5,), (2, 2, 2)][:n]
    return [torch.randn(s).to(dtype) for s in shapes]


def to_dev(xs):
    return [x.to(DEV) for x in xs]


def check(outs, refs, dtype=torch.float32):
    kw = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.device.type == DEV
        torch.testing.assert_close(o.cpu(), r, **kw)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "minimum", "pow", "clamp_min", "clamp_max"])
def test_binary(dtype, op):
    a, b = lists(dtype=dtype), lists(dtype=dtype)
    if op == "pow":
        a = [x.abs() + 0.5 for x in a]
    f = getattr(torch, "_foreach_" + op)
    f_ = getattr(torch, "_foreach_" + op + "_")
    check(f(to_dev(a), 1.5), f(a, 1.5), dtype)                  # .Scalar
    check(f(to_dev(a), to_dev(b)), f(a, b), dtype)              # .List
    check(f(to_dev(a), [0.5, 2.0, -1.5]), f(a, [0.5, 2.0, -1.5]), dtype)  # .ScalarList
    if op in ("add", "sub"):
        check(f(to_dev(a), to_dev(b), alpha=0.3), f(a, b, alpha=0.3), dtype)
    if op in ("add", "mul", "div"):
        s = torch.tensor(0.7)
        check(f(to_dev(a), s.to(DEV)), f(a, s), dtype)          # .Tensor
    t = to_dev(a)
    f_(t, to_dev(b))
    f_(a, b)
    check(t, a, dtype)


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
def test_addc(op):
    a, b, c = lists(), lists(), [x.abs() + 0.5 for x in lists()]
    f = getattr(torch, "_foreach_" + op)
    f_ = getattr(torch, "_foreach_" + op + "_")
    check(f(to_dev(a), to_dev(b), to_dev(c), value=0.25), f(a, b, c, value=0.25))
    check(f(to_dev(a), to_dev(b), to_dev(c), [0.1, -2.0, 3.0]), f(a, b, c, [0.1, -2.0, 3.0]))
    t = to_dev(a)
    f_(t, to_dev(b), to_dev(c), [0.1, -2.0, 3.0])
    f_(a, b, c, [0.1, -2.0, 3.0])
    check(t, a)


def test_lerp_unary_copy_zero_norm():
    a, b = lists(), lists()
    check(torch._foreach_lerp(to_dev(a), to_dev(b), 0.1), torch._foreach_lerp(a, b, 0.1))
    check(torch._foreach_lerp(to_dev(a), to_dev(b), 0.9), torch._foreach_lerp(a, b, 0.9))
    w = [torch.rand_like(x) for x in a]
    check(torch._foreach_lerp(to_dev(a), to_dev(b), to_dev(w)), torch._foreach_lerp(a, b, w))
    pos = [x.abs() + 0.1 for x in a]
    for op in ["sqrt", "neg", "abs", "exp", "log", "reciprocal"]:
        f = getattr(torch, "_foreach_" + op)
        check(f(to_dev(pos)), f(pos))
    t = to_dev(a)
    torch._foreach_sqrt_(t := to_dev(pos))
    check(t, torch._foreach_sqrt(pos))
    t = to_dev(a)
    torch._foreach_copy_(t, to_dev(b))
    check(t, b)
    torch._foreach_zero_(t)
    check(t, [torch.zeros_like(x) for x in b])
    for ord in [2, 1, float("inf"), 3.0, 0]:
        check(torch._foreach_norm(to_dev(a), ord), torch._foreach_norm(a, ord))


def test_scalar_list_values_are_runtime():
    a = to_dev(lists())
    torch._foreach_div_(a, [1.0, 2.0, 3.0])
    torch._foreach_addcdiv_(a, a, a, [1.0, 2.0, 3.0])
    c0 = executables_built()
    for k in range(3):
        torch._foreach_div_(a, [1.5 + k, 2.5, 3.5])
        torch._foreach_addcdiv_(a, a, a, [0.1 * k, 0.2, 0.3])
        torch._foreach_mul_(a, 0.9 + 0.01 * k)
    torch._foreach_mul_(a, 0.8)
    c1 = executables_built()
    torch._foreach_mul_(a, 0.7)
    assert executables_built() == c1
    assert c1 - c0 <= 1  # only the first _foreach_mul_ signature


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def train(model, opt, device, steps, sched=None):
    torch.manual_seed(1)
    data = [(torch.randn(6, 8), torch.randn(6, 4)) for _ in range(steps)]
    compiles = []
    for x, y in data:
        opt.zero_grad()
        loss = ((model(x.to(device)) - y.to(device)) ** 2).mean()
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        if device == DEV:
            compiles.append(executables_built())
    return compiles


@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_optimizer_matches_cpu(name):
    ref = make_model()
    dev = copy.deepcopy(ref).to(DEV)

    def opt_for(m):
        if name == "sgd":
            return torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4, foreach=True)
        return torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.01, foreach=True)

    ro, do = opt_for(ref), opt_for(dev)
    rs = torch.optim.lr_scheduler.StepLR(ro, step_size=5, gamma=0.7)
    ds = torch.optim.lr_scheduler.StepLR(do, step_size=5, gamma=0.7)
    torch_tpu.metrics.reset()
    train(ref, ro, "cpu", 50, rs)
    compiles = train(dev, do, DEV, 50, ds)
    for p, q in zip(dev.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-5)
    # Zero fallbacks for every op that has a lowering rule in this build. (Ops without any rule,
    # e.g. the sum/mean reductions of the loss while that family lives on another branch, are
    # reported separately and disappear from this dict once their rules exist.)
    assert lowered_fallbacks() == {}, torch_tpu.metrics.counters()["fallbacks"]
    # The learning rate changes every 5 steps (and Adam's bias corrections every step): after
    # the warmup steps no new module is compiled.
    assert compiles[3] == compiles[-1], compiles


FUSED = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.01, fused=True),
    "adam_l2_amsgrad": lambda ps: torch.optim.Adam(ps, lr=1e-2, weight_decay=0.01, amsgrad=True, fused=True),
    "adamw_maximize": lambda ps: torch.optim.AdamW(ps, lr=1e-2, maximize=True, fused=True),
    "sgd_nesterov": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4,
                                               fused=True),
    "sgd_dampening": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.3, fused=True),
    "sgd_plain": lambda ps: torch.optim.SGD(ps, lr=0.05, fused=True),
    "adamw_tensor_lr": lambda ps: torch.optim.AdamW(ps, lr=torch.tensor(1e-2), fused=True),
}


@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_optimizer_matches_cpu_and_schedules_do_not_recompile(name, no_fallbacks):
    """fused=True: one _fused_adam(w)_/_fused_sgd_ module per step, lr and betas at runtime."""
    ref = make_model()
    dev = copy.deepcopy(ref).to(DEV)
    ro, do = FUSED[name](ref.parameters()), FUSED[name](dev.parameters())
    rs = torch.optim.lr_scheduler.StepLR(ro, step_size=3, gamma=0.7)
    ds = torch.optim.lr_scheduler.StepLR(do, step_size=3, gamma=0.7)
    train(ref, ro, "cpu", 12, rs)
    compiles = train(dev, do, DEV, 12, ds)
    for p, q in zip(dev.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-5)
    for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer"):
        for rp, dp in zip(ref.parameters(), dev.parameters()):
            if key in ro.state[rp]:
                torch.testing.assert_close(do.state[dp][key].cpu(), ro.state[rp][key], rtol=1e-5, atol=1e-6)
    assert compiles[3] == compiles[-1], compiles


def test_fused_adam_grad_scale_and_found_inf():
    """AMP's GradScaler path: grads are unscaled in place; with found_inf nothing changes."""
    params = [torch.randn(5, 3), torch.randn(4)]
    grads = [torch.randn(5, 3), torch.randn(4)]
    for found in (0.0, 1.0):
        state = [[torch.rand_like(p) for p in params] for _ in range(2)] + [[torch.tensor(3.0)] * 2]
        cpu = [[t.clone() for t in lst] for lst in [params, grads] + state]
        dev = [[t.clone().to(DEV) for t in lst] for lst in [params, grads] + state]
        for lists, device in ((cpu, "cpu"), (dev, DEV)):
            torch._fused_adamw_(lists[0], lists[1], lists[2], lists[3], [], lists[4], lr=0.1, beta1=0.9,
                                beta2=0.99, weight_decay=0.01, eps=1e-8, amsgrad=False, maximize=False,
                                grad_scale=torch.tensor(4.0, device=device),
                                found_inf=torch.tensor(found, device=device))
        for c_list, d_list in zip(cpu[:4], dev[:4]):
            for c_t, d_t in zip(c_list, d_list):
                torch.testing.assert_close(d_t.cpu(), c_t, rtol=1e-5, atol=1e-6)


def test_clip_grad_norm():
    ref = make_model()
    dev = copy.deepcopy(ref).to(DEV)
    x, y = torch.randn(6, 8), torch.randn(6, 4)
    for m, d in [(ref, "cpu"), (dev, DEV)]:
        ((m(x.to(d)) - y.to(d)) ** 2).sum().backward()
    nr = torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.5, foreach=True)
    nd = torch.nn.utils.clip_grad_norm_(dev.parameters(), 0.5, foreach=True)
    torch.testing.assert_close(nd.cpu(), nr)
    for p, q in zip(dev.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad)


def test_mismatched_lists_raise():
    with pytest.raises(RuntimeError):
        torch._foreach_add(to_dev(lists(3)), to_dev(lists(2)))


def test_fused_sgd_mismatched_lists_raise():
    p = [torch.randn(3, device=DEV)]
    with pytest.raises((ValueError, RuntimeError), match="_fused_sgd"):
        torch._fused_sgd_(p, [torch.randn(3, device=DEV), torch.randn(3, device=DEV)], [], weight_decay=0.0,
                          momentum=0.0, lr=0.1, dampening=0.0, nesterov=False, maximize=False, is_first_step=False)
    with pytest.raises((ValueError, RuntimeError), match="shape"):
        torch._fused_sgd_(p, [torch.randn(4, device=DEV)], [], weight_decay=0.0, momentum=0.0, lr=0.1,
                          dampening=0.0, nesterov=False, maximize=False, is_first_step=False)


def unfused(name):
    """The same optimizer as FUSED[name] with fused=False, foreach=False (PyTorch's plain loop)."""
    probe = FUSED[name]([torch.nn.Parameter(torch.zeros(1))])
    group = {k: v for k, v in probe.defaults.items()
             if k not in ("fused", "foreach", "params", "decoupled_weight_decay" if isinstance(probe, torch.optim.AdamW) else "")}
    group["lr"] = float(group["lr"])
    return lambda ps: type(probe)(ps, **group, fused=False, foreach=False)


def launches_during(fn):
    before = dict(torch_tpu.metrics.counters()["ops"])
    fn()
    after = torch_tpu.metrics.counters()["ops"]
    return {op: n - before.get(op, 0) for op, n in after.items() if n != before.get(op, 0)}


@pytest.mark.strict_eager
@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_optimizer_matches_unfused_cpu_over_20_steps(name, no_fallbacks):
    """Issue 10's acceptance: fused=True on tpu equals the unfused CPU loop within 1e-6 relative
    after 20 steps. Both get the same gradients each step (seeded, scaled from 1e-3 to 1e3 so
    Adam's normalisation and weight decay both matter): this measures the optimizer, not the
    rounding of two devices' backward passes. After the first step (which creates the state)
    step() runs one fused module, plus, for Adam(W), the `_foreach_add_` of the step counters
    that PyTorch's _fused_adam issues itself before the fused kernel (two launches, as on CUDA)."""
    torch.manual_seed(0)
    shapes = [(16, 8), (16,), (4, 16), (4,), (3, 5, 7)]
    cpu_params = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    tpu_params = [torch.nn.Parameter(p.detach().to(DEV)) for p in cpu_params]
    ro, do = unfused(name)(cpu_params), FUSED[name](tpu_params)
    for step in range(20):
        for i, (cp, tp) in enumerate(zip(cpu_params, tpu_params)):
            grad = torch.randn(cp.shape) * 10.0 ** ((step + i) % 7 - 3)
            cp.grad, tp.grad = grad, grad.to(DEV)
        ro.step()
        launches = launches_during(do.step)
        if step > 0:
            fused_ops = {op: n for op, n in launches.items() if op.startswith("_fused_")}
            assert len(fused_ops) == 1 and list(fused_ops.values()) == [1], launches
            assert set(launches) - set(fused_ops) <= {"_foreach_add_.Scalar"}, launches
    # "Within 1e-6 relative" per tensor, in norm: entries where an update cancels the weight
    # to ~0 carry rounding noise relative to themselves on every device (the CPU's own float32
    # loop is 1.4e-7..4.1e-7 from a float64 run here, element-wise up to 1.2e-5).
    def assert_relative(tpu, cpu):
        tpu = tpu.detach().cpu().double()
        cpu = cpu.detach().double()
        assert (tpu - cpu).norm() <= 1e-6 * cpu.norm(), ((tpu - cpu).norm() / cpu.norm()).item()

    for tp, cp in zip(tpu_params, cpu_params):
        assert_relative(tp, cp)
    for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer"):
        for cp, tp in zip(cpu_params, tpu_params):
            if key in ro.state[cp]:
                assert_relative(do.state[tp][key], ro.state[cp][key])
