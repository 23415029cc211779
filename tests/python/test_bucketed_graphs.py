"""Compiled graphs over buckets (torch_tpu/compile/bucketed_graphs.py, docs/bucketing.md): a
dynamic-shape graph compiles once per bucket of its varying size, never with a different value
than the CPU; graphs that would not be exact over padding keep the per-shape path and say why."""
import pytest
import torch

import torch_tpu
from torch_tpu.compile import stats

from helpers import DEV, rand

# Sizes at the default buckets' edges (powers of two from 128): 2 is the smallest size Dynamo
# keeps symbolic, 127/128/129 straddle the first edge.
EDGES = [2, 3, 17, 127, 128, 129, 200]


def buckets_of(sizes):
    return {torch_tpu._C._bucket_for(n) for n in sizes}


def neighbours_poisoned(n, cols=8, seed=0):
    """[n, cols] values with NaN in the first row's first column, +inf and -inf in the last row:
    the padding's neighbours, which a mask that is off by one row would leak into a reduction."""
    x = rand(n, cols, seed=seed)
    x[0, 0] = float("nan")
    x[-1, 1] = float("inf")
    x[-1, 2] = float("-inf")
    return x


def graph_executables_built():
    """Executables compiled for torch.compile graphs (mark_dynamic's pad of a tensor already on
    the device compiles once per size: that is the eager engine's, not the graph's)."""
    return sum(e.compiles for e in list(stats.executables))


def padded_with_nan(t, dim=0):
    """`t` on the device as a padded prefix along `dim` whose spare rows hold NaN: a graph that
    let a spare row into a reduction would give NaN."""
    dev = torch_tpu.mark_dynamic(t.to(DEV), dim)
    capacity = torch_tpu._C._padded_capacity(dev, dim)
    if capacity is not None and dev.is_floating_point():
        torch_tpu._C._whole_capacity(dev, dim, capacity).narrow(dim, t.shape[dim], capacity - t.shape[dim]).fill_(
            float("nan"))
    return dev


