"""An encoder-decoder over buckets (docs/bucketing.md): positions broadcast over a batch
(arange(L).expand(B, -1) is a padded prefix with a broadcast dim, growing_dims.cc), labels
shifted into new_zeros of their bucket (growing_like.cc), and cross attention between decoder rows
and encoder rows of different lengths under an exact mask (fused_attention.cc). Values must be
the CPU's with NaN in the spare rows; a new pair of lengths compiles a few executables, not the
whole model again."""
import pytest
import torch
import torch.nn.functional as F

from helpers import DEV
from paired_models import Paired, assert_builds_at_most, built_at_new_lengths
from test_bucketing import is_padded


def test_a_padded_prefix_broadcast_over_a_batch_stays_in_the_bucket():
    """arange(L).expand(B, -1) + offset, and an embedding of it, as BART's learned positions."""
    ids = torch.randint(3, 100, (3, 53)).to(DEV)
    assert is_padded(ids)
    positions = torch.arange(53, device=DEV)
    expanded = positions.expand(3, -1)
    shifted = expanded + 2
    assert is_padded(shifted) and shifted.shape == (3, 53)
    torch.testing.assert_close(shifted.cpu(), torch.arange(53).expand(3, -1) + 2)
    table = torch.randn(600, 8)
    got = F.embedding(expanded, table.to(DEV))
    assert is_padded(got)
    torch.testing.assert_close(got.cpu(), F.embedding(torch.arange(53).expand(3, -1), table))


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_new_zeros_and_new_empty_of_a_padded_prefix_take_its_bucket(dtype):
    """labels.new_zeros(labels.shape) then written into, as shift_tokens_right does: the CPU's
    values, a padded prefix; another shape or device is PyTorch's own."""
    labels = torch.randint(3, 500, (3, 37))
    dev_labels = labels.to(DEV)
    for device in ("cpu", DEV):
        source = labels if device == "cpu" else dev_labels
        shifted = source.new_zeros(source.shape, dtype=dtype)
        shifted[:, 1:] = source[:, :-1].clone()
        shifted[:, 0] = 2
        shifted.masked_fill_(shifted == 7, 1)
        if device == "cpu":
            want = shifted
        else:
            assert is_padded(shifted) and shifted.dtype == dtype
            torch.testing.assert_close(shifted.cpu(), want)
    empty = dev_labels.new_empty(dev_labels.shape)
    assert is_padded(empty) and empty.shape == dev_labels.shape
    other = dev_labels.new_zeros((3, 38))
    assert not is_padded(other) and other.cpu().eq(0).all()
    assert dev_labels.new_zeros(dev_labels.shape, device="cpu").device.type == "cpu"


@pytest.mark.parametrize("decoder,encoder", [(37, 53), (2, 127), (129, 3), (53, 53)])
@pytest.mark.parametrize("mask_kind", ["bool", "additive", "keys_only"])
def test_cross_attention_between_two_buckets_matches_cpu(decoder, encoder, mask_kind):
    """SDPA of decoder queries (padded, Lq rows) over encoder keys and values (padded, Lk rows)
    under an exact mask of both lengths: output and gradients of q, k and v are the CPU's; NaN
    fills every spare row of q, k and v. In float64: the projection's gradient sums up to 129
    query rows in another order than the CPU's."""
    gen = torch.Generator().manual_seed(decoder * 1000 + encoder)
    q_ids = torch.randint(1, 64, (2, decoder), generator=gen)
    k_ids = torch.randint(1, 64, (2, encoder), generator=gen)
    table = torch.randn(64, 4 * 8, generator=gen, dtype=torch.float64)
    nan_table = torch.cat([torch.full((1, 32), float("nan"), dtype=torch.float64), table])  # spare ids (0) read NaN
    keep = torch.rand(2, 1, decoder if mask_kind != "keys_only" else 1, encoder, generator=gen) > 0.3
    keep[..., 0] = True  # no fully masked row: PyTorch's math and fused paths differ there
    mask = keep if mask_kind != "additive" else torch.zeros(keep.shape, dtype=torch.float64).masked_fill(~keep, float("-inf"))
    grad = torch.randn(2, 4, decoder, 8, generator=gen, dtype=torch.float64)
    results = []
    for device in ("cpu", DEV):
        t = nan_table.to(device)
        w = torch.eye(32, device=device, dtype=torch.float64).requires_grad_()

        def heads(ids, length):
            return (F.embedding(ids.to(device) + 1, t) @ w).view(2, length, 4, 8).transpose(1, 2)

        q, k, v = heads(q_ids, decoder), heads(k_ids, encoder), heads(k_ids.flip(1), encoder)
        if device == DEV:
            assert is_padded(q) and is_padded(k)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(device))
        if device == DEV:
            assert is_padded(out)  # over both buckets, not at the exact lengths
        out.backward(grad.to(device))
        results.append((out.detach().cpu(), w.grad.cpu()))
    torch.testing.assert_close(results[1][0], results[0][0])
    torch.testing.assert_close(results[1][1], results[0][1])


