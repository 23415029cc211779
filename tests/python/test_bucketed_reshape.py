"""reshape of a left-padded batch (docs/bucketing.md): merging the padded dim with the batch dim
before it ([3, L, 2, 4] -> [6L, 4], Qwen3.5's gated norm) and splitting it back ([6L, 4] ->
[3, L, 8]) would leave the bucket (a dense copy of the true sizes, then a view of it), so every
later op would compile per length. Both are copies into another padded layout of the same
bucket (engine/growing/growing_reshape.cc). Values must be the CPU's, with NaN and inf next to
the padding and garbage in the spare rows."""
import pytest
import torch

from helpers import DEV, executables_built
from test_bucketing import batch_of_ids, is_padded, values_of


def heads_of(ids):
    """[3, L, 2, 4] from a [3, L] batch of ids: a padded batch on tpu."""
    return values_of(ids).unsqueeze(2) * torch.tensor([1.0, -2.0], device=ids.device).view(1, 1, 2, 1)


def gated_norm(ids):
    """Qwen3.5's gated RMSNorm around its reshapes: rows of 4, then back to [3, L, 8]."""
    x = heads_of(ids)
    rows = x.reshape(-1, 4)
    gate = (x * 0.5).reshape(-1, 4)
    normed = rows * torch.rsqrt(rows.pow(2).mean(-1, keepdim=True) + 1e-6) * torch.sigmoid(gate)
    return normed.reshape(ids.shape[0], ids.shape[1], -1)


@pytest.mark.parametrize("length", [2, 3, 127, 129, 200])
def test_reshapes_of_a_padded_batch_stay_in_the_bucket_and_match_cpu(length):
    ids = batch_of_ids(length, seed=length)
    dev_ids = ids.to(DEV)  # alive: its length is a live bucketed length
    cpu, dev = heads_of(ids), heads_of(dev_ids)
    assert is_padded(dev)
    shapes = [(-1, 4), (3 * length, 8), (-1,), (3, -1), (3, length, 8), (3, length * 2, 4)]
    for shape in shapes:
        got = dev.reshape(shape)
        torch.testing.assert_close(got.cpu(), cpu.reshape(shape), equal_nan=True, msg=lambda m: f"{shape}: {m}")
        if length > 3:  # at 3 the batch and the length are the same size: which dim is padded is ambiguous
            assert is_padded(got), shape
    got = gated_norm(dev_ids)
    torch.testing.assert_close(got.cpu(), gated_norm(ids), equal_nan=True)
    if length > 3:
        assert is_padded(got) and not got._is_view()  # a copy, as PyTorch's reshape copy is
    # view(), which needs the CPU's dense layout, moves the copy (it owns its storage; a fresh one:
    # is_padded's Python storage object would share it).
    torch.testing.assert_close(gated_norm(dev_ids).view(-1).cpu(), gated_norm(ids).view(-1), equal_nan=True)


@pytest.mark.parametrize("length", [5, 130])
def test_reshapes_with_dims_before_the_batch_and_of_other_dtypes_match_cpu(length):
    ids = batch_of_ids(length, seed=3)
    dev_ids = ids.to(DEV)
    for make in (lambda i: heads_of(i).movedim(2, 0).contiguous(),  # [2, 3, L, 4]: blocks on both sides
                 lambda i: heads_of(i) * (1 - 2j),  # imaginary parts
                 lambda i: heads_of(i) > 0):  # bool
        cpu, dev = make(ids), make(dev_ids)
        assert is_padded(dev)
        shape = (2, -1, 4) if cpu.dim() == 4 and cpu.shape[0] == 2 else (-1, 4)
        merged = dev.reshape(shape)
        torch.testing.assert_close(merged.cpu(), cpu.reshape(shape), equal_nan=True)
        back = merged.reshape(cpu.shape)
        torch.testing.assert_close(back.cpu(), cpu, equal_nan=True)
        assert is_padded(merged) and is_padded(back)


def test_a_reshape_that_can_view_the_bucket_still_views_it():
    dev = heads_of(batch_of_ids(50).to(DEV))
    merged = dev.reshape(3, 50, 8)  # the padded dim stays whole: a view of the same storage
    assert merged.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()
    merged.mul_(2)  # writes through the view reach the base, as on the CPU
    torch.testing.assert_close(dev.reshape(3, 50, 8).cpu(), merged.cpu(), equal_nan=True)


def test_reshapes_of_a_permuted_padded_batch_match_cpu():
    ids = batch_of_ids(70, seed=1)
    dev_ids = ids.to(DEV)
    cpu, dev = heads_of(ids).transpose(1, 2), heads_of(dev_ids).transpose(1, 2)  # [3, 2, L, 4]
    for fn in (lambda t: t.transpose(1, 2).reshape(-1, 4), lambda t: t.reshape(6, -1), lambda t: t.reshape(-1)):
        torch.testing.assert_close(fn(dev).cpu(), fn(cpu), equal_nan=True)


def test_a_warm_bucket_reshapes_without_compiling():
    gated_norm(batch_of_ids(40).to(DEV)).cpu()
    built = executables_built()
    for length in (41, 77, 100):
        ids = batch_of_ids(length, seed=length)
        torch.testing.assert_close(gated_norm(ids.to(DEV)).cpu(), gated_norm(ids), equal_nan=True)
    assert executables_built() == built


def test_reshape_under_inference_mode_and_autograd():
    ids = batch_of_ids(37, seed=2)
    with torch.inference_mode():  # autograd's keys skipped: the same path
        got = heads_of(ids.to(DEV)).reshape(-1, 4)
        assert is_padded(got)
        torch.testing.assert_close(got.cpu(), heads_of(ids).reshape(-1, 4), equal_nan=True)
    # Recording autograd: PyTorch's reshape, the CPU's values and gradients.
    x_cpu = heads_of(ids).nan_to_num(0.0, 1e4, -1e4).requires_grad_()
    x_dev = heads_of(ids.to(DEV)).nan_to_num(0.0, 1e4, -1e4).detach().requires_grad_()
    (x_cpu.reshape(-1, 4) * torch.arange(4.0)).square().sum().backward()
    (x_dev.reshape(-1, 4) * torch.arange(4.0, device=DEV)).square().sum().backward()
    torch.testing.assert_close(x_dev.grad.cpu(), x_cpu.grad)


def test_reshape_of_a_padded_batch_to_a_bad_shape_raises_like_cpu():
    ids = batch_of_ids(20)
    dev = heads_of(ids.to(DEV))
    with pytest.raises(RuntimeError, match=r"shape '\[7, -1\]' is invalid for input of size 480"):
        heads_of(ids).reshape(7, -1)
    with pytest.raises(RuntimeError, match=r"shape '\[7, -1\]' is invalid for input of size 480"):
        dev.reshape(7, -1)
    with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
        dev.reshape(-1, -1)
