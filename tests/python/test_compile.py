"""torch.compile(backend="tpu"): compiled vs eager vs CPU, mutations, RNG, views, recompiles,
errors, graph splits and the disk cache (docs/compile.md)."""
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch._dynamo
import torch.nn as nn

import torch_tpu
from torch_tpu.compile import CompileError, stats

from helpers import DEV, executables_built


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def graph_compiles():
    return sum(stats.graphs.values())


def test_backend_is_listed():
    assert "tpu" in torch._dynamo.list_backends()


def test_dump_dir_option_writes_the_module_and_an_unknown_option_is_an_error(tmp_path):
    x = torch.randn(3, 5)
    out = torch.compile(lambda t: t.sin() * 2, backend="tpu", options={"dump_dir": str(tmp_path)})(x.to(DEV))
    torch.testing.assert_close(out.cpu(), x.sin() * 2)
    dumped = list(tmp_path.iterdir())
    assert dumped and "stablehlo.sine" in dumped[0].read_text()
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"unknown option\(s\) \['dump_dri'\]; known options: 'dump_dir'"):
        torch.compile(lambda t: t + 1, backend="tpu", options={"dump_dri": str(tmp_path)})(x.to(DEV))


def test_elementwise_graph_matches_cpu_with_nan_inf_and_odd_shape():
    def f(x, y):
        return (x * 2 + y).relu().sum(0), torch.maximum(x, y), (x / y).exp2()

    g = torch.Generator().manual_seed(0)
    x = torch.randn(7, 13, generator=g)
    y = torch.randn(7, 13, generator=g)
    x[0, 0], y[1, 1], x[2, 2], y[3, 3] = float("nan"), float("nan"), float("inf"), -float("inf")
    out = torch.compile(f, backend="tpu")(x.to(DEV), y.to(DEV))
    # XLA computes exp2(t) as exp(t * ln 2): rounding t * ln 2 to f32 gives a relative error of up
    # to |t| ln 2 * 2^-24 (1.7e-6 at t ~ 36; x / y reaches ~100 with a small y), plus exp's own.
    t = (x / y)[torch.isfinite(x / y)]
    exp2_rtol = max(2e-6, 2 * t.abs().max().item() * math.log(2) * 2.0 ** -24 + 2.0 ** -23)
    for o, r, rtol in zip(out, f(x, y), (1.3e-6, 1.3e-6, exp2_rtol)):
        torch.testing.assert_close(o.cpu(), r, equal_nan=True, rtol=rtol, atol=1e-5)


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 5))


def test_mlp_forward_backward_matches_eager_and_cpu():
    cpu = _mlp()
    eager = _mlp().to(DEV)
    compiled_model = _mlp().to(DEV)
    compiled = torch.compile(compiled_model, backend="tpu")
    x = torch.randn(9, 12)
    target = torch.randn(9, 5)
    losses = []
    for model, dev in ((cpu, "cpu"), (eager, DEV), (compiled, DEV)):
        loss = nn.functional.mse_loss(model(x.to(dev)), target.to(dev))
        loss.backward()
        losses.append(loss.detach().cpu())
    torch.testing.assert_close(losses[1], losses[0])
    torch.testing.assert_close(losses[2], losses[0])
    for pc, pe, pk in zip(cpu.parameters(), eager.parameters(), compiled_model.parameters()):
        torch.testing.assert_close(pk.grad.cpu(), pc.grad)
        torch.testing.assert_close(pk.grad.cpu(), pe.grad.cpu())
    assert stats.graphs["forward"] >= 1 and stats.graphs["backward"] >= 1


class BufferAndBatchNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros(()))
        self.bn = nn.BatchNorm1d(6)

    def forward(self, x):
        self.steps.add_(1)
        return self.bn(x * (self.steps + 1))


