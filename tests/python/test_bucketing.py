"""Bounded dynamism (docs/bucketing.md): a prompt's token ids (a batch of them too) are uploaded
into a bucket, and the ops computed from them run their rules over the bucket with the true length a
runtime size (XLA's dynamic padder masks the spare rows). Values must be exactly the CPU's; a new
length in a bucket already seen compiles nothing."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from helpers import DEV, executables_built, fallbacks


def is_padded(t):
    """Whether t's storage holds spare rows (a padded prefix)."""
    return t.untyped_storage().nbytes() > t.numel() * t.element_size()


def ids_of(length, neighbours=False, seed=0):
    """[1, length] token ids in [8, 256). With `neighbours`, the padding's neighbours are special:
    id 0 at row 0 and id 7 at the last row (NaN and inf in `values_of`)."""
    ids = torch.randint(8, 256, (1, length), generator=torch.Generator().manual_seed(seed))
    if neighbours:
        ids[0, 0] = 0
        ids[0, -1] = 7
    return ids


def assert_a_warm_bucket_compiles_nothing(fn, warm_length, lengths):
    """fn(ids) once at `warm_length`, then at each of `lengths` (same bucket): the CPU's values,
    and no executable built after the first call."""
    fn(ids_of(warm_length).to(DEV)).cpu()
    built = executables_built()
    for length in lengths:
        ids = ids_of(length, seed=length)
        torch.testing.assert_close(fn(ids.to(DEV)).cpu(), fn(ids))
    assert executables_built() == built


def values_of(ids):
    """[1, L, 4] floats computed from ids with pointwise ops: NaN where an id is 0, inf where it
    is 7. On tpu the spare rows hold id 0, so they are NaN: a reduction that let them in would
    be NaN."""
    a = ids.float()
    r = a / a * a / 64 + 1 / (a - 7)
    return r.unsqueeze(-1) * torch.tensor([1.0, -0.5, 0.25, 2.0], device=ids.device)


def test_prompt_ids_upload_into_a_bucket_and_stay_contiguous():
    for length, capacity in ((2, 128), (37, 128), (127, 128), (129, 256)):
        ids = ids_of(length)
        dev = ids.to(DEV)
        assert dev.is_contiguous() and dev.shape == ids.shape
        assert dev.untyped_storage().nbytes() == capacity * 8
        assert torch.equal(dev.cpu(), ids)
    # A bucket's own length, other dtypes and ranks, and tables of more rows than a batch of
    # prompts has upload as they are.
    for t in (ids_of(128), torch.ones(1, 37, dtype=torch.int32), torch.ones(37, dtype=torch.long),
              torch.ones(1, 1, dtype=torch.long), torch.ones(65, 2, dtype=torch.long)):
        assert not is_padded(t.to(DEV)), t.shape


def test_a_batch_of_prompts_uploads_into_a_bucket_of_rows_and_views_densely():
    """A left-padded batch [B, L] uploads as the first L columns of [B, C]: not contiguous
    (strides [C, 1]), as a grown KV cache is not; view() across the rows makes it dense first."""
    ids = torch.cat([ids_of(37, seed=s) for s in range(3)])
    ids[1:, :5] = 0  # left padding
    dev = ids.to(DEV)
    assert dev.shape == (3, 37) and dev.stride() == (128, 1) and not dev.is_contiguous()
    assert torch.equal(dev.cpu(), ids)
    assert torch.equal(dev.view(-1).cpu(), ids.view(-1))  # dense now, the same values
    assert dev.is_contiguous() and torch.equal(dev.cpu(), ids)
    # (A Python handle on the storage would keep it shared, and view() would raise as it did.)
    assert ids.to(DEV).untyped_storage().nbytes() == 3 * 128 * 8
    assert torch.equal(ids.to(DEV).contiguous().cpu(), ids)


INTEGER_DIVISIONS = {
    "div floor": lambda x, y: torch.div(x, y, rounding_mode="floor"),
    "div trunc": lambda x, y: torch.div(x, y, rounding_mode="trunc"),
    "floor_divide": torch.floor_divide,
    "remainder": torch.remainder,
    "fmod": torch.fmod,
}


