"""Fine-tuning an encoder (BERT, RoBERTa, ModernBERT) with dynamic padding over a bucket
(docs/bucketing.md): the position ids sliced from a model's buffer (growing_view.cc), the token
types gathered from one (bucketed_ops.cc: a gather's source keeps its exact sizes), the stacked
q/k/v of ModernBERT (stack over the bucket) and the pooler's first-token gradient
(select_backward, growing_grads.cc) stay in the bucket, so a new batch length in a warm bucket
builds nothing. Values must be the CPU's, with NaN or out-of-range ids in the spare rows."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu

from helpers import DEV
from paired_models import Paired, assert_builds_at_most, built_at_new_lengths
from test_bucketing import is_padded


def right_padded_batch(length, seed, vocab=512):
    """[3, length] ids in [3, vocab) and the mask of a right-padded batch (pad id 0, as a
    DataCollatorWithPadding builds it): rows 1 and 2 end with pad tokens."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (3, length), generator=gen)
    mask = torch.ones_like(ids)
    for row, pad in ((1, length // 2), (2, length - 1)):
        ids[row, length - pad:] = 0
        mask[row, length - pad:] = 0
    return ids, mask, torch.randint(0, 3, (3,), generator=gen)


def encoder_config(family):
    transformers = pytest.importorskip("transformers")
    common = dict(vocab_size=512, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                  num_labels=3)
    if family == "bert":
        return transformers.BertConfig(**common, max_position_embeddings=512, hidden_dropout_prob=0.0,
                                       attention_probs_dropout_prob=0.0)
    if family == "roberta":  # 514 positions: its int64 buffers are uploaded into a bucket of 1024
        return transformers.RobertaConfig(**common, max_position_embeddings=514, hidden_dropout_prob=0.0,
                                          attention_probs_dropout_prob=0.0, pad_token_id=0)
    return transformers.ModernBertConfig(**common, max_position_embeddings=512, pad_token_id=0, bos_token_id=1,
                                         eos_token_id=2, cls_token_id=1, sep_token_id=2)


@pytest.mark.parametrize("family,token_types", [("bert", True), ("bert", False), ("roberta", False),
                                                ("modernbert", False)])
def test_fine_tuning_an_encoder_with_dynamic_padding_compiles_nothing_per_length(family, token_types):
    """Sequence classification, batches of three right-padded to their longest sequence, the
    model's own loss, AdamW: a new length in a warm bucket builds no executable, and the losses
    are the CPU's at every step. Before: 28-37 executables per new length."""
    transformers = pytest.importorskip("transformers")
    pair = Paired(transformers.AutoModelForSequenceClassification, encoder_config(family), train=True)

    def step(length):
        ids, mask, labels = right_padded_batch(length, seed=length)
        inputs = dict(input_ids=ids, attention_mask=mask, labels=labels)
        if token_types:
            inputs["token_type_ids"] = torch.zeros_like(ids)
        pair.train_step(inputs, f"length {length}")

    assert_builds_at_most(built_at_new_lengths(step), 0)


@pytest.mark.parametrize("length", [2, 3, 127])
@pytest.mark.parametrize("index", [0, 1, -1])
def test_the_gradient_of_one_selected_row_stays_in_the_bucket(length, index):
    """select_backward along the bucketed dim (a pooler's hidden[:, 0]): zeros over the bucket's
    rows with the gradient at one row, a padded prefix whose true rows are the CPU's."""
    ids = right_padded_batch(length, seed=length)[0].to(DEV)
    assert is_padded(ids)
    grad = torch.randn(3, 5)
    got = torch.ops.aten.select_backward(grad.to(DEV), [3, length, 5], 1, index)
    assert is_padded(got)
    torch.testing.assert_close(got.cpu(), torch.ops.aten.select_backward(grad, [3, length, 5], 1, index))
    # A length no live prompt has: PyTorch's zeros at the true size.
    exact = torch.ops.aten.select_backward(grad.to(DEV), [3, 999, 5], 1, index)
    assert not is_padded(exact)
    torch.testing.assert_close(exact.cpu(), torch.ops.aten.select_backward(grad, [3, 999, 5], 1, index))
    with pytest.raises(IndexError):
        torch.ops.aten.select_backward(grad.to(DEV), [3, length, 5], 1, length)


def test_position_ids_sliced_from_a_buffer_stay_in_the_bucket_and_alias_it():
    """buffer[:, :L] of an int64 row longer than the prompt's bucket is a padded prefix of the
    prompt's capacity (its spare rows are the row's next entries) and still a view of the
    buffer: a write through either is seen by the other."""
    ids = right_padded_batch(53, seed=0)[0].to(DEV)
    assert is_padded(ids)
    for positions in (512, 514):
        row = torch.arange(positions)[None].to(DEV)
        window = row[:, :53]
        assert torch_tpu._C._padded_capacity(window, 1) == 128
        table = torch.randn(positions, 8)
        table[60] = float("nan")  # a spare row's id: must not reach a true row
        got = F.embedding(window, table.to(DEV))
        assert is_padded(got)
        torch.testing.assert_close(got.cpu(), F.embedding(torch.arange(53)[None], table))
        row[0, 5] = 7
        assert window[0, 5].item() == 7
        window[0, 6] = 9
        assert row[0, 6].item() == 9


@pytest.mark.parametrize("length", [2, 3, 127, 129])
def test_a_gather_of_padded_indices_matches_cpu_and_checks_its_true_indices(length):
    """torch.gather from an exact source, or from an int64 source uploaded into a bucket of its
    own, at padded indices whose spare rows hold ids far out of range: the CPU's values, and an
    out-of-range id among the true ones raises as on the CPU."""
    ids = right_padded_batch(length, seed=length)[0]
    for source in (torch.arange(3 * 514).view(3, 514), torch.randn(3, 600)):
        dev_ids = ids.to(DEV)
        spare = dev_ids.as_strided((3, torch_tpu._C._padded_capacity(dev_ids, 1)), dev_ids.stride())
        spare[:, length:] = 10 ** 9  # the spare rows' ids: out of range
        got = torch.gather(source.to(DEV), 1, dev_ids)
        assert is_padded(got)
        torch.testing.assert_close(got.cpu(), torch.gather(source, 1, ids))
    bad = ids.clone()
    bad[0, 0] = 10 ** 6
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.gather(torch.randn(3, 600), 1, bad)
    with pytest.raises(RuntimeError, match="gather: index out of range for a dimension of size 600"):
        torch.gather(torch.randn(3, 600).to(DEV), 1, bad.to(DEV)).cpu()


@pytest.mark.parametrize("dim", [0, 2, -1])
def test_a_stack_of_padded_tensors_stays_in_the_bucket(dim):
    """stack of q, k, v padded along the length (ModernBERT's qkv): the result is padded along the
    shifted dim and equals the CPU's, NaN in every spare row."""
    ids = right_padded_batch(53, seed=1)[0]
    table = torch.randn(512, 4)
    table[0] = float("nan")
    parts = [F.embedding(ids, table * k) for k in (1.0, 2.0, -1.0)]
    dev_parts = [F.embedding(ids.to(DEV), table.to(DEV) * k) for k in (1.0, 2.0, -1.0)]
    got = torch.stack(dev_parts, dim)
    assert is_padded(got)
    torch.testing.assert_close(got.cpu(), torch.stack(parts, dim), equal_nan=True)
