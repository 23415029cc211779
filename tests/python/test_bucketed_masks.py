"""Masks and repeated heads over a bucket (docs/bucketing.md): a mask built by comparing a bucketed
prompt's query positions with its key positions is padded along both dims ([L, L] of a [C, C]
bucket), and reshape's copy of repeated k/v heads keeps its spare rows, so attention with such a
mask (a sliding window: Gemma 3) runs over the bucket. Values must be the CPU's, at the bucket's
edges and with NaN and inf next to the padding."""
import pytest
import torch
import torch.nn.functional as F

from helpers import DEV, executables_built
from test_bucketing import assert_a_warm_bucket_compiles_nothing, ids_of, is_padded

WINDOW = 8


def sliding_mask(ids, window=WINDOW):
    """[1, 1, L, L] bool: key at or before the query, inside the window (Transformers' mask
    functions over arange(L), which shares the ids' bucket)."""
    pos = torch.arange(ids.shape[1], device=ids.device)
    q, kv = pos[None, None, :, None], pos[None, None, None, :]
    return (kv <= q) & (kv > q - window)


def table(special):
    """Embedding rows; with `special`, id 0 (the first row of ids_of(neighbours=True)) is NaN
    and id 7 (its last row, next to the padding) inf, in the query's columns only."""
    t = torch.randn(256, 32, generator=torch.Generator().manual_seed(0))
    if special:
        t[0, :16] = float("nan")
        t[7, :16] = float("inf")
    return t


def attention(ids, weights):
    """GQA attention with a sliding-window mask, the k/v heads repeated as Transformers'
    repeat_kv does (expand + reshape) and the mask made contiguous as generate() does."""
    n = ids.shape[1]
    x = F.embedding(ids, weights.to(ids.device))  # [1, L, 32]
    q = x[..., :16].reshape(1, n, 4, 4).transpose(1, 2)
    kv = x[..., 16:24].reshape(1, n, 2, 4).transpose(1, 2)
    k = kv[:, :, None].expand(1, 2, 2, n, 4).reshape(1, 4, n, 4)
    v = (kv * 0.5 + 1)[:, :, None].expand(1, 2, 2, n, 4).reshape(1, 4, n, 4)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=sliding_mask(ids).contiguous())
    return out.transpose(1, 2).reshape(1, n, 16)


@pytest.mark.parametrize("length", [2, 3, 9, 127, 128, 129, 200])
def test_a_sliding_window_mask_over_a_bucket_matches_cpu(length):
    ids = ids_of(length, seed=length)
    got = sliding_mask(ids.to(DEV))
    assert torch.equal(got.cpu(), sliding_mask(ids))
    assert is_padded(got) == (length != 128)  # a bucket's own length uploads exactly
    # A float mask from it, as eager attention builds one.
    additive = torch.zeros(()).masked_fill(~sliding_mask(ids), float("-inf"))
    assert torch.equal(torch.zeros((), device=DEV).masked_fill(~got, float("-inf")).cpu(), additive)


@pytest.mark.parametrize("length", [2, 9, 127, 128, 129, 200])
@pytest.mark.parametrize("special", [False, True], ids=["finite", "nan_inf_neighbours"])
def test_masked_attention_with_repeated_heads_over_a_bucket_matches_cpu(length, special):
    ids = ids_of(length, neighbours=special, seed=length)
    got = attention(ids.to(DEV), table(special))
    assert is_padded(got) == (length != 128)
    torch.testing.assert_close(got.cpu(), attention(ids, table(special)), equal_nan=True)


def test_masked_attention_with_repeated_heads_compiles_once_per_bucket():
    weights = table(False)
    assert_a_warm_bucket_compiles_nothing(lambda ids: attention(ids, weights), 40, (3, 77, 127))