def test_integer_division_by_bucketed_ids_checks_only_the_true_values():
    """The spare columns of a bucketed upload hold zeros: an integer division by it must not
    raise ZeroDivisionError for them (the device check reads the operand's values), and a real
    zero must still raise. (A batch's divisor: test_ops_elementwise's int64 [5, 6] one, bucketed
    too. Each int64 division module costs libtpu ~5-30 s to compile in the AOT slice.)"""
    x = torch.arange(6).reshape(1, 6) + 7
    y = torch.arange(6).reshape(1, 6) % 5 + 1
    for name, fn in INTEGER_DIVISIONS.items():
        assert torch.equal(fn(x.to(DEV), y.to(DEV)).cpu(), fn(x, y)), name
    y[0, 2] = 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.remainder(x.to(DEV), y.to(DEV)).cpu()


def batch_of_ids(length, seed=0):
    """[3, length] ids, rows seeded apart, with NaN/inf ids next to the padding (values_of)."""
    return torch.cat([ids_of(length, neighbours=True, seed=seed + row) for row in range(3)])


MATMULS = {
    "matmul": lambda x, w, b: x @ w,
    "linear": lambda x, w, b: F.linear(x, w.T),
    "linear with bias": lambda x, w, b: F.linear(x, w.T, b),
    "matrix-vector": lambda x, w, b: x @ w[:, 0],
}


@pytest.mark.parametrize("length", [2, 3, 127, 129, 200])
def test_matmul_of_a_padded_batch_runs_over_the_bucket(length):
    """x @ w of a [3, L, 4] padded batch: PyTorch folds it into [3 * L, 4] rows, which would copy
    them dense; it runs over the bucket's rows instead (growing_matmul.cc) and stays padded."""
    ids = batch_of_ids(length, seed=length)
    cpu, dev = values_of(ids), values_of(ids.to(DEV))
    assert is_padded(dev) and not dev.is_contiguous()
    g = torch.Generator().manual_seed(2)
    w, b = torch.randn(4, 6, generator=g), torch.randn(6, generator=g)
    for name, fn in MATMULS.items():
        got = fn(dev, w.to(DEV), b.to(DEV))
        torch.testing.assert_close(got.cpu(), fn(cpu, w, b), equal_nan=True, msg=lambda m: f"{name}: {m}")
        assert got.shape == fn(cpu, w, b).shape
    assert is_padded(dev @ w.to(DEV))
    with torch.inference_mode():  # autograd's keys skipped: the same path
        got = values_of(ids.to(DEV)) @ w.to(DEV)
        assert is_padded(got)
        torch.testing.assert_close(got.cpu(), cpu @ w, equal_nan=True)


def test_a_decode_steps_positions_stay_in_the_bucket_after_many_ops_over_it():
    """arange(kv_length) of a decode step joins the bucket when arange(kv_length - 1) came
    shortly before. The engine's own positions over a capacity (here each conv's, which zeroes
    its spare rows) are not remembered: a 6-layer model's 40-odd of them pushed the prompt's
    length out, and every request then compiled its first decode step's masks exactly."""
    ids = ids_of(50).to(DEV)
    assert is_padded(torch.arange(50, device=DEV))  # the prompt's positions
    x = values_of(ids).transpose(1, 2)  # [1, 4, 50], padded along the last dim
    w = torch.randn(4, 1, 3, generator=torch.Generator().manual_seed(6)).to(DEV)
    for _ in range(40):
        y = F.conv1d(x, w, padding=2, groups=4)
    assert is_padded(y)
    grown = torch.cat([ids, ids[:, -1:]], dim=1)  # a decode step appends a token: 51
    positions = torch.arange(51, device=DEV)
    assert is_padded(grown) and is_padded(positions)
    torch.testing.assert_close(positions.cpu(), torch.arange(51))


def test_views_of_a_padded_batch_product_match_cpu():
    """The product's padded result is not a view of a temporary (it is made below
    ADInplaceOrView), so view(-1), which needs it dense, moves it as for any padded result."""
    ids = batch_of_ids(20)
    w = torch.randn(4, 6, generator=torch.Generator().manual_seed(5))
    got, want = values_of(ids.to(DEV)) @ w.to(DEV), values_of(ids) @ w
    assert not got._is_view()
    torch.testing.assert_close(got.view(-1).cpu(), want.view(-1), equal_nan=True)


