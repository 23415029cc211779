"""Fused eager (torch.tpu.set_eager_mode("fused")): ops are recorded and run as one program at
the next host read, sync, strict op or loop boundary. Every test compares with PyTorch on the
CPU, and where strict eager's exact bits are the claim (RNG streams), with strict eager."""
import contextlib
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu
from helpers import executables_built

NAN, INF = float("nan"), float("inf")


@pytest.fixture(autouse=True)
def fused():
    """Fused mode with each new stream's program compiled at its first run (the structure tests
    count its launches); the `policy` fixture runs a test under both compile policies."""
    was = torch_tpu._C._fused_compile()
    torch_tpu._C._set_fused_compile("inline")
    with torch.tpu.eager_mode("fused"):
        yield
    torch_tpu._C._wait_fused_compiles()
    torch_tpu._C._set_fused_compile(was)


@pytest.fixture(params=["inline", "background"])
def policy(request):
    """`inline`: a new stream waits for its program; `background` (the default): it runs op by op
    through strict plans while its program compiles on a worker thread."""
    torch_tpu._C._set_fused_compile(request.param)
    return request.param


def stats():
    return dict(torch_tpu._C._fused_stats())


def launches():
    return torch_tpu._C._cache_stats()["launches"]


@contextlib.contextmanager
def pipelining(n):
    """Recurring streams cut after `n` ops (TORCH_TPU_FUSED_PIPELINE_OPS; 0: never) in the block."""
    was = torch_tpu._C._fused_pipeline_ops()
    torch_tpu._C._set_fused_pipeline_ops(n)
    try:
        yield
    finally:
        torch_tpu._C._set_fused_pipeline_ops(was)


def test_mode_api_switches_and_restores():
    assert torch.tpu.get_eager_mode() == "fused"
    with torch.tpu.eager_mode("strict"):
        assert torch.tpu.get_eager_mode() == "strict"
        with torch.tpu.eager_mode("debug"):
            assert torch.tpu.get_eager_mode() == "debug"
        assert torch.tpu.get_eager_mode() == "strict"
    assert torch.tpu.get_eager_mode() == "fused"
    with pytest.raises(ValueError, match="'strict', 'fused' or 'debug'.*got 'fast'"):
        torch.tpu.set_eager_mode("fast")
    assert torch.tpu.get_eager_mode() == "fused"


def test_environment_variable_selects_the_mode():
    code = "import torch, torch_tpu; x = torch.ones(3, device='tpu') * 2; print(torch.tpu.get_eager_mode(), x.sum().item())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, TORCH_TPU_EAGER_MODE="fused"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["fused", "6.0"]
    bad = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, TORCH_TPU_EAGER_MODE="lazy"))
    assert bad.returncode != 0 and "TORCH_TPU_EAGER_MODE" in bad.stderr and "got 'lazy'" in bad.stderr


def test_a_chain_of_ops_runs_as_one_launch_and_drops_dead_intermediates():
    x, y = torch.randn(5, 7), torch.randn(7, 3)
    torch_tpu.metrics.reset()
    xt, yt = x.to("tpu"), y.to("tpu")
    out = ((xt @ yt).relu() * 2 + 1).softmax(-1).sum(0)
    assert launches() == 0  # nothing ran yet
    torch.testing.assert_close(out.cpu(), ((x @ y).relu() * 2 + 1).softmax(-1).sum(0))
    s = stats()
    assert launches() == 1 and s["programs_run"] == 1 and s["ops_recorded"] >= 6
    assert s["dropped_results"] >= 4  # the matmul, relu, mul, add and softmax results died unread
    assert s["flush_reasons"] == {"host read": 1}
    assert "fused eager programs   1 run" in torch_tpu.metrics.report()


def test_views_in_place_writes_and_aliasing_match_the_cpu(policy):
    base = torch.arange(48.0).reshape(6, 8)
    t = base.to("tpu")
    v, cv = t[1:4, ::2], base[1:4, ::2]
    v.mul_(2)
    cv.mul_(2)
    t.t()[0].add_(1)  # a column through a transposed view
    base.t()[0].add_(1)
    total, expected_total = t.sum(), base.sum()
    t.add_(v.sum())  # reads the view of the storage it writes
    base.add_(cv.sum())
    ptr = t.data_ptr()
    torch.testing.assert_close(total.cpu(), expected_total)
    torch.testing.assert_close(t.cpu(), base)
    assert t.data_ptr() == ptr


