"""Training a batch of several sequences over a bucket (docs/bucketing.md): the recorded product of
a padded batch by a matrix (growing_matmul.cc), the recorded copying reshape (growing_reshape.cc),
the loss's flattened logits and labels in the bucket's merged layout (growing_view.cc,
bucketed_ops.cc) and attention's backward under a padded batch's square mask
(fused_attention.cc). Loss and gradients must be the CPU's with NaN in the spare rows; a new
length in a warm bucket compiles (almost) nothing."""
import pytest
import torch
import torch.nn.functional as F

from helpers import DEV
from paired_models import Paired, built_at_new_lengths
from test_bucketing import is_padded

VOCAB, WIDTH = 256, 16


def left_padded_batch(length, seed):
    """[3, length] ids in [8, VOCAB) and the attention mask of a left-padded batch: rows 1 and 2
    start with pad tokens (id 1, mask 0)."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(8, VOCAB, (3, length), generator=gen)
    mask = torch.ones_like(ids)
    for row, pad in ((1, length // 3), (2, length - 1)):
        ids[row, :pad] = 1
        mask[row, :pad] = 0
    return ids, mask


def weights(seed=0):
    gen = torch.Generator().manual_seed(seed)
    table = torch.randn(VOCAB, WIDTH, generator=gen)
    table[0] = float("nan")  # the spare rows' id (uploads pad with 0): every spare row is NaN
    return table, torch.randn(WIDTH, WIDTH, generator=gen) * 0.3, torch.randn(WIDTH, VOCAB, generator=gen) * 0.1


def training_step(ids, mask, table, w_in, w_out):
    """A causal LM's step in miniature, batched as Transformers runs it: embedding, a projection,
    a half swap, attention under a causal and padding mask (each query keeps its own key, so no
    row is wholly masked), heads merged by reshape, logits, and the shifted-label loss over the
    flattened logits. Returns the loss and the three weights' gradients."""
    params = [p.to(ids.device, copy=True).requires_grad_() for p in (table, w_in, w_out)]
    table, w_in, w_out = params
    batch, length = ids.shape
    x = F.embedding(ids, table)
    q = (x @ w_in).view(batch, length, 2, 8).transpose(1, 2)
    k = torch.cat([-q[..., 4:], q[..., :4]], -1)
    pos = torch.arange(length, device=ids.device)
    causal = pos[None, :] <= pos[:, None]
    keep = causal[None, None] & (mask.bool()[:, None, None, :] | (pos[None, :] == pos[:, None])[None, None])
    a = F.scaled_dot_product_attention(q, k, q + 1, attn_mask=keep).transpose(1, 2).reshape(batch, length, WIDTH)
    logits = (x + a) @ w_out
    labels = ids.masked_fill(mask == 0, -100)
    shifted = F.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()
    loss = F.cross_entropy(logits.float().view(-1, VOCAB), shifted.view(-1))
    loss.backward()
    return [loss.detach()] + [p.grad for p in params]


def assert_new_lengths_build_nothing(step, lengths):
    """step(length) at two lengths to warm bucket 128, then at `lengths` in it: no executable."""
    assert built_at_new_lengths(step, lengths) == 0


def check_step(length):
    ids, mask = left_padded_batch(length, seed=length)
    got = training_step(ids.to(DEV), mask.to(DEV), *weights())
    want = training_step(ids, mask, *weights())
    for name, g, w in zip(("loss", "table grad", "w_in grad", "w_out grad"), got, want):
        torch.testing.assert_close(g.cpu(), w, msg=lambda m: f"length {length}, {name}: {m}")


@pytest.mark.parametrize("length", [2, 3, 127, 129, 200])
def test_a_batched_training_step_over_a_bucket_matches_cpu(length):
    check_step(length)


def test_a_batched_training_step_at_a_new_length_compiles_nothing_in_a_warm_bucket():
    # 30-45 per length while the projections and the loss left the bucket under autograd
    assert_new_lengths_build_nothing(check_step, (41, 77, 127))


def test_the_recorded_product_of_a_padded_batch_stays_in_the_bucket():
    """x @ w with autograd recording: the result and x's gradient are padded prefixes of the
    bucket; w's gradient sums the true rows only (the spare rows of x are NaN). In float64: the
    sum over 111 rows of squares is summed in another order than the CPU's."""
    table, w_in, _ = (w.double() for w in weights())
    ids, _ = left_padded_batch(37, seed=1)
    x_cpu = F.embedding(ids, table).requires_grad_()
    x_dev = F.embedding(ids.to(DEV), table.to(DEV)).requires_grad_()
    assert is_padded(x_dev)
    w_cpu, w_dev = w_in.clone().requires_grad_(), w_in.to(DEV).requires_grad_()
    y_dev = x_dev @ w_dev
    assert is_padded(y_dev)
    grads = {}

    def note_padded(g):
        grads["x"] = is_padded(g)

    x_dev.register_hook(note_padded)
    # A gradient padded like the result (a loss's over the bucket; a sum's would be an expanded
    # scalar, which is not).
    y_cpu = x_cpu @ w_cpu
    y_cpu.backward(y_cpu.detach().cos())
    y_dev.backward(y_dev.detach().cos())
    torch.testing.assert_close(x_dev.grad.cpu(), x_cpu.grad)
    torch.testing.assert_close(w_dev.grad.cpu(), w_cpu.grad)
    assert grads["x"]