def test_matmul_of_a_padded_batch_compiles_nothing_in_a_warm_bucket():
    w = torch.randn(4, 6, generator=torch.Generator().manual_seed(3))
    fn = lambda ids: values_of(ids) @ w.to(ids.device)  # noqa: E731
    fn(batch_of_ids(40).to(DEV)).cpu()
    built = executables_built()
    for length in (41, 77, 100):
        ids = batch_of_ids(length, seed=length)
        torch.testing.assert_close(fn(ids.to(DEV)).cpu(), fn(ids), equal_nan=True)
    assert executables_built() == built


@pytest.mark.parametrize("length", [2, 3, 64, 127, 129, 200])
def test_in_place_pointwise_ops_on_a_padded_prefix_run_over_the_bucket(length):
    """add_, mul_ and clamp_ of a padded prefix that owns its storage write the whole bucket and
    keep it; one that shares its storage (a slice: another tensor's rows may lie in its spare rows)
    takes the exact path and leaves the other tensor's rows alone."""
    for ids in (ids_of(length, neighbours=True, seed=length), batch_of_ids(length, seed=length)):
        dev_ids = ids.to(DEV)
        got, want = values_of(dev_ids), values_of(ids)
        scale = torch.tensor([2.0, 3.0, 4.0, 5.0])
        for t, other, s in ((got, values_of(dev_ids) * 2, scale.to(DEV)), (want, values_of(ids) * 2, scale)):
            t.add_(other, alpha=0.5).mul_(s).clamp_(min=-1.0)
        assert is_padded(got)
        torch.testing.assert_close(got.cpu(), want, equal_nan=True)
        shared = values_of(dev_ids)
        neighbour = shared[..., 1:2]
        before = neighbour.cpu()
        shared[..., :1].add_(1.0)
        torch.testing.assert_close(neighbour.cpu(), before, equal_nan=True)
        torch.testing.assert_close(shared.cpu(), values_of(ids) + torch.tensor([1.0, 0, 0, 0]), equal_nan=True)


@pytest.mark.strict_eager
def test_in_place_ops_on_a_padded_prefix_compile_nothing_in_a_warm_bucket():
    def accumulate(ids):
        x = values_of(ids)
        return x.add_(values_of(ids) * 3)

    accumulate(batch_of_ids(40).to(DEV)).cpu()
    built = executables_built()
    for length in (41, 77, 100):
        ids = batch_of_ids(length, seed=length)
        torch.testing.assert_close(accumulate(ids.to(DEV)).cpu(), accumulate(ids), equal_nan=True)
    assert executables_built() == built


def test_matmul_of_a_padded_batch_that_records_autograd_matches_cpu():
    """With autograd recording, the product records its own node over the bucket
    (test_bucketed_training.py): the same values and gradients as the CPU."""
    ids = batch_of_ids(37)
    w = torch.randn(4, 6, generator=torch.Generator().manual_seed(4))
    x_cpu = values_of(ids).nan_to_num(0.0, 1e4, -1e4).requires_grad_()
    x_dev = values_of(ids.to(DEV)).nan_to_num(0.0, 1e4, -1e4).detach().requires_grad_()
    w_cpu, w_dev = w.clone().requires_grad_(), w.to(DEV).requires_grad_()
    (x_cpu @ w_cpu).square().sum().backward()
    (x_dev @ w_dev).square().sum().backward()
    torch.testing.assert_close(x_dev.grad.cpu(), x_cpu.grad)
    torch.testing.assert_close(w_dev.grad.cpu(), w_cpu.grad)