def test_random_draws_take_the_strict_streams_keys(policy):
    def run():
        torch.manual_seed(7)
        a = torch.ones(4, 5, device="tpu") * 3
        b = torch.randn(4, 5, device="tpu")
        c = (a + b).exp()
        d = torch.nn.functional.dropout(c, 0.5)
        e = torch.rand(3, device="tpu") + c.sum()
        return b.cpu(), c.cpu(), d.cpu(), e.cpu()

    fused = run()
    with torch.tpu.eager_mode("strict"):
        strict = run()
    b, c, d, e = fused
    # The draws are bit-identical; arithmetic fused into one kernel may round differently.
    assert torch.equal(b, strict[0]) and torch.equal(d == 0, strict[2] == 0)
    torch.testing.assert_close(c, strict[1])
    torch.testing.assert_close(d, strict[2])
    torch.testing.assert_close(e, strict[3])


def test_a_shape_error_raises_at_the_op_and_the_stream_goes_on():
    a = torch.ones(2, 3, device="tpu") + 1
    with pytest.raises(RuntimeError, match=r"(mm|mat1 and mat2).*2x3.*4x5|shapes cannot be multiplied"):
        torch.mm(a, torch.ones(4, 5, device="tpu"))
    torch.testing.assert_close((a * 2).cpu(), torch.full((2, 3), 4.0))


def test_a_device_assertion_names_the_op_at_the_next_host_read(policy):
    t = torch.arange(5.0, device="tpu") * 2
    picked = t.index_select(0, torch.tensor([1, 9], device="tpu"))
    with pytest.raises(IndexError, match="index_select: index out of range"):
        picked.cpu()
    torch.testing.assert_close((t + 1).cpu(), torch.arange(5.0) * 2 + 1)


