"""Qwen3.5's linear attention over a bucketed prompt (docs/bucketing.md): the chunked gated delta
rule pads the prompt to a multiple of 64, views it as [chunks, 64], solves one triangular system
per chunk, fills zeros_like(values) chunk by chunk and slices the first L rows back out. Each step
keeps the bucket (engine/growing: batched matmul and solves over a padded chunk dim, empty_like,
contiguous copies, copies between padded views, a slice of a tensor that fills a bucket), so a
new prompt length in a warm bucket compiles nothing. Values must be the CPU's, with garbage (NaN)
in the spare rows and NaN/inf beside them."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu

from helpers import DEV, executables_built, fallbacks
from test_bucketing import ids_of, is_padded, values_of

transformers = pytest.importorskip("transformers")
from transformers.models.qwen3_5.modeling_qwen3_5 import torch_chunk_gated_delta_rule  # noqa: E402


def delta_rule_inputs(ids):
    """query, key, value [1, L, 2, 4], g and beta [1, L, 2] from the prompt's values (spare rows
    NaN on tpu: values_of divides an id by itself)."""
    x = values_of(ids)  # [1, L, 4]
    heads = torch.tensor([1.0, -0.5], device=ids.device).view(1, 1, 2, 1)
    q = x.unsqueeze(2) * heads
    k = (x.unsqueeze(2) * 0.25 + heads).sin()
    v = x.unsqueeze(2).cos() * heads
    g = -F.softplus(x[..., :2])
    beta = x[..., 2:].sigmoid()
    return q, k, v, g, beta


def delta_rule(ids):
    q, k, v, g, beta = delta_rule_inputs(ids)
    out, state = torch_chunk_gated_delta_rule(q, k, v, g=g, beta=beta, output_final_state=True,
                                              use_qk_l2norm_in_kernel=True)
    return out, state


# One chunk (2, 64), both chunks of the bucket of 128 (65; 127, whose conv result does not fit
# the bucket), three of the four of 256 (129). Each length compiles its own modules once, which
# the AOT slice pays for in libtpu compiles: no more lengths than these cases.
@pytest.mark.parametrize("length", [2, 64, 65, 127, 129])
def test_chunked_delta_rule_over_a_bucket_matches_cpu(length):
    ids = ids_of(length, seed=length)
    before = fallbacks()
    out, state = delta_rule(ids.to(DEV))
    want_out, want_state = delta_rule(ids)
    torch.testing.assert_close(out.cpu(), want_out)
    torch.testing.assert_close(state.cpu(), want_state)
    assert fallbacks() == before
    # One chunk (L <= 64) is viewed as [.., 1, 64, ..]: the same exact shapes for every such
    # length. More chunks keep the bucket (a full bucket has no spare rows).
    if length > 64:
        assert is_padded(out), length


def test_chunked_delta_rule_with_nan_and_inf_beside_the_padding_matches_cpu():
    ids = ids_of(90, neighbours=True, seed=5)
    for got, want in zip(delta_rule(ids.to(DEV)), delta_rule(ids)):
        torch.testing.assert_close(got.cpu(), want, equal_nan=True)


def test_a_warm_bucket_runs_the_chunked_delta_rule_without_compiling():
    for warm in (100, 140):  # both chunks of the bucket of 128; three of the four of 256
        delta_rule(ids_of(warm).to(DEV))[0].cpu()
    built = executables_built()
    for length in (70, 120, 150, 170):
        ids = ids_of(length, seed=length)
        torch.testing.assert_close(delta_rule(ids.to(DEV))[0].cpu(), delta_rule(ids)[0])
    assert executables_built() == built


def test_batched_products_and_solves_over_a_padded_batch_dim_match_cpu():
    for length in (3, 100):
        ids = ids_of(length, seed=length)
        results = []
        for t in (ids, ids.to(DEV)):
            x = values_of(t)[0] / 8  # [L, 4]
            a = x.unsqueeze(0) * torch.tensor([1.0, 2.0], device=t.device).view(2, 1, 1)  # [2, L, 4]
            outer = a.unsqueeze(-1) @ a.unsqueeze(-2)  # [2, L, 4, 4]: batches along the padded dim
            upper = torch.ones(4, 4, dtype=torch.bool, device=t.device).triu()
            lower = outer.masked_fill(upper, 0) + torch.eye(4, device=t.device)  # as the delta rule builds it
            solved = torch.linalg.solve_triangular(lower, a.unsqueeze(-1), upper=False, unitriangular=True)
            results.append((outer, solved))
        assert is_padded(results[1][0]) and is_padded(results[1][1])
        for got, want in zip(results[1], results[0]):
            torch.testing.assert_close(got.cpu(), want)


def test_a_solve_along_a_padded_matrix_dim_runs_exactly():
    # Rows of one system are not independent: the padded dim as the matrix's rows is not a batch.
    ids = ids_of(6, seed=2)
    outs = []
    for t in (ids, ids.to(DEV)):
        b = values_of(t)[0]  # [6, 4] padded along the rows
        a = torch.eye(6, device=t.device) + torch.ones(6, 6, device=t.device).tril(-1) * 0.5
        outs.append(torch.linalg.solve_triangular(a, b, upper=False))
    torch.testing.assert_close(outs[1].cpu(), outs[0])


def test_tensors_made_like_a_padded_prefix_keep_its_bucket():
    ids = ids_of(37, seed=1)
    x, cpu = values_of(ids.to(DEV)).transpose(1, 2), values_of(ids).transpose(1, 2)  # [1, 4, L]
    for make in (torch.zeros_like, torch.ones_like, lambda t: torch.full_like(t, 2.5)):
        got = make(x)
        assert is_padded(got) and got.shape == x.shape
        torch.testing.assert_close(got.cpu(), make(cpu))
    assert not is_padded(torch.zeros_like(x, memory_format=torch.contiguous_format))
    # A contiguous conversion keeps the bucket too, as clone(memory_format=contiguous) does.
    half = x.to(torch.float16, memory_format=torch.contiguous_format)
    assert is_padded(half)
    torch.testing.assert_close(half.cpu(), cpu.to(torch.float16), equal_nan=True)


def test_a_slice_of_a_tensor_that_fills_the_bucket_is_its_prefix_and_writes_stay_exact():
    ids = ids_of(100, seed=4)
    dev = ids.to(DEV)  # a live bucket of 100 rows in 128
    full_cpu = torch.arange(2 * 128 * 3, dtype=torch.float32).view(2, 128, 3)
    full = full_cpu.to(DEV)
    head = full[:, :100]
    assert torch_tpu._C._padded_capacity(head, 1) == 128
    torch.testing.assert_close((head * 2).cpu(), full_cpu[:, :100] * 2)
    # Writes through the slice change its rows only, as on the CPU.
    head.add_(1)
    head[:, 5:7].copy_(torch.full((2, 2, 3), -1.0, device=DEV))
    expected = full_cpu.clone()
    expected[:, :100] += 1
    expected[:, 5:7] = -1
    torch.testing.assert_close(full.cpu(), expected)
    # No live bucket of 90 rows: an ordinary slice of another tensor.
    assert torch_tpu._C._padded_capacity(full_cpu.to(DEV)[:, :90], 1) is None
    del dev


def test_a_copy_between_views_of_one_bucket_keeps_the_other_rows():
    ids = ids_of(50, seed=6)
    outs = []
    for t in (ids, ids.to(DEV)):
        freqs = values_of(t).unsqueeze(0) * torch.tensor([1.0, 2.0, 3.0], device=t.device).view(3, 1, 1, 1)
        first = freqs[0]  # [1, L, 4], a view of part of the bucket's storage
        first[..., 1:4:2] = freqs[1, ..., 1:4:2]
        first[..., 4:4:3] = freqs[2, ..., 4:4:3]  # an empty write
        outs.append(freqs)
    torch.testing.assert_close(outs[1].cpu(), outs[0], equal_nan=True)


def test_a_part_of_a_bigger_padded_storage_has_the_buckets_capacity():
    # freq[0] of [3, 1, L, 2] frequencies: its capacity is the bucket's (128), not 3 * 128, so it
    # combines with the prompt's other padded tensors over the bucket.
    ids = ids_of(70, seed=7)
    outs = []
    for t in (ids, ids.to(DEV)):
        x = values_of(t)  # [1, L, 4]
        freqs = x[..., :2].unsqueeze(0).expand(3, -1, -1, -1) * torch.tensor([1.0, 2.0, 3.0], device=t.device).view(3, 1, 1, 1)
        outs.append(freqs[0] * x[..., 2:])
    assert is_padded(outs[1])
    torch.testing.assert_close(outs[1].cpu(), outs[0], equal_nan=True)


def test_a_one_chunk_prompts_result_returns_to_the_bucket():
    # L <= 64 is one chunk, viewed as [.., 1, 64, ..]: exact shapes inside the rule, and its
    # [:, :, :L] result is exact. The rule's last step, a contiguous copy asked for explicitly,
    # puts it back into the prompt's bucket, so what reads it compiles once per bucket.
    def step(ids):
        out = delta_rule(ids)[0]
        return (out * 2).softmax(1)

    step(ids_of(40).to(DEV)).cpu()
    for length in (3, 20, 50):
        ids = ids_of(length, seed=length)
        built = executables_built()
        got = step(ids.to(DEV))
        assert executables_built() - built <= 2, length  # the exact copy and its pad
        assert is_padded(got)
        torch.testing.assert_close(got.cpu(), step(ids))


def test_a_contiguous_copy_of_an_exact_tensor_of_a_live_prompts_length_lands_in_its_bucket():
    ids = ids_of(30, seed=8).to(DEV)  # a live prompt of 30 rows, bucket 128
    exact_cpu = torch.arange(2 * 30 * 3, dtype=torch.float32).view(2, 30, 3)
    exact = exact_cpu.to(DEV).transpose(0, 1)  # [30, 2, 3], not contiguous
    copy = exact.to(torch.float64, memory_format=torch.contiguous_format)
    assert torch_tpu._C._padded_capacity(copy, 0) == 128
    torch.testing.assert_close(copy.cpu(), exact_cpu.transpose(0, 1).double())
    # Only an explicit contiguous copy, of one dim of that length, while the prompt lives.
    assert torch_tpu._C._padded_capacity(exact.to(torch.float64), 0) is None
    del ids
    later = exact.to(torch.float64, memory_format=torch.contiguous_format)
    assert torch_tpu._C._padded_capacity(later, 0) is None


def test_products_of_a_padded_batch_with_operands_of_other_ranks_match_cpu():
    # [2, 2, 2, L, 4] padded along L (a batch dim): with a 3-D operand (broadcast batches), a 5-D
    # one of extent 1 there, and a padded one, each gives the CPU's values.
    ids = ids_of(9, seed=9)
    outs = []
    for t in (ids, ids.to(DEV)):
        x = values_of(t)[0] / 8  # [L, 4]
        scale = torch.tensor([1.0, -1.0], device=t.device)
        big = (x.unsqueeze(-1) * x.unsqueeze(-2)).expand(2, 2, 2, -1, 4, 4) * scale.view(2, 1, 1, 1, 1, 1)
        big = big[..., 0, :].unsqueeze(-2)  # [2, 2, 2, L, 1, 4]
        three = torch.linspace(-1, 1, 4 * 3, device=t.device).view(1, 4, 3)
        one_row = torch.linspace(-1, 1, 2 * 2 * 2 * 4 * 2, device=t.device).view(2, 2, 2, 1, 4, 2)
        outs.append((big @ three, big @ one_row, big @ big.transpose(-1, -2)))
    for got, want in zip(outs[1], outs[0]):
        torch.testing.assert_close(got.cpu(), want, equal_nan=True)