@pytest.mark.parametrize("length", [2, 3, 64, 127, 129, 200])
@pytest.mark.parametrize("neighbours", [False, True], ids=["finite", "nan_inf_neighbours"])
def test_ops_over_a_bucket_match_cpu(length, neighbours):
    ids = ids_of(length, neighbours, seed=length)
    cpu, dev = values_of(ids), values_of(ids.to(DEV))
    assert is_padded(dev)
    w = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
    before = fallbacks()
    cases = {
        "sum over the length": lambda x: x.sum(1),
        "amax over the length": lambda x: x.amax(1),
        "max over the length": lambda x: x.max(1),
        "logsumexp over the length": lambda x: x.logsumexp(1),
        "softmax over the length": lambda x: x.softmax(1),
        "log_softmax over the length": lambda x: x.log_softmax(1),
        "cumsum along the length": lambda x: x.cumsum(1),
        "mean over the length": lambda x: x.mean(1),
        "mean over the features": lambda x: x.mean(2),
        "var over the features": lambda x: x.var(2),
        "layer norm": lambda x: F.layer_norm(x, (4,)),
        "contraction over the length": lambda x: x.transpose(1, 2) @ x,
        "rows times a weight": lambda x: x @ w.to(x.device),
        "cat along the features": lambda x: torch.cat([x, -x], -1),
        "reshape copy": lambda x: x.transpose(1, 2).reshape(1, -1),
    }
    for name, f in cases.items():
        got = f(dev)
        want = f(cpu)
        for g, e in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            torch.testing.assert_close(g.cpu(), e, equal_nan=True, msg=lambda m: f"{name}: {m}")
    assert fallbacks() == before


def test_a_call_at_a_new_length_reuses_its_result_shapes():
    """Which result dims of a call over the bucket are padded is read from PyTorch's meta kernels
    once per form of call (its op, arguments and sizes, the length written as L); the same call
    at another length reuses it, and a call refused over the bucket stays refused. Lengths where
    another size equals the length (4, the features) or lies on its other side are forms of
    their own. Values are the CPU's either way."""
    w = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))

    def calls(ids):
        x = values_of(ids)
        exact = x.cpu().to(ids.device)  # the same values, not padded: contracted with x, only the true rows agree
        return (x.sum(1), x.mean(2), x.softmax(1), x @ w.to(x.device), torch.cat([x, -x], -1),
                x.transpose(1, 2) @ exact, x.logsumexp(1))

    def check(length):
        ids = ids_of(length, neighbours=True, seed=length)
        for got, want in zip(calls(ids.to(DEV)), calls(ids)):
            torch.testing.assert_close(got.cpu(), want, equal_nan=True, msg=lambda m: f"length {length}: {m}")

    check(40)
    before = torch_tpu._C._bucket_decisions()
    for length in (41, 77, 127, 9):
        check(length)
    after = torch_tpu._C._bucket_decisions()
    assert after["decided"] == before["decided"], (before, after)
    assert after["reused"] - before["reused"] >= 4 * 6, (before, after)
    for length in (4, 2, 3, 5):  # the features' size equal to the length, or above it
        check(length)
    assert "reused" in torch_tpu.metrics.report()


def causal_lm_step(ids, labels, table, weight):
    """A causal LM's training step in miniature: embedding, a rotary-like half swap, causal
    attention, logits, and Transformers' loss (the labels padded by one ignored row, then shifted by one); returns the loss and the
    gradients of the table and the weight."""
    table = table.to(ids.device, copy=True).requires_grad_()
    weight = weight.to(ids.device, copy=True).requires_grad_()
    length = ids.shape[1]
    x = F.embedding(ids, table)  # [1, L, 16]
    q = x.view(1, length, 2, 8).transpose(1, 2)
    k = torch.cat([-q[..., 4:], q[..., :4]], -1)  # rotate_half: its backward is slice_backward
    a = F.scaled_dot_product_attention(q, k, q + 1, is_causal=True).transpose(1, 2).reshape(1, length, 16)
    logits = (x + a + torch.tanh(x) * x.softmax(1)) @ weight
    shifted = F.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()
    loss = F.cross_entropy(logits.view(-1, 256).float(), shifted.view(-1))
    loss.backward()
    return loss.detach(), table.grad, weight.grad