def test_integer_division_by_zero_raises_at_the_host_read():
    a, b = torch.tensor([5, 7, 3], device="tpu"), torch.tensor([2, 0, 1], device="tpu")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        (a // b + 1).cpu()


def test_memory_statistics_count_tensors_as_strict_eager_does(policy):
    def run():
        torch.tpu.synchronize()
        base = torch.tpu.memory_allocated()
        x = torch.ones(256, 256, device="tpu")
        y = (x * 2).relu()
        z = y + x
        del y
        during = torch.tpu.memory_allocated() - base
        z.sum().item()
        del x, z
        torch.tpu.synchronize()
        return during, torch.tpu.memory_allocated() - base

    fused = run()
    with torch.tpu.eager_mode("strict"):
        strict = run()
    assert fused == strict == (2 * 256 * 256 * 4, 0)


def test_a_loop_with_a_host_read_per_step_compiles_nothing_after_warm_up():
    torch_tpu.metrics.reset()
    x = torch.linspace(-1, 1, 33, device="tpu")
    ref = torch.linspace(-1, 1, 33)
    for step in range(12):
        if step == 3:
            before = executables_built()
            hits = stats()["cache_hits"]
        x = torch.tanh(x * 1.5 + 0.25) - x.mean()
        ref = torch.tanh(ref * 1.5 + 0.25) - ref.mean()
        assert x.sum().item() == pytest.approx(ref.sum().item(), rel=1e-5, abs=1e-5)
    assert executables_built() == before
    assert stats()["cache_hits"] - hits == 9


def test_a_loop_without_host_reads_ends_programs_at_its_boundary():
    w = torch.full((8,), 0.5, device="tpu")
    acc, ref = torch.zeros(8, device="tpu"), torch.zeros(8)
    torch_tpu.metrics.reset()
    for i in range(300):
        acc = acc * 0.99 + w.sin() * i
        ref = ref * 0.99 + torch.full((8,), 0.5).sin() * i
    torch.testing.assert_close(acc.cpu(), ref)
    s = stats()
    assert s["flush_reasons"].get("loop boundary", 0) >= 10
    assert s["compiles"] <= 4  # first, steady and last programs; not one per iteration


def test_an_op_that_runs_strict_inside_the_stream_sees_and_keeps_order():
    x = torch.arange(6.0, device="tpu") + 1
    x.mul_(3)
    nz = torch.nonzero(x > 7)  # data-dependent shape: runs now, after the recorded ops
    x.add_(1)
    torch.testing.assert_close(nz.cpu(), torch.nonzero((torch.arange(6.0) + 1) * 3 > 7))
    torch.testing.assert_close(x.cpu(), (torch.arange(6.0) + 1) * 3 + 1)


def test_edge_values_complex_conj_views_and_empty_tensors(policy):
    x = torch.tensor([NAN, -NAN, INF, -INF, -0.0, 0.0, 1.5, -2.5])
    t = x.to("tpu")
    torch.testing.assert_close((t * 2 - t.abs()).clamp(-3, 3).cpu(), (x * 2 - x.abs()).clamp(-3, 3), equal_nan=True)
    z = torch.complex(torch.randn(3, 4), torch.randn(3, 4))
    zt = z.to("tpu")
    torch.testing.assert_close((zt * zt.conj() + zt.conj().neg()).cpu(), z * z.conj() + z.conj().neg())
    e = torch.ones(0, 3, device="tpu")
    assert (e * 2 + 1).sum(0).cpu().tolist() == [0.0, 0.0, 0.0]
    i = torch.arange(10.0, device="tpu") * 2
    torch.testing.assert_close(i[torch.tensor([-1, -3, 0], device="tpu")].cpu(), torch.tensor([18.0, 14.0, 0.0]))


def test_autograd_runs_fused_and_matches_the_cpu(policy):
    x = torch.randn(6, 5, requires_grad=True)
    xt = x.detach().to("tpu").requires_grad_()
    ((x.sin() * x).sum(1) ** 2).mean().backward()
    ((xt.sin() * xt).sum(1) ** 2).mean().backward()
    torch.testing.assert_close(xt.grad.cpu(), x.grad)


def test_mlp_training_losses_match_strict_and_the_cpu(policy):
    def train(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(1)
        losses = []
        for _ in range(6):
            x, y = torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)
            loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    cpu = train("cpu")
    fused = train("tpu")
    with torch.tpu.eager_mode("strict"):
        strict = train("tpu")
    assert fused == pytest.approx(cpu, rel=1e-4, abs=1e-5)
    assert fused == pytest.approx(strict, rel=1e-5, abs=1e-6)


def test_tiny_llm_generate_is_token_exact_with_far_fewer_launches(tmp_path, policy):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    torch.manual_seed(0)
    cpu_model = transformers.LlamaForCausalLM(config).eval()
    cpu_model.save_pretrained(tmp_path)
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, device_map="tpu")
    ids = torch.tensor([[1, 5, 9, 13, 2]])
    kwargs = dict(max_new_tokens=12, min_new_tokens=12, do_sample=False)  # no early end of sequence
    expected = cpu_model.generate(ids, **kwargs)

    def generate():
        before = launches()
        out = model.generate(ids.to("tpu"), attention_mask=torch.ones_like(ids).to("tpu"), **kwargs)
        return out.cpu().tolist(), launches() - before

    # The fourth call's prompt has recurred unchanged three times, so it is pipelined (more
    # programs); background compiles a stream's program on its second run.
    warm_up = [generate() for _ in range(4 if policy == "inline" else 5)]
    torch_tpu._C._wait_fused_compiles()
    assert all(tokens == expected.tolist() for tokens, _ in warm_up)  # op by op, or fused while compiling
    torch_tpu.metrics.reset()
    fused_tokens, fused_launches = generate()
    assert stats()["ran_strict"] == {}
    assert stats()["assembled"] == 0, stats()
    with torch.tpu.eager_mode("strict"):
        strict_tokens, strict_launches = generate()
    assert fused_tokens == strict_tokens == expected.tolist()
    assert fused_launches * 10 <= strict_launches, (fused_launches, strict_launches)
    # The prompt's bucketed forward, the cache appends and attention over the cache's capacity
    # are recorded too: without an op limit cutting it, one program per decode step, a few for
    # the prompt and the loop's end.
    with pipelining(0):
        generate()
        torch_tpu._C._wait_fused_compiles()
        whole_tokens, whole_launches = generate()
    assert whole_tokens == expected.tolist()
    assert whole_launches <= kwargs["max_new_tokens"] + 4, whole_launches