def run_sizes(fn, sizes, make, **compile_kw):
    """Runs torch.compile(fn, backend="tpu", dynamic=True) over `sizes` on padded tpu inputs
    (torch_tpu.mark_dynamic) and the CPU; returns the graph executables built."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="tpu", dynamic=True, **compile_kw)
    built = graph_executables_built()
    for n in sizes:
        args = make(n)
        on_tpu = [padded_with_nan(a) if a.dim() and a.shape[0] == n else a.to(DEV) for a in args]
        with torch.no_grad():
            got = compiled(*on_tpu)
        want = fn(*args)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert g.shape == w.shape, n
            torch.testing.assert_close(g.cpu(), w, equal_nan=True, msg=lambda m: f"size {n}: {m}")
    return graph_executables_built() - built


def test_reductions_contractions_and_softmax_over_the_varying_dim_compile_once_per_bucket():
    w = rand(8, 4, seed=1)

    def fn(x, w):
        scores = x @ w                                   # rows: the varying dim
        return (torch.softmax(scores, dim=0).sum(0), scores.amax(0), x.t() @ x, torch.logsumexp(scores, 0),
                (x * 2).relu())

    before = dict(stats.bucketed_graphs)
    built = run_sizes(fn, EDGES, lambda n: (neighbours_poisoned(n), w))
    assert built <= len(buckets_of(EDGES)), built
    assert sum(stats.bucketed_graphs.values()) - sum(before.values()) == len(buckets_of(EDGES))


def test_scans_slices_from_the_start_and_a_row_prepended_are_exact():
    def fn(x):
        prepended = torch.diff(x, prepend=x[:1] - 1, dim=0)   # cat of one row before the padded rows
        return torch.cumsum(x, 0)[:, :3], prepended, x[2:].sum(0), x[1:].amax(0)

    sizes = [3, 5, 100, 127, 129]
    built = run_sizes(fn, sizes, lambda n: (neighbours_poisoned(n),))
    assert built <= len(buckets_of(sizes)), built


def test_rows_from_the_end_are_read_at_the_true_length():
    # x[-1] and x[-2:] of a padded dim read at a runtime start (a model's logits_to_keep=1).
    def fn(x):
        return x[-1] * 2, x[-2:].sum(0), x[:, -1]

    sizes = [2, 3, 17, 127, 128, 129]
    built = run_sizes(fn, sizes, lambda n: (neighbours_poisoned(n),))
    assert built <= len(buckets_of(sizes)), built


def test_an_append_to_a_padded_prefix_keeps_a_decode_loop_in_its_bucket():
    """A decode step's cat([cache, new_row]): the row is written after the cache's true rows, the
    result comes back as a padded prefix one row longer, and the next step reuses the bucket."""
    def step(cache, row, mask):
        cache = torch.cat([cache, row], dim=0)               # T + 1 rows
        scores = (cache @ row.t()).squeeze(1).masked_fill(~mask, float("-inf"))
        return cache, torch.softmax(scores, 0) @ cache        # attention over T + 1 rows

    torch._dynamo.reset()
    compiled = torch.compile(step, backend="tpu", dynamic=True)
    cache_cpu = neighbours_poisoned(5)
    cache = padded_with_nan(cache_cpu)
    graphs_before = graph_executables_built()
    for t in range(30):
        row = rand(1, 8, seed=t)
        mask = torch.ones(cache_cpu.shape[0] + 1, dtype=torch.bool)
        mask[t % 3] = False
        with torch.no_grad():
            cache, out = compiled(cache, row.to(DEV), mask.to(DEV))
        cache_cpu, want = step(cache_cpu, row, mask)
        torch.testing.assert_close(out.cpu(), want, equal_nan=True, msg=lambda m: f"step {t}: {m}")
        torch.testing.assert_close(cache.cpu(), cache_cpu, equal_nan=True)
    # 35 rows in bucket 128: a static first step, then one graph for the bucket (per shape: 30).
    assert graph_executables_built() - graphs_before <= 3


def test_a_mask_built_from_positions_is_gathered_exactly():
    # What Transformers' mask functions do: padding_mask[batch_idx, kv_idx] with kv_idx = arange.
    def fn(mask, x):
        kv = torch.arange(mask.shape[1], device=mask.device)
        batch = torch.zeros(1, dtype=torch.long, device=mask.device)
        allowed = mask[batch[:, None], kv[None, :]].bool()  # [1, n]
        return torch.where(allowed, x, torch.zeros_like(x)).sum(1)

    def make(n):
        mask = (rand(1, n, seed=n) > 0).long()
        return mask, rand(1, n, seed=n + 1)

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="tpu", dynamic=True)
    before = sum(stats.bucketed_graphs.values())
    for n in [4, 9, 100, 129]:
        mask, x = make(n)
        with torch.no_grad():
            # int64 [1, n] ids and masks are bucketed on upload (docs/bucketing.md)
            got = compiled(mask.to(DEV), padded_with_nan(x, 1))
        torch.testing.assert_close(got.cpu(), fn(mask, x))
    assert sum(stats.bucketed_graphs.values()) - before == 2


@pytest.mark.parametrize("name,fn,reason", [
    ("too far from the end", lambda x: x[-4:].sum(0), "more than its smallest true size"),
    ("mean", lambda x: x.mean(0), "count"),
    ("size as a value", lambda x: x.sum(0) / x.shape[0], "a value computed from the size"),
    ("flip", lambda x: x.flip(0).cumsum(0)[0], "not exact over padding"),
    ("random", lambda x: x + torch.rand_like(x) * 0, "random"),
])
def test_graphs_that_padding_would_change_keep_the_per_shape_path(name, fn, reason):
    before = sum(stats.bucket_refusals.values())
    sizes = [5, 9]
    run_sizes(fn, sizes, lambda n: (neighbours_poisoned(n).nan_to_num(posinf=3, neginf=-3),))
    refusals = [r for r in stats.bucket_refusals if reason in r]
    assert sum(stats.bucket_refusals.values()) > before and refusals, dict(stats.bucket_refusals)


def test_an_input_that_is_not_a_padded_prefix_is_padded_and_a_size_of_its_own_bucket_works():
    def fn(x):
        return torch.softmax(x, dim=0) * x.sum(0)

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="tpu", dynamic=True)
    for n in [3, 6, 128, 40]:  # the first call has no padded input and no size seen to change
        x = neighbours_poisoned(n)
        with torch.no_grad():
            got = compiled(x.to(DEV))
        assert got.shape == (n, 8)
        torch.testing.assert_close(got.cpu(), fn(x), equal_nan=True)


def test_graphs_that_need_gradients_keep_the_per_shape_path():
    w = rand(8, 1, seed=3).requires_grad_()
    wt = w.detach().to(DEV).requires_grad_()

    def fn(x, w):
        return torch.tanh(x @ w).sum()

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="tpu", dynamic=True)
    for n in [4, 7]:
        x = rand(n, 8, seed=n)
        loss = compiled(torch_tpu.mark_dynamic(x.to(DEV), 0), wt)
        loss.backward()
        fn(x, w).backward()
        torch.testing.assert_close(wt.grad.cpu(), w.grad)


def test_outputs_with_the_varying_dim_are_padded_prefixes_that_eager_ops_keep_bucketing():
    def fn(x):
        return x * 3

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="tpu", dynamic=True)
    x = rand(37, 4, seed=5)
    with torch.no_grad():
        y = compiled(torch_tpu.mark_dynamic(x.to(DEV), 0))
    assert y.shape == (37, 4)
    assert torch_tpu._C._padded_capacity(y, 0) == torch_tpu._C._bucket_for(37)
    torch.testing.assert_close(y.cpu(), x * 3)
    torch.testing.assert_close((y.sum(0) + 1).cpu(), (x * 3).sum(0) + 1)


def test_a_batch_folded_into_a_matrix_products_rows_keeps_its_rows():
    """nn.Linear on [2, n, 8] views it as [2 * n, 8]: the fold runs on the capacity's layout (each
    batch's spare rows after its true ones), only row-wise ops read it, and the view back is
    padded again; a contraction over the folded rows keeps the per-shape path."""
    lin = torch.nn.Linear(8, 4)
    with torch.no_grad():
        lin.weight.copy_(rand(4, 8, seed=7))
    lin_tpu = torch.nn.Linear(8, 4).to(DEV)
    lin_tpu.load_state_dict(lin.state_dict())

    def folded(module):
        return lambda x: torch.softmax(module(x), dim=1).sum(1)

    def make(n):
        x = torch.stack([neighbours_poisoned(n, seed=1), neighbours_poisoned(n, seed=2)]).nan_to_num(nan=0.5)
        return x

    torch._dynamo.reset()
    compiled = torch.compile(folded(lin_tpu), backend="tpu", dynamic=True)
    before = sum(stats.bucketed_graphs.values())
    for n in [5, 9, 100, 130]:
        x = make(n)
        with torch.no_grad():
            got = compiled(padded_with_nan(x, 1))
            torch.testing.assert_close(got.cpu(), folded(lin)(x), msg=lambda m: f"size {n}: {m}")
    assert sum(stats.bucketed_graphs.values()) - before == 2

    def contracted(x):
        flat = x.reshape(-1, 8)
        return flat.t() @ flat  # sums over the folded rows

    before = sum(stats.bucket_refusals.values())
    run_sizes(contracted, [5, 9], lambda n: (neighbours_poisoned(n).nan_to_num().reshape(1, n, 8)[0],))
    torch._dynamo.reset()
    compiled = torch.compile(contracted, backend="tpu", dynamic=True)
    for n in [5, 9]:
        x = make(n)
        with torch.no_grad():
            torch.testing.assert_close(compiled(padded_with_nan(x, 1)).cpu(), contracted(x))
    assert any("folded" in r for r in stats.bucket_refusals), dict(stats.bucket_refusals)