def test_a_causal_lm_loss_and_its_gradients_run_over_the_bucket():
    """Training on a bucketed prompt: the loss's shifted labels (labels[..., 1:], a view from row 1
    of the bucket, copied to row 0 of a fresh one), log_softmax and nll_loss forward and backward,
    attention's backward and slice's backward run over the bucket. Loss and gradients are the
    CPU's; the spare rows hold NaN (embedding row 0) and never reach them. At a new length in a
    warm bucket only the ops still exact compile (the embedding's backward, an in-place sum of
    gradients)."""
    gen = torch.Generator().manual_seed(0)
    table = torch.randn(256, 16, generator=gen)
    table[0] = float("nan")  # the spare rows' id: true ids are 8..255
    weight = torch.randn(16, 256, generator=gen) * 0.1

    def check(length):
        ids = ids_of(length, seed=length)
        got = causal_lm_step(ids.to(DEV), ids.to(DEV), table, weight)
        want = causal_lm_step(ids, ids, table, weight)
        for name, g, w in zip(("loss", "table grad", "weight grad"), got, want):
            torch.testing.assert_close(g.cpu(), w, msg=lambda m: f"length {length}, {name}: {m}")

    check(40)
    check(50)
    built = executables_built()
    for length in (41, 77, 127, 2):
        check(length)
    built = executables_built() - built
    assert built / 4 <= 6, built  # 11 per length before the loss and backward ops ran over the bucket


def test_embedding_and_attention_over_a_bucket_match_cpu():
    # Row 0 is NaN: the spare rows' id (true ids are 8..255), so the spare keys and values are
    # NaN. A spare value row once reached every true row as 0 * NaN.
    table = torch.randn(256, 16, generator=torch.Generator().manual_seed(0))
    table[0] = float("nan")
    for length in (5, 90):
        ids = ids_of(length, seed=length)
        outs = []
        for t in (ids, ids.to(DEV)):
            x = F.embedding(t, table.to(t.device))  # [1, L, 16]
            q = x.view(1, length, 2, 8).transpose(1, 2)
            outs.append(F.scaled_dot_product_attention(q, q * 0.5, q + 1, is_causal=True))
        assert is_padded(outs[1])
        torch.testing.assert_close(outs[1].cpu(), outs[0])


def test_a_new_length_in_a_seen_bucket_compiles_nothing():
    def step(ids):
        x = values_of(ids)
        return (x.softmax(1) * x.mean(2, keepdim=True)).sum(1)

    assert_a_warm_bucket_compiles_nothing(step, 40, (3, 77, 127))


def test_a_call_that_cannot_run_over_the_capacity_refuses_only_calls_like_it():
    # An attention mask sized to the true key length cannot broadcast over the key capacity: the
    # call runs exactly. This used to stop bucketing attention for the rest of the process.
    table = torch.randn(256, 16, generator=torch.Generator().manual_seed(0))

    def attention(ids, masked):
        x = F.embedding(ids, table.to(ids.device)).view(1, -1, 2, 8).transpose(1, 2)  # [1, 2, L, 8]
        mask = None
        if masked:  # causal, and the first key hidden from all but the first query
            length = ids.shape[1]
            mask = torch.ones(length, length, dtype=torch.bool, device=ids.device).tril()
            mask[1:, 0] = False
        return F.scaled_dot_product_attention(x, x * 0.5, x + 1, attn_mask=mask)

    for length in (5, 9, 40):
        ids = ids_of(length, seed=length)
        torch.testing.assert_close(attention(ids.to(DEV), True).cpu(), attention(ids, True))
    assert_a_warm_bucket_compiles_nothing(lambda ids: attention(ids, False), 6, (7, 77, 127))


def test_a_prompts_write_into_a_static_cache_runs_over_the_bucket():
    """StaticCache's prefill: cache.index_copy_(2, positions, keys) with positions and keys padded
    prefixes (spare positions 0, spare keys NaN): the rows past the length are never written, and
    a new length in a seen bucket compiles nothing."""
    table = torch.randn(256, 8, generator=torch.Generator().manual_seed(3))
    cpu_cache = torch.randn(1, 2, 300, 4, generator=torch.Generator().manual_seed(4))

    def prefill(ids, cache, offset):
        keys = F.embedding(ids, table.to(ids.device)).view(1, -1, 2, 4).transpose(1, 2)  # [1, 2, L, 4]
        keys = keys / (ids != 0).to(keys.dtype).view(1, 1, -1, 1)  # id 0 (the spare rows on tpu): inf
        positions = torch.arange(ids.shape[1], device=ids.device) + offset
        cache.index_copy_(2, positions, keys)
        return cache

    def run(length, offset):
        ids = ids_of(length, seed=length)
        got = prefill(ids.to(DEV), cpu_cache.to(DEV), offset)
        assert torch.equal(got.cpu(), prefill(ids, cpu_cache.clone(), offset)), length

    run(40, 5)
    built = executables_built()
    for length, offset in ((3, 0), (77, 9), (127, 100)):
        run(length, offset)
    assert executables_built() == built