@pytest.mark.parametrize("grad", [False, True])
def test_buffers_mutated_in_forward_are_written_back(grad):
    torch.manual_seed(0)
    cpu = BufferAndBatchNorm()
    tpu_model = BufferAndBatchNorm().to(DEV)
    compiled = torch.compile(tpu_model, backend="tpu")
    for step in range(3):
        x = torch.randn(8, 6)
        with torch.set_grad_enabled(grad):
            ref = cpu(x.requires_grad_(grad))
            out = compiled(x.detach().to(DEV).requires_grad_(grad))
        torch.testing.assert_close(out.detach().cpu(), ref.detach())
    torch.testing.assert_close(tpu_model.steps.cpu(), cpu.steps)
    torch.testing.assert_close(tpu_model.bn.running_mean.cpu(), cpu.bn.running_mean)
    torch.testing.assert_close(tpu_model.bn.running_var.cpu(), cpu.bn.running_var)
    assert int(tpu_model.bn.num_batches_tracked) == 3


def test_dropout_is_reproducible_under_a_seed():
    f = torch.compile(lambda x: nn.functional.dropout(x, 0.5, training=True), backend="tpu")
    x = torch.ones(64, 64, device=DEV)
    torch.manual_seed(7)
    a = f(x).cpu()
    b = f(x).cpu()
    torch.manual_seed(7)
    c = f(x).cpu()
    assert torch.equal(a, c)
    assert not torch.equal(a, b)  # the generator advances between calls
    zeros = (a == 0).float().mean().item()
    assert 0.4 < zeros < 0.6
    assert set(a.unique().tolist()) <= {0.0, 2.0}


def test_two_random_ops_in_one_graph_draw_different_bits():
    f = torch.compile(lambda x: (torch.rand_like(x), torch.rand_like(x)), backend="tpu")
    a, b = f(torch.zeros(1000, device=DEV))
    assert not torch.equal(a.cpu(), b.cpu())
    assert 0.4 < a.mean().item() < 0.6


def test_outputs_that_are_views_of_inputs():
    def f(x):
        return x.t(), x[1:], x + 1

    x = torch.arange(12.0).reshape(3, 4)
    xt = x.to(DEV)
    t, s, y = torch.compile(f, backend="tpu")(xt)
    torch.testing.assert_close(t.cpu(), x.t())
    torch.testing.assert_close(s.cpu(), x[1:])
    torch.testing.assert_close(y.cpu(), x + 1)
    xt.mul_(2)  # views see later writes to their base
    torch.testing.assert_close(t.cpu(), 2 * x.t())


def test_view_ops_inside_a_graph():
    def f(x):
        a = x.view(4, 6).t().contiguous()
        b = x.permute(2, 0, 1).reshape(-1)[::3]
        c = x.select(1, -1).unsqueeze(0).expand(3, 2, 4)
        d, e = x.split([1, 2], dim=1)
        return a * 2, b + 1, c.sum(0), d - e.sum(1, keepdim=True), x.narrow(2, 1, 2).squeeze(-1)

    x = torch.randn(2, 3, 4)
    out = torch.compile(f, backend="tpu")(x.to(DEV))
    for o, r in zip(out, f(x)):
        torch.testing.assert_close(o.cpu(), r)


def test_same_shape_compiles_once_new_shape_once_with_reason():
    f = torch.compile(lambda x: torch.tanh(x) * 3, backend="tpu", dynamic=False)
    torch_tpu.metrics.reset()
    f(torch.randn(2, 8, device=DEV))
    first = graph_compiles()
    f(torch.randn(2, 8, device=DEV))
    assert graph_compiles() == first
    f(torch.randn(2, 9, device=DEV))
    assert graph_compiles() == first + 1
    f(torch.randn(2, 9, device=DEV))
    assert graph_compiles() == first + 1
    reasons = torch_tpu.metrics.recompile_reasons()
    assert any("input 0" in r and "dim 1" in r and "[2, 8] -> " in r and "[2, 9]" in r for r in reasons), reasons
    assert "recompile" in torch_tpu.metrics.report()


def test_view_input_at_a_new_offset_compiles_nothing_new():
    timesteps = torch.linspace(1, 0, 10, device=DEV)
    f = torch.compile(lambda x, t: x * t.expand(2)[:, None], backend="tpu", dynamic=False)
    x = torch.ones(2, 3, device=DEV)
    f(x, timesteps[0])
    f(x, timesteps[1])
    before = executables_built()
    outs = [f(x, timesteps[i]) for i in range(2, 10)]
    assert executables_built() == before
    expected = torch.linspace(1, 0, 10)[2:]
    for out, t in zip(outs, expected):
        torch.testing.assert_close(out.cpu(), torch.full((2, 3), t.item()))