def test_a_recurring_stream_runs_in_pipelined_programs_of_the_loop_period():
    # A step that ran unchanged the last three times runs at the pipelining point, so the device
    # runs those ops while the host records the next ones; the next program then ends where its
    # first op recurs (a model's layer), so every later layer runs the same cached program. Until
    # then the stream stays whole: one compile for a one-off stream.
    def step(y, steps=29):  # a prologue of 4 ops that do not recur (a decode step's embedding), then 4 a step
        y = (y.abs() - 1.0).neg().sigmoid()
        for _ in range(steps):
            y = torch.tanh(y * 0.5) * 0.9 + 0.1
        return y

    x, ref = torch.linspace(-2, 2, 37, device="tpu"), torch.linspace(-2, 2, 37)
    x.cpu()
    runs = []
    with pipelining(24):
        for _ in range(6):
            torch_tpu.metrics.reset()
            x, ref = step(x), step(ref)
            torch.testing.assert_close(x.cpu(), ref)
            s = stats()
            runs.append((s["flush_reasons"], s["assembled"]))
    assert runs[0] == ({"host read": 1}, 1), runs  # the first time: one program
    assert runs[1] == runs[2] == ({"host read": 1}, 0), runs  # the same step again, twice: cached
    # Then 24 ops (the pipelining point), 5 programs of 16 ending at the loop boundary, and the
    # last 16 at the host read: two programs to compile (the first chunk and the loop body).
    assert runs[3] == ({"pipelined": 1, "loop boundary": 5, "host read": 1}, 2), runs
    assert runs[4] == runs[5] == ({"pipelined": 1, "loop boundary": 5, "host read": 1}, 0), runs
    # A stream that changes after the pipelining point every time (the same first 24 ops, then
    # another number of steps) is cut once, the first time (it had recurred), then no more.
    reasons = []
    with pipelining(24):
        for steps in (8, 9, 10, 11):
            torch_tpu.metrics.reset()
            torch.testing.assert_close(step(x, steps).cpu(), step(ref, steps))
            reasons.append(stats()["flush_reasons"])
    assert reasons[0]["pipelined"] == 1 and reasons[1:] == [{"host read": 1}] * 3, reasons
    with pipelining(0):
        torch_tpu.metrics.reset()
        x, ref = step(x), step(ref)
        torch.testing.assert_close(x.cpu(), ref)
        assert stats()["flush_reasons"] == {"host read": 1}
    with pytest.raises((ValueError, TypeError), match="pipelining point|incompatible"):
        torch_tpu._C._set_fused_pipeline_ops(-1)


def test_the_pipelining_variable_is_checked():
    code = "import torch, torch_tpu\nprint((torch.ones(3, device='tpu') * 2).sum().item())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, TORCH_TPU_EAGER_MODE="fused", TORCH_TPU_FUSED_PIPELINE_OPS="lots"))
    assert out.returncode != 0 and "TORCH_TPU_FUSED_PIPELINE_OPS must be a non-negative integer, got 'lots'" in out.stderr


def test_prompts_of_one_bucket_run_as_programs_over_it_and_compile_once(tmp_path):
    # A prompt uploaded as a padded prefix of its bucket (dynamism.md): its ops have a runtime
    # length, recorded like any other op; a new length in the same bucket is the same program.
    transformers = pytest.importorskip("transformers")
    config = transformers.Qwen3Config(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=512)
    torch.manual_seed(0)
    cpu_model = transformers.Qwen3ForCausalLM(config).eval()
    cpu_model.save_pretrained(tmp_path)
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, device_map="tpu")
    kwargs = dict(max_new_tokens=4, min_new_tokens=4, do_sample=False)
    g = torch.Generator().manual_seed(5)
    # One bucket (128) for the prompt and the cache it grows into (a prompt of 125 or more would
    # grow the cache into the next capacity, 256): its lower edge, the middle, its upper edge.
    lengths = [9, 37, 2, 64, 124, 3]
    results = []
    for length in lengths:
        ids = torch.randint(0, 256, (1, length), generator=g)
        before = (launches(), executables_built())
        out = model.generate(ids.to("tpu"), attention_mask=torch.ones_like(ids).to("tpu"), **kwargs)
        results.append((length, launches() - before[0], executables_built() - before[1]))
        assert out.cpu().tolist() == cpu_model.generate(ids, **kwargs).tolist(), length
    # After the first request, a new length in the bucket compiles nothing and runs no op strict.
    assert all(built == 0 for _, _, built in results[2:]), results
    # Every later length in the bucket runs the same programs.
    assert len({launched for _, launched, _ in results[1:]}) == 1, results


def test_calls_that_run_strict_are_counted_by_op_and_reason():
    torch_tpu.metrics.reset()
    x = torch.arange(6.0, device="tpu") * 2
    e = torch.empty(0, 3, device="tpu")
    for _ in range(2):
        e.mul_(x.sum())  # an in-place write to an empty tensor is not recorded
    assert e.shape == (0, 3) and x.sum().item() == 30.0
    assert stats()["ran_strict"] == {"mul_.Tensor: an empty argument written in place": 2}
    assert "calls run strict (not recorded; each cuts the stream): mul_.Tensor: an empty argument written in place 2" \
        in torch_tpu.metrics.report()