def test_mark_dynamic_buckets_a_device_tensor():
    x = torch.randn(1, 37, 4, generator=torch.Generator().manual_seed(0))
    d = x.to(DEV)
    assert torch_tpu.mark_dynamic(d, -2, min=1, max=512) is d
    assert is_padded(d) and d.is_contiguous() and d.shape == x.shape
    torch.testing.assert_close(d.softmax(1).cpu(), x.softmax(1))
    torch.testing.assert_close(d.cpu(), x)
    # A batch of two: the bucketed dim is not the outermost, so the tensor is a strided view.
    y = torch.randn(2, 37, 4)
    e = torch_tpu.mark_dynamic(y.to(DEV), 1)
    torch.testing.assert_close(e.sum(1).cpu(), y.sum(1))


def test_mark_dynamic_bad_input_raises():
    d = torch.ones(1, 37, 4, device=DEV)
    with pytest.raises(ValueError, match=r"min \(5\) is greater than max \(3\)"):
        torch_tpu.mark_dynamic(d, 1, min=5, max=3)
    with pytest.raises(ValueError, match="size 37, outside the bounds"):
        torch_tpu.mark_dynamic(d, 1, max=16)
    with pytest.raises(IndexError, match="dim 3 is out of range"):
        torch_tpu.mark_dynamic(d, 3)
    with pytest.raises(RuntimeError, match="must own its storage"):
        torch_tpu.mark_dynamic(d[:, :10], 1)
    with pytest.raises(RuntimeError, match="expected a tpu tensor"):
        torch_tpu.mark_dynamic(torch.ones(1, 37), 1)
    with pytest.raises(ValueError, match="0-d"):
        torch_tpu.mark_dynamic(torch.ones((), device=DEV), 0)


@pytest.mark.strict_eager
def test_no_new_compiles_raises_naming_the_recompile():
    a = torch.ones(3, 5, device=DEV)
    (a * 2).cpu()
    with torch.tpu.no_new_compiles():
        (a * 2).cpu()
    b = torch.ones(3, 6, device=DEV)
    with pytest.raises(torch_tpu.dynamism.NewCompileError, match=r"mul.Tensor: argument 0 \(self\): shape"):
        with torch.tpu.no_new_compiles():
            (b * 2).cpu()


def test_bucketing_off_uploads_exact_tensors():
    code = ("import torch, torch_tpu; d = torch.ones(1, 37, dtype=torch.long).to('tpu'); "
            "print(d.untyped_storage().nbytes())")
    env = dict(os.environ, TORCH_TPU_BUCKETING="0", TORCH_TPU_QUIET="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == str(37 * 8)


def test_fine_buckets_policy():
    # In a fresh process (the policy is read once): bucket sizes, and every op of
    # test_ops_over_a_bucket_match_cpu at lengths whose buckets are not powers of two.
    code = r"""
import sys, torch, torch_tpu
sys.path.insert(0, sys.argv[1])
import test_bucketing as t
for length, bucket in ((2, 16), (17, 20), (65, 80), (100, 112), (129, 160), (300, 320), (512, 512)):
    d = t.ids_of(length).to("tpu")
    assert d.untyped_storage().nbytes() == bucket * 8, (length, d.untyped_storage().nbytes())
for length in (17, 65, 300):
    for neighbours in (False, True):
        t.test_ops_over_a_bucket_match_cpu(length, neighbours)
print("ok")
"""
    env = dict(os.environ, TORCH_TPU_BUCKETING="fine", TORCH_TPU_QUIET="1")
    out = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__)], env=env, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "ok"