def test_fullgraph_error_names_the_op_and_line():
    def f(x):
        return torch.linalg.eigvals(x.reshape(2, 2, 2)).abs() + 1  # eig has no lowering rule

    with pytest.raises(Exception) as info:
        torch.compile(f, backend="tpu", fullgraph=True)(torch.randn(8, device=DEV))
    message = str(info.value)
    assert "linalg_eig" in message and "test_compile.py" in message and "eigvals" in message


def test_graph_is_split_around_an_op_without_rule():
    def f(x):
        y = x * 2 + 1
        z = torch.linalg.eigvals(y.reshape(2, 2, 2)).abs()
        return z.exp() - 1

    stats.reset()
    x = torch.randn(8)
    out = torch.compile(f, backend="tpu")(x.to(DEV))
    torch.testing.assert_close(out.cpu(), f(x), rtol=1e-4, atol=1e-4)
    assert stats.splits["aten::linalg_eig.default"] == 1
    assert graph_compiles() >= 2  # the parts before and after the eig are compiled


@pytest.mark.parametrize("dynamic", [True, None])
def test_graph_returning_an_updated_int_attribute(dynamic):
    """Traced code that updates a Python int attribute (Transformers' sliding-window cache keeps
    its length so): with symbolic shapes the graph returns the new int, which each specialised
    executable returns as a number."""
    class Cache:
        def __init__(self):
            self.length = 0

    def f(x, cache):
        cache.length += x.shape[0]
        return x * 2 + cache.length

    torch._dynamo.reset()
    compiled = torch.compile(f, backend="tpu", dynamic=dynamic)
    ours, reference = Cache(), Cache()
    for n in (3, 3, 5, 7):
        x = torch.randn(n, 4)
        torch.testing.assert_close(compiled(x.to(DEV), ours).cpu(), f(x, reference))
        assert ours.length == reference.length


def test_functional_collectives_split_even_a_fullgraph_graph(tmp_path):
    """DTensor and tensor-parallel plans trace to _c10d_functional ops: they run through the tpu
    c10d backend between compiled parts, also under fullgraph=True (a one-rank group here; two
    and four ranks: test_distributed.py, tp_plan with StaticCache)."""
    script = textwrap.dedent(f"""
        import torch, torch.distributed as dist, torch_tpu
        import torch.distributed._functional_collectives as funcol
        from torch_tpu.compile import stats
        dist.init_process_group("tpu", rank=0, world_size=1, init_method="file://{tmp_path}/store")
        def f(x):
            y = funcol.all_reduce(x * 2, "sum", dist.group.WORLD)
            z = funcol.all_gather_tensor(y.sin(), 0, dist.group.WORLD)
            return z + 1
        x = torch.randn(5, 3)
        out = torch.compile(f, backend="tpu", fullgraph=True)(x.to("tpu"))
        torch.testing.assert_close(out.cpu(), (x * 2).sin() + 1)
        assert stats.collectives["_c10d_functional::all_reduce.default"] == 1, stats.collectives
        assert not stats.splits, stats.splits
        print("OK", dict(stats.graphs))
        dist.destroy_process_group()
    """)
    env = dict(os.environ, TORCH_TPU_QUIET="1")
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]


@pytest.mark.parametrize("dynamic", [True, None])
def test_dynamic_shapes_are_specialised_per_shape_at_run_time(dynamic):
    """dynamic=True, or dynamo's automatic dynamic after a shape change (dynamic=None): XLA
    compiles static shapes, so each distinct shape compiles once and is reused."""
    f = torch.compile(lambda x: (x.sum(0) * x.shape[0]).tanh(), backend="tpu", dynamic=dynamic)
    torch_tpu.metrics.reset()
    for n in (5, 6, 7, 6, 5):
        x = torch.randn(n, 3)
        torch.testing.assert_close(f(x.to(DEV)).cpu(), (x.sum(0) * n).tanh())
    assert graph_compiles() <= 4  # 5, 6, 7 (+ the static first graph when dynamic=None)
    reasons = torch_tpu.metrics.recompile_reasons()
    assert any("dynamic shapes specialised" in r and "input" in r for r in reasons), reasons