def test_trace_names_each_op_that_runs_strict_and_why():
    code = (
        "import torch, torch_tpu\n"
        "x = torch.arange(6.0, device='tpu') * 2\n"
        "e = torch.ones(0, 3, device='tpu')\n"
        "e.mul_(x.sum())\n"  # an in-place write to an empty tensor runs strict, after the stream
        "print(torch.nonzero(x > 3).sum().item(), e.shape[0])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, TORCH_TPU_EAGER_MODE="fused", TORCH_TPU_FUSED_TRACE="1"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["14", "0"]
    assert "torch-tpu fused: mul_.Tensor runs strict: an empty argument written in place" in out.stderr, out.stderr
    assert "at strict launch: compiled now" in out.stderr, out.stderr
    ops = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, TORCH_TPU_EAGER_MODE="fused", TORCH_TPU_FUSED_TRACE="ops"))
    per_op = [line.split() for line in ops.stderr.splitlines() if line.startswith("torch-tpu fused:   ")]
    assert [words[3] for words in per_op][:2] == ["arange.start_out", "mul.Tensor"], ops.stderr
    assert all(len(words[4]) == 16 for words in per_op), per_op  # the call signature's hash


def test_tiny_transformer_training_losses_match_the_cpu():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)

    def train(device):
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(config).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        g = torch.Generator().manual_seed(3)
        losses = []
        for _ in range(4):
            ids = torch.randint(0, 128, (2, 12), generator=g).to(device)
            loss = model(input_ids=ids, labels=ids).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    assert train("tpu") == pytest.approx(train("cpu"), rel=1e-4, abs=1e-5)


def test_a_new_stream_runs_op_by_op_until_its_program_compiles_in_the_background():
    torch_tpu._C._set_fused_compile("background")
    x = torch.randn(5, 7)
    xt = x.to("tpu")

    def step(t):
        return ((t * 1.5).tanh() + 0.25).softmax(-1).sum(0)

    torch_tpu.metrics.reset()
    counts = []
    for i in range(4):
        before = launches()
        torch.testing.assert_close(step(xt).cpu(), step(x))
        counts.append(launches() - before)
        if i == 1:
            torch_tpu._C._wait_fused_compiles()
    s = stats()
    # 1st run: op by op; 2nd: op by op, its program queued; then the program, one launch.
    assert counts[0] == counts[1] >= 5 and counts[2:] == [1, 1], counts
    assert (s["op_by_op_runs"], s["background_compiles"], s["programs_run"], s["cache_hits"]) == (2, 1, 2, 2)
    assert s["op_by_op_ops"] == s["ops_recorded"] == 2 * counts[0]
    report = torch_tpu.metrics.report()
    assert "1 in the background" in report and "run op by op while not compiled: 2 streams" in report


def test_a_steady_loop_compiles_no_more_on_the_callers_thread_than_strict_eager():
    def loop():
        x = torch.linspace(-1, 1, 37, device="tpu")
        sums = []
        for _ in range(8):
            x = torch.tanh(x * 1.25 + 0.5) - x.mean()
            sums.append(x.sum().item())
        return sums, x.cpu()

    torch_tpu._C._clear_executable_caches()
    with torch.tpu.eager_mode("strict"):
        before = executables_built()
        strict = loop()
        strict_built = executables_built() - before
    torch_tpu._C._clear_executable_caches()
    torch_tpu._C._set_fused_compile("background")
    torch_tpu.metrics.reset()
    before = executables_built()
    fused = loop()
    torch_tpu._C._wait_fused_compiles()
    s = stats()
    on_the_callers_thread = executables_built() - before - s["compiles"]
    # Op by op is strict eager's executables; the fused program may round differently.
    torch.testing.assert_close(torch.tensor(fused[0]), torch.tensor(strict[0]))
    torch.testing.assert_close(fused[1], strict[1])
    assert 0 < on_the_callers_thread <= strict_built, (on_the_callers_thread, strict_built)
    assert s["background_compiles"] >= 1 and s["op_by_op_compiles"] <= strict_built