def batch_attention(ids, weights):
    """A left-padded batch's attention with one KV head: the head is repeated by a view (expand
    and a reshape that needs no copy, as repeat_kv does for a single KV head), and the mask
    joins the sliding window with each row's padding (a key is also visible to its own query,
    so no row is fully masked)."""
    b, n = ids.shape
    x = F.embedding(ids, weights.to(ids.device))  # [B, L, 32]
    q = x[..., :16].reshape(b, n, 4, 4).transpose(1, 2)
    kv = x[..., 16:20].reshape(b, n, 1, 4).transpose(1, 2)
    k = kv[:, :, None].expand(b, 1, 4, n, 4).reshape(b, 4, n, 4)
    v = (kv * 0.5 + 1)[:, :, None].expand(b, 1, 4, n, 4).reshape(b, 4, n, 4)
    pos = torch.arange(n, device=ids.device)
    valid_keys = (ids != 1)[:, None, None, :]  # id 1: a padded position
    mask = sliding_mask(ids) & (valid_keys | (pos[None, None, :, None] == pos[None, None, None, :]))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.contiguous())
    return out.transpose(1, 2).reshape(b, n, 16)


def left_padded_ids(length, special):
    """[3, length] ids; rows 1 and 2 left-padded with id 1."""
    ids = torch.cat([ids_of(length, neighbours=special, seed=length + row) for row in range(3)])
    ids[1, :length // 3] = 1
    ids[2, :length // 2] = 1
    return ids


@pytest.mark.parametrize("length", [2, 9, 127, 129, 200])
@pytest.mark.parametrize("special", [False, True], ids=["finite", "nan_inf_neighbours"])
def test_a_left_padded_batchs_attention_with_one_kv_head_runs_over_the_bucket(length, special):
    ids = left_padded_ids(length, special)
    got = batch_attention(ids.to(DEV), table(special))
    assert is_padded(got)
    torch.testing.assert_close(got.cpu(), batch_attention(ids, table(special)), equal_nan=True)


def test_a_left_padded_batchs_attention_compiles_nothing_in_a_warm_bucket():
    weights = table(False)
    batch_attention(left_padded_ids(40, False).to(DEV), weights).cpu()
    built = executables_built()
    for length in (3, 77, 127):
        ids = left_padded_ids(length, False)
        torch.testing.assert_close(batch_attention(ids.to(DEV), weights).cpu(), batch_attention(ids, weights))
    assert executables_built() == built


def test_views_of_padded_copies_match_cpu():
    """The copy of a repeat and the contiguous copy of a mask keep their spare rows; a view or a
    reshape that merges the padded dim with the dims before it makes them dense first."""
    for length in (5, 100):
        ids = ids_of(length, seed=length)
        outs = []
        for t in (ids, ids.to(DEV)):
            kv = F.embedding(t, table(False).to(t.device))[..., :8].reshape(1, length, 2, 4).transpose(1, 2)
            repeated = kv[:, :, None].expand(1, 2, 3, length, 4).reshape(1, 6, length, 4)  # a copy
            mask = sliding_mask(t).contiguous()
            outs.append((repeated.reshape(6 * length, 4), repeated.sum(2), mask.reshape(length, length).sum(0),
                         repeated.view(-1), mask.view(-1)))
        for got, want in zip(outs[1], outs[0]):
            torch.testing.assert_close(got.cpu(), want)


def test_a_mask_of_another_length_raises_as_on_cpu():
    """A mask from a prompt of another length than the query (same bucket) is PyTorch's shape
    error, never attention over the bucket with the wrong rows."""
    q_ids, mask_ids = ids_of(30, seed=1), ids_of(31, seed=2)
    for device in ("cpu", DEV):
        q = F.embedding(q_ids.to(device), table(False).to(device)).reshape(1, 30, 4, 8).transpose(1, 2)
        with pytest.raises(RuntimeError):
            F.scaled_dot_product_attention(q, q, q, attn_mask=sliding_mask(mask_ids.to(device))).cpu()