class _RMSNormWithFloatEps(torch.nn.Module):
    """Diffusers' RMSNorm in shape: eps is a Python float attribute."""

    def __init__(self, eps):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, 8))

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + self.eps) * self.weight


def test_dynamic_graph_reading_a_float_attribute():
    """With dynamic=True Dynamo passes an unspecialised float (eps) as a 0-d tensor read with
    .item() inside the graph; each shape (and each value) compiles once, results as on CPU."""
    model = _RMSNormWithFloatEps(1e-6)
    compiled = torch.compile(_RMSNormWithFloatEps(1e-6).to(DEV), backend="tpu", fullgraph=True, dynamic=True)
    torch_tpu.metrics.reset()
    for n in (3, 5, 3):
        x = torch.randn(2, n, 8)
        x[0, 0, 0] = float("nan")
        with torch.no_grad():
            torch.testing.assert_close(compiled(x.to(DEV)).cpu(), model(x), equal_nan=True)
    assert graph_compiles() == 2


def test_graph_that_moves_its_cpu_inputs_to_the_tpu():
    """Every input on the CPU, moved inside the compiled region (Qwen-Image keeps its RoPE table
    on the CPU and calls .to(device) in forward)."""
    table = torch.randn(17, 4, dtype=torch.complex64)
    table[3, 1] = complex(float("nan"), 1.0)

    def f(t):
        t = t.to("tpu")
        return torch.view_as_real(t * t.conj()), t.abs()

    out = torch.compile(f, backend="tpu", fullgraph=True)(table)
    expected = (torch.view_as_real(table * table.conj()), table.abs())
    for got, want in zip(out, expected):
        assert got.device.type == "tpu"
        torch.testing.assert_close(got.cpu(), want, equal_nan=True)


def test_second_process_compiles_nothing(tmp_path):
    script = textwrap.dedent("""
        import torch, torch_tpu
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.SiLU(), torch.nn.Linear(16, 4)).to("tpu")
        f = torch.compile(model, backend="tpu")
        x = torch.randn(3, 16).to("tpu")
        with torch.no_grad():
            print(f(x).sum().item())
        print("COMPILES", torch_tpu._C._cache_stats()["compiles"])
    """)
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path), TORCH_TPU_QUIET="1")
    env.pop("TORCH_TPU_AOT_CHECK", None)
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-3000:]
    first, second = (int(r.stdout.split("COMPILES")[1]) for r in runs)
    assert first > 0
    assert second == 0
    assert runs[0].stdout.splitlines()[0] == runs[1].stdout.splitlines()[0]


def test_compiled_training_with_compiled_adamw_matches_eager():
    def run(compiled):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(DEV)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        fwd = torch.compile(model, backend="tpu") if compiled else model
        step = torch.compile(opt.step, backend="tpu") if compiled else opt.step
        g = torch.Generator().manual_seed(1)
        losses = []
        for _ in range(4):
            x = torch.randn(16, 8, generator=g).to(DEV)
            y = torch.randn(16, 1, generator=g).to(DEV)
            loss = nn.functional.mse_loss(fwd(x), y)
            opt.zero_grad()
            loss.backward()
            step()
            losses.append(loss.item())
        return losses, [p.detach().cpu() for p in model.parameters()]

    eager_losses, eager_params = run(False)
    stats.reset()
    comp_losses, comp_params = run(True)
    assert not stats.splits, dict(stats.splits)  # only the CPU step counters stay eager
    # The counters' increments and write-backs run on the host; the bias corrections computed
    # from them (pow, sub, div, sqrt, ... of CPU 0-d tensors) are computed in the module.
    assert set(stats.host_ops) == {"aten::_foreach_add.Scalar", "aten::copy_.default"}, dict(stats.host_ops)
    torch.testing.assert_close(torch.tensor(comp_losses), torch.tensor(eager_losses))  # float32 tolerances
    for a, b in zip(comp_params, eager_params):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("make_opt", [
    lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=False),  # addcmul_(value=) -> prims.fma in Dynamo
    lambda p: torch.optim.NAdam(p, lr=1e-2),
    lambda p: torch.optim.RAdam(p, lr=1e-2),
], ids=["adamw_single_tensor", "nadam", "radam"])
def test_compiled_optimizers_match_cpu_without_splits(make_opt):
    def run(device, compiled):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
        opt = make_opt(model.parameters())
        step = torch.compile(opt.step, backend="tpu") if compiled else opt.step
        g = torch.Generator().manual_seed(1)
        for _ in range(4):
            x, y = torch.randn(16, 8, generator=g).to(device), torch.randn(16, 1, generator=g).to(device)
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            step()
        return [p.detach().cpu() for p in model.parameters()]

    reference = run("cpu", False)
    stats.reset()
    for got, want in zip(run(DEV, True), reference):
        torch.testing.assert_close(got, want)
    assert not stats.splits, dict(stats.splits)