def run_background_policy(code, **env):
    """Runs `code` in a new process in fused eager with background compiles; its stdout's words."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, TORCH_TPU_EAGER_MODE="fused", TORCH_TPU_FUSED_COMPILE="background", **env))
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_the_process_exits_cleanly_while_a_program_compiles_in_the_background():
    code = (
        "import torch, torch_tpu\n"
        "x = torch.randn(64, 64, device='tpu')\n"
        "torch.tpu.synchronize()\n"  # the draw runs alone: the loop's two streams are the same
        "for _ in range(2):\n"  # the second run queues the program's compile; then the process ends
        "    y = x\n"
        "    for _ in range(12): y = (y @ x).tanh() * 0.5 + y.sin()\n"
        "    y.sum().item()\n"
        "print('queued', torch_tpu._C._fused_stats()['background_compiles'])\n"
    )
    words = run_background_policy(code)
    assert words[0] == "queued" and int(words[1]) >= 1, words


def test_a_bad_compile_policy_is_an_error_naming_the_variable():
    code = "import torch, torch_tpu; x = torch.ones(3, device='tpu') * 2; print(x.sum().item())"
    bad = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, TORCH_TPU_EAGER_MODE="fused", TORCH_TPU_FUSED_COMPILE="later"))
    assert bad.returncode != 0 and "TORCH_TPU_FUSED_COMPILE" in bad.stderr and "got 'later'" in bad.stderr
    with pytest.raises(ValueError, match="'background' or 'inline'"):
        torch_tpu._C._set_fused_compile("soon")


def test_no_new_compiles_names_a_new_fused_program():
    x = torch.randn(9, 4, device="tpu")
    torch.tpu.synchronize()  # the draw runs alone
    (x * 2 + 1).sum().item()  # warm: this stream's program exists
    with torch.tpu.no_new_compiles():
        (x * 2 + 1).sum().item()
    with pytest.raises(torch_tpu.dynamism.NewCompileError, match="1 of them fused eager programs"):
        with torch.tpu.no_new_compiles():
            (x * 3 - x.exp()).amax().item()  # a new stream signature


def test_a_process_forked_while_a_program_compiles_exits_cleanly():
    # A DataLoader worker forked while the worker thread compiles: the child has no worker thread
    # and must neither hang at exit nor wait for the parent's compile.
    code = (
        "import multiprocessing as mp, torch, torch_tpu\n"
        "ws = [torch.randn(48 + i, 49 + i, device='tpu') for i in range(40)]\n"
        "torch.tpu.synchronize()\n"
        "for _ in range(2):\n"  # one long stream (no signature recurs in it); its second run queues it
        "    y = torch.ones(2, 48, device='tpu')\n"
        "    for w in ws: y = (y @ w).tanh()\n"
        "    y.sum().item()\n"
        "p = mp.get_context('fork').Process(target=sum, args=([1, 2],))\n"
        "p.start(); p.join(120)\n"
        "print('child', p.exitcode)\n"
        "torch_tpu._C._wait_fused_compiles()\n"
        "print('queued', torch_tpu._C._fused_stats()['background_compiles'])\n"
    )
    words = run_background_policy(code, TORCH_TPU_FUSED_PIPELINE_OPS="0")  # the whole stream recurs
    assert words[:2] == ["child", "0"] and words[2] == "queued" and int(words[3]) >= 1, words


def test_random_ops_are_recorded_with_their_keys_in_program_order(policy):
    def run():
        torch.manual_seed(3)
        x = torch.ones(64, 3, device="tpu")
        g = torch.Generator("tpu").manual_seed(11)
        a = torch.nn.functional.dropout(x * 2, 0.3)
        b = torch.rand(64, 3, device="tpu") + a
        c = torch.nn.functional.dropout(b, 0.5)
        d = torch.randn(5, device="tpu", generator=g) * 0 + torch.randn(5, device="tpu", generator=g)
        before = launches()
        out = torch.stack([a, c]).cpu(), d.cpu()
        return out, launches() - before, torch.rand(4, device="tpu").cpu()

    (fused, d_fused), fused_launches, next_fused = run()
    with torch.tpu.eager_mode("strict"):
        (strict, d_strict), _, next_strict = run()
    assert torch.equal(fused == 0, strict == 0)  # the same dropout masks: the same keys
    torch.testing.assert_close(fused, strict)
    torch.testing.assert_close(d_fused, d_strict)
    assert torch.equal(next_fused, next_strict)  # the generator advanced as in strict eager
    if policy == "inline":
        assert fused_launches == 1  # the draws stay inside the program