def bart(transformers):
    return transformers.BartConfig(vocab_size=512, d_model=32, encoder_layers=2, decoder_layers=2,
                                   encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                                   decoder_ffn_dim=64, max_position_embeddings=1024, dropout=0.0,
                                   attention_dropout=0.0, activation_dropout=0.0, pad_token_id=1, bos_token_id=0,
                                   eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=None)


def right_padded(batch, length, seed):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 512, (batch, length), generator=gen)
    mask = torch.ones_like(ids)
    for row in range(1, batch):
        ids[row, length - length // (row + 1):] = 1
        mask[row, length - length // (row + 1):] = 0
    return ids, mask, torch.randint(3, 512, (batch, max(2, length // 2)), generator=gen)


def test_bart_generates_batches_of_new_lengths_without_compiling():
    """Batches of three prompts right-padded to a new length, greedy: tokens equal to the CPU's,
    and no executable built once the bucket is warm (13 per request before positions broadcast
    over the batch stayed in it)."""
    transformers = pytest.importorskip("transformers")
    pair = Paired(transformers.AutoModelForSeq2SeqLM, bart(transformers))

    def request(length):
        ids, mask, _ = right_padded(3, length, seed=length)
        pair.generate(dict(input_ids=ids, attention_mask=mask), f"length {length}", max_new_tokens=5)

    assert_builds_at_most(built_at_new_lengths(request), 0)


def test_bart_fine_tuning_compiles_a_few_executables_per_pair_of_lengths():
    """Inputs and labels of new lengths each step (DataCollatorForSeq2Seq pads both): losses
    equal to the CPU's; a new pair of lengths in warm buckets builds at most 12 executables (the
    cross-attention mask of both lengths and the labels' shift), where every op compiled before
    (59-81)."""
    transformers = pytest.importorskip("transformers")
    pair = Paired(transformers.AutoModelForSeq2SeqLM, bart(transformers), train=True)

    def step(length):
        ids, mask, labels = right_padded(3, length, seed=length)
        pair.train_step(dict(input_ids=ids, attention_mask=mask, labels=labels), f"length {length}")

    assert_builds_at_most(built_at_new_lengths(step), 12 * 3)


def relative_positions(length, device):
    """T5's memory_position - context_position over a prompt of `length` (a square over its
    bucket on tpu: arange of a live prompt's length is made over the bucket)."""
    positions = torch.arange(length, dtype=torch.long, device=device)
    return positions[None, :] - positions[:, None]


@pytest.mark.parametrize("length", [2, 3, 53, 127, 129])
def test_t5s_position_buckets_over_a_square_match_cpu(length):
    """The relative position bucket of T5 (a dtype conversion, full_like, where, log, min) and its
    embedding over a square bucket: the CPU's values, every step a square; an index out of range
    among the true positions still raises, one in the spare positions does not."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.t5.modeling_t5 import T5Attention
    ids = torch.randint(3, 100, (1, length)).to(DEV)  # makes `length` a live prompt's length
    assert is_padded(ids)
    table = torch.randn(32, 4)
    want = F.embedding(T5Attention._relative_position_bucket(relative_positions(length, "cpu")), table)
    rel = relative_positions(length, DEV)
    buckets = T5Attention._relative_position_bucket(rel)
    got = F.embedding(buckets, table.to(DEV))
    if length > 2:  # the square form needs spare rows
        assert is_padded(buckets) and is_padded(got) and is_padded(torch.full_like(rel, 7))
        assert is_padded((rel > 0).to(torch.long))
    torch.testing.assert_close(got.cpu(), want)
    torch.testing.assert_close(torch.full_like(rel, 7).cpu(), torch.full((length, length), 7))
    with pytest.raises(IndexError, match="index out of range"):
        F.embedding(buckets + 30, table.to(DEV)).cpu()
    # |i - j| < length in the true positions, up to the bucket's size in the spare ones.
    rows = torch.randn(length, 4)
    torch.testing.assert_close(F.embedding(rel.abs(), rows.to(DEV)).cpu(),
                               F.embedding(relative_positions(length, "cpu").abs(), rows))


@pytest.mark.parametrize("batch", [1, 3])
def test_t5_generates_new_lengths_with_few_compiles(batch):
    """T5 (relative position bias, SDPA): prompts of new lengths in a warm bucket, greedy, tokens
    equal to the CPU's, at most 8 executables per request (the cross-attention bias T5 makes as
    zeros of the encoder's length, and its mask's copy into the bucket; 18 before)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.T5Config(vocab_size=512, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                                   num_heads=4, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0,
                                   eos_token_id=1)
    pair = Paired(transformers.AutoModelForSeq2SeqLM, config)

    def request(length):
        ids, mask, _ = right_padded(batch, length, seed=length)
        ids = ids.masked_fill(mask == 0, 0)
        pair.generate(dict(input_ids=ids, attention_mask=mask), f"length {length}", max_new_tokens=5)

    assert_builds_at_most(built_at_new_lengths(request), 8 * 3)


@pytest.mark.parametrize("length", [2, 3, 53, 127, 129])
def test_attention_scores_of_padded_rows_form_a_square_over_the_bucket(length):
    """PyTorch's math path of attention (T5 training takes it: its position bias needs a
    gradient): q @ k^T of queries and keys padded along their rows is a square over the bucket,
    its softmax runs with both dims of runtime length, and @ v contracts the padded keys. Output
    and gradients are the CPU's with NaN in every spare row. In float64: sums over up to 129 rows
    in another order than the CPU's."""
    ids = right_padded(2, length, seed=length)[0]
    table = torch.randn(512, 8, dtype=torch.float64)
    table[0] = float("nan")  # spare ids (0) read NaN
    bias = torch.randn(length, length, dtype=torch.float64)
    grad = torch.randn(2, length, 8, dtype=torch.float64)
    results = []
    for device in ("cpu", DEV):
        w = torch.eye(8, dtype=torch.float64, device=device).requires_grad_()
        x = F.embedding(ids.to(device), table.to(device)) @ w
        scores = x @ x.transpose(1, 2) + bias.to(device)
        if device == DEV and length > 2:
            assert is_padded(x @ x.transpose(1, 2))  # the square
        out = scores.softmax(-1) @ x
        out.backward(grad.to(device))
        results.append((out.detach().cpu(), w.grad.cpu()))
    torch.testing.assert_close(results[1][0], results[0][0])
    torch.testing.assert_close(results[1][1], results[0][1])


def test_t5_fine_tuning_matches_cpu():
    """T5 training (its attention on PyTorch's math path) with inputs and labels of new lengths:
    losses equal to the CPU's at every step; a new pair of lengths builds at most 100
    executables (174-200 before the math path's scores stayed in the bucket; the cross attention
    of two lengths and the position bias's gradient still run per pair: docs/bucketing.md)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.T5Config(vocab_size=512, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                                   num_heads=4, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0,
                                   eos_token_id=1)
    pair = Paired(transformers.AutoModelForSeq2SeqLM, config, train=True)

    def step(length):
        ids, mask, labels = right_padded(3, length, seed=length)
        ids = ids.masked_fill(mask == 0, 0)
        pair.train_step(dict(input_ids=ids, attention_mask=mask, labels=labels), f"length {length}")

    assert_builds_at_most(built_at_new_lengths(step), 100 * 3)