def test_plain_torch_compile_routes_tpu_graphs_to_the_tpu_backend():
    """torch.compile(model) with no backend (transformers' tests, most scripts) works on tpu."""
    model = _mlp().to(DEV)
    before = graph_compiles()
    compiled = torch.compile(model)
    x = torch.randn(4, 12)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x.to(DEV)).cpu(), _mlp()(x))
    assert graph_compiles() == before + 1


def test_plain_torch_compile_on_cpu_still_uses_inductor():
    before = graph_compiles()
    f = torch.compile(lambda x: torch.sin(x) * 2)
    x = torch.randn(16)
    torch.testing.assert_close(f(x), torch.sin(x) * 2)
    assert graph_compiles() == before
    backend = torch._dynamo.backends.registry.get_default_backend()
    assert getattr(backend, "__name__", "") == "tpu_or_inductor"


def test_explicit_inductor_on_tpu_runs_through_our_compiler(recwarn, monkeypatch):
    """backend="inductor" (tutorials, Transformers' CompileConfig default) on tpu tensors: Inductor's
    post-grad graph is compiled by ours (torch_tpu/_inductor_device.py), with a one-time notice."""
    from torch_tpu.compile import inductor_graphs

    monkeypatch.setattr(inductor_graphs, "_announced", False)
    def f(x, w):
        return (x @ w).relu().softmax(-1) * 2

    x = torch.randn(5, 3)
    x[1, 2], x[3, 0] = float("nan"), float("inf")
    w = torch.randn(3, 7)
    torch._dynamo.reset()
    got = torch.compile(f, backend="inductor")(x.to(DEV), w.to(DEV))
    assert got.device.type == "tpu"
    torch.testing.assert_close(got.cpu(), f(x, w), equal_nan=True)
    assert any('backend="inductor" on tpu tensors' in str(w.message) for w in recwarn)
    # The same function still compiles with Inductor itself on the CPU.
    torch.testing.assert_close(torch.compile(f, backend="inductor")(x, w), f(x, w), equal_nan=True)


def test_explicit_inductor_on_tpu_writes_mutated_inputs_and_trains():
    def step(cache, x, pos):
        cache.index_copy_(0, pos, x)
        return cache.sum(0), x

    cache, x, pos = torch.zeros(6, 3), torch.randn(2, 3), torch.tensor([4, 1])
    c_dev, x_dev = cache.to(DEV), x.to(DEV)
    torch._dynamo.reset()
    total, same = torch.compile(step, backend="inductor")(c_dev, x_dev, pos.to(DEV))
    want_total, _ = step(cache, x, pos)
    torch.testing.assert_close(c_dev.cpu(), cache)
    torch.testing.assert_close(total.cpu(), want_total)
    torch.testing.assert_close(same.cpu(), x)

    torch.manual_seed(0)
    model = _mlp()
    reference = _mlp()
    reference.load_state_dict(model.state_dict())
    compiled = torch.compile(model.to(DEV), backend="inductor")
    inputs = torch.randn(4, 12)
    compiled(inputs.to(DEV)).square().mean().backward()
    reference(inputs).square().mean().backward()
    for got, want in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(got.grad.cpu(), want.grad)


