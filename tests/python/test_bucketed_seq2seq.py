"""An encoder-decoder over buckets (docs/bucketing.md): positions broadcast over a batch
(arange(L).expand(B, -1) is a padded prefix with a broadcast dim, growing_dims.cc), labels
shifted into new_zeros of their bucket (growing_like.cc), and cross attention between decoder rows
and encoder rows of different lengths under an exact mask (fused_attention.cc). Values must be
the CPU's with NaN in the spare rows; a new pair of lengths compiles a few executables, not the
whole model again."""
import pytest
import torch
import torch.nn.functional as F

from helpers import DEV, executables_built
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
    torch.manual_seed(0)
    cpu = transformers.AutoModelForSeq2SeqLM.from_config(bart(transformers))
    dev = transformers.AutoModelForSeq2SeqLM.from_config(bart(transformers))
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEV)

    def request(length):
        ids, mask, _ = right_padded(3, length, seed=length)
        tokens = []
        for model, device in ((dev, DEV), (cpu, "cpu")):
            out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), max_new_tokens=5,
                                 do_sample=False)
            tokens.append(out.cpu())
        torch.testing.assert_close(tokens[0], tokens[1], msg=lambda m: f"length {length}: {m}")

    request(40)
    request(50)
    built = executables_built()
    for length in (23, 77, 120):
        request(length)
    if torch.tpu.get_eager_mode() == "strict":  # strict eager's per-op count (fused: values only)
        assert executables_built() - built == 0


def test_bart_fine_tuning_compiles_a_few_executables_per_pair_of_lengths():
    """Inputs and labels of new lengths each step (DataCollatorForSeq2Seq pads both): losses
    equal to the CPU's; a new pair of lengths in warm buckets builds at most 12 executables (the
    cross-attention mask of both lengths and the labels' shift), where every op compiled before
    (59-81)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cpu = transformers.AutoModelForSeq2SeqLM.from_config(bart(transformers))
    dev = transformers.AutoModelForSeq2SeqLM.from_config(bart(transformers))
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEV)
    optimizers = {m: torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (cpu, dev)}

    def step(length):
        ids, mask, labels = right_padded(3, length, seed=length)
        losses = []
        for model, device in ((dev, DEV), (cpu, "cpu")):
            out = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device))
            out.loss.backward()
            optimizers[model].step()
            optimizers[model].zero_grad()
            losses.append(out.loss.detach().cpu())
        torch.testing.assert_close(losses[0], losses[1], msg=lambda m: f"length {length}: {m}")

    step(40)
    step(50)
    built = executables_built()
    lengths = (23, 77, 120)
    for length in lengths:
        step(length)
    if torch.tpu.get_eager_mode() == "strict":
        assert executables_built() - built <= 12 * len(lengths)