def test_a_double_backward_through_the_recorded_product_matches_cpu():
    """create_graph=True: the backward records through PyTorch's own ops, the second-order
    gradient is the CPU's (float64, as above)."""
    table, w_in, _ = (w.double() for w in weights())
    ids, _ = left_padded_batch(20, seed=2)
    results = []
    for device in ("cpu", DEV):
        x = F.embedding(ids.to(device), table.to(device))
        w = w_in.to(device, copy=True).requires_grad_()
        (g,) = torch.autograd.grad((x @ w).square().sum(), w, create_graph=True)
        (gg,) = torch.autograd.grad(g.square().sum(), w)
        results.append((g.detach().cpu(), gg.cpu()))
    torch.testing.assert_close(results[1][0], results[0][0])
    torch.testing.assert_close(results[1][1], results[0][1])


def test_the_flattened_logits_view_keeps_the_bucket_and_the_cpus_values():
    """view(-1, V) of a padded batch [B, L, V]: a padded prefix of [B * C, V] rows, its values
    the CPU's; the tensor itself still reads as the CPU's, and reshaping back is [B, L, V] of
    the first layout."""
    table, _, w_out = weights()
    ids, _ = left_padded_batch(45, seed=3)
    logits_cpu = F.embedding(ids, table) @ w_out
    logits = F.embedding(ids.to(DEV), table.to(DEV)) @ w_out.to(DEV)
    flat = logits.view(-1, VOCAB)
    assert is_padded(flat) and flat.shape == (3 * 45, VOCAB)
    torch.testing.assert_close(flat.cpu(), logits_cpu.view(-1, VOCAB))
    torch.testing.assert_close(logits.cpu(), logits_cpu)
    back = (flat * 2).reshape(3, 45, VOCAB)
    assert is_padded(back)
    torch.testing.assert_close(back.cpu(), logits_cpu * 2)


@pytest.mark.parametrize("family,batch", [("llama", 1), ("llama", 3), ("gpt2", 1)])
def test_fine_tuning_a_transformers_model_with_dynamic_padding_compiles_nothing_per_length(family, batch):
    """Transformers' tiny models trained as a collator that pads each batch to its longest
    sequence would (left padding, the model's own loss, AdamW): a new length in a warm bucket
    builds no executable, losses equal the CPU's at every step. Before: Llama 49 executables per
    length (batch of one), ~88 (batches of several); GPT-2 23 (its layer norms' backward). GPT-2
    runs without dropout: the two devices' random streams differ."""
    transformers = pytest.importorskip("transformers")
    if family == "gpt2":
        config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=512,
                                         attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)
    else:
        config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    pair = Paired(transformers.AutoModelForCausalLM, config, train=True)

    def step(length):
        ids, mask = left_padded_batch(length, seed=length)
        ids, mask = ids[:batch], mask[:batch]
        labels = ids.masked_fill(mask == 0, -100)
        pair.train_step(dict(input_ids=ids, attention_mask=mask, labels=labels), f"length {length}")

    assert_new_lengths_build_nothing(step, (41, 77, 120))


@pytest.mark.parametrize("length", [2, 3, 64, 127, 129, 200])
def test_layer_norms_backward_over_a_bucket_matches_cpu(length):
    """native_layer_norm_backward over a padded batch (the weight's and bias's gradients sum the
    true rows only; NaN in the spare rows of input and gradient), and over a normalized padded
    dim (its statistics are not padded: the exact path). In float64: the weight's gradient sums
    up to 600 rows in another order than the CPU's."""
    table = weights()[0][:, :12].double()
    for ids in (left_padded_batch(length, seed=length)[0][:1], left_padded_batch(length, seed=length)[0]):
        for normalized in ((12,), (length, 12)):
            grads = []
            for device in ("cpu", DEV):
                x = F.embedding(ids.to(device), table.to(device)).requires_grad_()
                w = torch.linspace(0.5, 1.5, 12, dtype=torch.double, device=device)
                w = w.expand(normalized).contiguous().requires_grad_()
                b = torch.zeros(normalized, dtype=torch.double, device=device).requires_grad_()
                F.layer_norm(x, normalized, w, b).backward(F.embedding(ids.to(device), table.to(device) * 0.5))
                grads.append([t.grad.cpu() for t in (x, w, b)])
            for got, want in zip(grads[1], grads[0]):
                torch.testing.assert_close(got, want, msg=lambda m: f"{normalized}: {m}")


@pytest.mark.parametrize("length", [2, 3, 127, 129])
@pytest.mark.parametrize("padding_idx,scale", [(-1, False), (5, False), (-1, True)])
def test_the_embeddings_gradient_over_a_bucket_matches_cpu(length, padding_idx, scale):
    """embedding_dense_backward of a padded gradient at padded indices (spare rows NaN, spare ids
    0) runs over the bucket; with exact rows and padded indices, or counts by frequency, it takes
    the exact path. Every form is the CPU's."""
    ids = left_padded_batch(length, seed=length)[0]
    ids[0, 0] = 5  # the padding_idx, when there is one
    grad_table = weights()[0]
    want = torch.ops.aten.embedding_dense_backward(F.embedding(ids, grad_table), ids, VOCAB, padding_idx, scale)
    dev_ids = ids.to(DEV)
    grad = F.embedding(dev_ids, grad_table.to(DEV))
    assert is_padded(dev_ids) and is_padded(grad)
    for g in (grad, F.embedding(ids, grad_table).to(DEV)):
        got = torch.ops.aten.embedding_dense_backward(g, dev_ids, VOCAB, padding_idx, scale)
        torch.testing.assert_close(got.cpu(), want, equal_nan=True)