def test_explicit_inductor_on_tpu_with_symbolic_shapes_compiles_per_shape():
    """dynamic=True, and dynamic=None once a shape changed (Dynamo then makes the dim symbolic, as
    in Transformers' compiled generate): Inductor's symbolic graph runs as our executables, one per
    shape. It raised before."""
    def f(x, w):
        return (x @ w).softmax(-1) + x.sum(-1, keepdim=True)

    def step(cache, x, pos):
        cache.index_copy_(0, pos, x)
        return cache.sum(0) * x.shape[0]

    w = torch.randn(3, 3)
    for dynamic in (True, None):
        torch._dynamo.reset()
        compiled = torch.compile(f, backend="inductor", dynamic=dynamic)
        for n in (5, 8, 1, 13, 8):
            x = torch.randn(n, 3)
            x[0, 1] = float("nan")
            x[-1, 2] = -float("inf")
            got = compiled(x.to(DEV), w.to(DEV))
            assert got.device.type == "tpu" and got.shape == (n, 3)
            torch.testing.assert_close(got.cpu(), f(x, w), equal_nan=True)
        # A graph that writes its input (two custom-op calls) with symbolic sizes.
        compiled_step = torch.compile(step, backend="inductor", dynamic=dynamic)
        for n in (2, 3, 5):
            cache, x, pos = torch.zeros(9, 3), torch.randn(n, 3), torch.randperm(9)[:n]
            c_dev = cache.to(DEV)
            got = compiled_step(c_dev, x.to(DEV), pos.to(DEV))
            want = step(cache, x, pos)
            torch.testing.assert_close(c_dev.cpu(), cache)
            torch.testing.assert_close(got.cpu(), want)


def test_explicit_inductor_on_tpu_bad_cases_raise_naming_the_tpu_backend(monkeypatch, tmp_path):
    def f(x):
        return x.relu() + 1

    # TORCH_TPU_INDUCTOR=error: Inductor on tpu refuses, naming what works.
    monkeypatch.setenv("TORCH_TPU_INDUCTOR", "error")
    torch._dynamo.reset()
    with pytest.raises(Exception, match='InductorOnTpuError.*backend="tpu"'):
        torch.compile(f, backend="inductor")(torch.randn(4, device=DEV))
    monkeypatch.delenv("TORCH_TPU_INDUCTOR")
    # AOT Inductor packages have no tpu form.

    class Model(torch.nn.Module):
        def forward(self, x):
            return f(x)

    exported = torch.export.export(Model().to(DEV), (torch.randn(4, device=DEV),))
    with pytest.raises(RuntimeError, match="AOT Inductor packages .* cannot target tpu"):
        torch._inductor.aoti_compile_and_package(exported, package_path=str(tmp_path / "m.pt2"))


def test_importing_torch_does_not_import_dynamo():
    code = ("import sys, torch; torch.device('tpu'); "
            "print('torch._dynamo' in sys.modules or 'torch._inductor.codegen.common' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, TORCH_TPU_QUIET="1"))
    assert out.stdout.strip() == "False", out.stderr[-2000:]


def _workloads():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    import workloads
    return workloads


def test_mmdit_block_compiled_matches_eager_and_cpu():
    stats.reset()  # splits counted by earlier tests in this process are not this block's
    w = _workloads()
    cpu_block = w.mmdit_block(dim=64, heads=2)
    tpu_block = w.mmdit_block(dim=64, heads=2).to(DEV)
    inputs = w.mmdit_inputs(batch=2, image_tokens=33, text_tokens=7, dim=64)
    compiled = torch.compile(tpu_block, backend="tpu", fullgraph=True, dynamic=False)
    with torch.no_grad():
        ref = cpu_block(*inputs)
        eager = tpu_block(*[t.to(DEV) for t in inputs])
        comp = compiled(*[t.to(DEV) for t in inputs])
    for r, e, c in zip(ref, eager, comp):
        torch.testing.assert_close(c.cpu(), r, rtol=1e-4, atol=1e-4)  # XLA reassociates f32 sums
        torch.testing.assert_close(c.cpu(), e.cpu(), rtol=1e-4, atol=1e-4)
    assert not stats.splits


def test_tiny_llama_forward_compiled_matches_cpu():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2)
    torch.manual_seed(0)
    cpu_model = transformers.LlamaForCausalLM(config).eval()
    tpu_model = transformers.LlamaForCausalLM(config).eval()
    tpu_model.load_state_dict(cpu_model.state_dict())
    tpu_model.to(DEV)
    ids = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6, 5]])
    compiled = torch.compile(tpu_model, backend="tpu", fullgraph=True, dynamic=False)
    with torch.no_grad():
        torch.testing.assert_close(compiled(ids.to(DEV)).logits.cpu(), cpu_model(ids).logits, rtol=1e-4, atol=1e-4)


def test_compiled_tiny_transformer_trains_like_eager():
    """A tiny Llama (causal LM loss) trained 3 steps with AdamW: forward, backward and the
    optimizer step compiled; losses and weights match eager."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2)

    def run(compiled):
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(config).to(DEV)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, capturable=True)
        fwd = torch.compile(model, backend="tpu", dynamic=False) if compiled else model
        step = torch.compile(opt.step, backend="tpu") if compiled else opt.step
        g = torch.Generator().manual_seed(2)
        losses = []
        for _ in range(3):
            ids = torch.randint(0, 96, (2, 12), generator=g).to(DEV)
            loss = fwd(input_ids=ids, labels=ids).loss
            opt.zero_grad()
            loss.backward()
            step()
            losses.append(loss.item())
        return losses, model.model.embed_tokens.weight.detach().cpu()

    eager_losses, eager_w = run(False)
    stats.reset()
    comp_losses, comp_w = run(True)
    torch.testing.assert_close(torch.tensor(comp_losses), torch.tensor(eager_losses), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(comp_w, eager_w, rtol=1e-4, atol=1e-4)
    assert not stats.splits and not stats.host_ops  # capturable AdamW: the whole step on the device
    assert stats.graphs["forward"] and stats.graphs["backward"]


def test_convnet_with_batchnorm_trains_compiled_like_cpu():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, stride=2), nn.GroupNorm(4, 16), nn.SiLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(16, 5))
    x = torch.randn(4, 3, 15, 15)
    ref = model(x)
    ref.sum().backward()
    grad = model[0].weight.grad.clone()
    running_mean = model[1].running_mean.clone()
    model.zero_grad()
    model[1].reset_running_stats()
    model.to(DEV)
    stats.reset()
    out = torch.compile(model, backend="tpu")(x.to(DEV))
    out.sum().backward()
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(model[0].weight.grad.cpu(), grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(model[1].running_mean.cpu(), running_mean)
    assert not stats.splits, dict(stats.splits)
    model.eval()  # inference: running statistics
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend="tpu")(x.to(DEV)).cpu(), model.cpu()(x),
                                   rtol=1e-4, atol=1e-4)


def test_bf16_autocast_inside_a_compiled_graph():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    x = torch.randn(8, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = model(x)
    compiled = torch.compile(model.to(DEV), backend="tpu")
    with torch.autocast("tpu", dtype=torch.bfloat16):
        out = compiled(x.to(DEV))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float().cpu(), ref.float(), rtol=2e-2, atol=2e-2)


def test_in_place_writes_to_graph_inputs():
    def f(x, y):
        x.add_(y)
        x[0] = 7
        return x.sum()

    a, b = torch.randn(3, 4), torch.randn(3, 4)
    a_tpu = a.to(DEV)
    out = torch.compile(f, backend="tpu")(a_tpu, b.to(DEV))
    expected = f(a, b)
    torch.testing.assert_close(a_tpu.cpu(), a)
    torch.testing.assert_close(out.cpu(), expected)


def test_bert_encoder_fullgraph_with_padding_mask():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64)
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    ids = torch.tensor([[1, 5, 7, 9, 0, 0], [3, 4, 5, 6, 7, 8]])
    mask = (ids != 0).long()
    with torch.no_grad():
        ref = model(ids, attention_mask=mask).last_hidden_state
        compiled = torch.compile(model.to(DEV), backend="tpu", fullgraph=True)
        out = compiled(ids.to(DEV), attention_mask=mask.to(DEV)).last_hidden_state
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-4, atol=1e-4)


def test_cpu_index_tensor_input():
    f = torch.compile(lambda x, idx: x[idx] * 2, backend="tpu")
    x = torch.randn(6, 3)
    idx = torch.tensor([4, 0, -1])
    torch.testing.assert_close(f(x.to(DEV), idx).cpu(), x[idx] * 2)


def test_mmdit_block_bf16_compiled_matches_cpu():
    w = _workloads()
    block = w.mmdit_block(dim=64, heads=2).to(torch.bfloat16)
    inputs = [t.bfloat16() for t in w.mmdit_inputs(batch=2, image_tokens=33, text_tokens=7, dim=64)]
    with torch.no_grad():
        ref = block(*inputs)
        out = torch.compile(block.to(DEV), backend="tpu", fullgraph=True)(*[t.to(DEV) for t in inputs])
    for o, r in zip(out, ref):
        assert o.dtype == torch.bfloat16
        # bf16 tolerances (2e-2 relative), as in tests/python/helpers.close; outputs reach ~4
        torch.testing.assert_close(o.cpu(), r, rtol=2e-2, atol=2e-2)


def test_conj_and_neg_views_inside_a_graph():
    """x.conj() and the neg bit are lazy views in eager mode; in a graph they are values."""
    z = torch.complex(torch.randn(3, 5), torch.randn(3, 5))
    z[1, 2] = complex(float("inf"), float("-nan"))

    def f(z):
        c = z.conj()
        return c * z, torch.view_as_real(c.resolve_conj()), c.imag.neg()

    out = torch.compile(f, backend="tpu", fullgraph=True)(z.to(DEV))
    for got, want in zip(out, f(z)):
        torch.testing.assert_close(got.cpu(), want, equal_nan=True)


def test_view_dtype_in_a_graph_is_the_same_bits():
    # Same-width views (bits of floats, signed/unsigned) lower to a bitcast: NaN payloads, signed
    # zeros and infinities keep their bits; a width change falls back with the op named.
    x = torch.tensor([1.5, -0.0, float("inf"), -float("inf"), float("nan"), -float("nan"), 3e-39, 7.0])
    h = torch.tensor([0.0, -0.0, 1.0, float("nan"), -2.5], dtype=torch.bfloat16)

    def f(x, h):
        bits = x.view(torch.int32)
        back = (bits ^ (1 << 31)).view(torch.float32)  # flips the sign bit
        return bits, back, h.view(torch.int16) >> 8, h.view(torch.int16).view(torch.bfloat16)

    out = torch.compile(f, backend="tpu", fullgraph=True)(x.to(DEV), h.to(DEV))
    for got, want in zip(out, f(x, h)):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.cpu().view(torch.uint8), want.view(torch.uint8), rtol=0, atol=0)
    with pytest.raises(Exception, match="view.dtype"):
        torch.compile(lambda t: t.view(torch.int16) + 1, backend="tpu", fullgraph=True)(x.to(DEV))


def test_data_dependent_shape_under_fullgraph_names_the_cause_not_dynamic_false():
    # x[mask] has a size known only from the data: dynamic=False cannot help, so the message
    # must not suggest it; without fullgraph=True the graph splits and the result is the CPU's.
    import torch._dynamo
    torch._dynamo.reset()
    x = torch.tensor([1.0, -2.0, 3.0, -0.5])
    f = lambda t: t[t > 0].sum() * 2  # noqa: E731
    with pytest.raises(Exception, match="data-dependent shape") as info:
        torch.compile(f, backend="tpu", fullgraph=True)(x.to("tpu"))
    assert "dynamic=False does not change" in str(info.value)
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(f, backend="tpu")(x.to("tpu")).cpu(), f(x))
    torch._dynamo.reset()
