"""Convolutions along a bucketed prompt's length (engine/growing/growing_conv.cc): Qwen3.5's
causal depthwise conv1d (padding kernel - 1, then [..., :L]) and other stride-1 windows run over
the bucket with the spare rows zeroed, so the result is a padded prefix whose modules depend on
the bucket alone. Values must be exactly the CPU's, with NaN/inf beside the padding and garbage
(NaN) in the spare rows."""
import pytest
import torch
import torch.nn.functional as F

from helpers import DEV, executables_built, fallbacks
from test_bucketing import ids_of, is_padded, values_of


def weight(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def causal_conv1d(ids):
    """Transformers' causal_conv1d_fn over [1, 4, L] values: depthwise, kernel 4, padding 3,
    the first L rows, then SiLU."""
    x = values_of(ids).transpose(1, 2)
    out = F.conv1d(x, weight(4, 1, 4).to(ids.device), weight(4, seed=1).to(ids.device), padding=3, groups=4)
    return F.silu(out[..., : ids.shape[1]])


CONVS = {
    "causal depthwise": causal_conv1d,
    # Reads one row past each output: the zeroed spare row stands for the conv's own padding.
    "centred, kernel 3": lambda ids: F.conv1d(values_of(ids).transpose(1, 2), weight(3, 4, 3).to(ids.device), padding=1),
    "dilated 2, kernel 3": lambda ids: F.conv1d(
        values_of(ids).transpose(1, 2), weight(2, 4, 3).to(ids.device), padding=2, dilation=2
    ),
    "no padding (a shorter result)": lambda ids: F.conv1d(values_of(ids).transpose(1, 2), weight(4, 4, 2).to(ids.device)),
    "2-D, the length as height": lambda ids: F.conv2d(
        values_of(ids).transpose(1, 2).unsqueeze(-1).expand(1, 4, -1, 3), weight(2, 4, 3, 2).to(ids.device), padding=(1, 0)
    ),
    # Not over the bucket (strided; padded past its reach): the exact path, the same values.
    "stride 2": lambda ids: F.conv1d(values_of(ids).transpose(1, 2), weight(4, 4, 3).to(ids.device), stride=2, padding=1),
    "padding past the kernel": lambda ids: F.conv1d(values_of(ids).transpose(1, 2), weight(4, 4, 2).to(ids.device), padding=3),
}


# 125 + 3 rows fill the bucket of 128; 126 does not fit and runs exactly; 128 is a full bucket.
@pytest.mark.parametrize("length", [2, 3, 4, 64, 125, 126, 127, 128, 129, 200])
@pytest.mark.parametrize("neighbours", [False, True], ids=["finite", "nan_inf_neighbours"])
def test_convolutions_along_a_bucket_match_cpu(length, neighbours):
    ids = ids_of(length, neighbours, seed=length)
    before = fallbacks()
    for name, conv in CONVS.items():
        got, want = conv(ids.to(DEV)), conv(ids)
        torch.testing.assert_close(got.cpu(), want, equal_nan=True, msg=lambda m: f"{name}: {m}")
    assert fallbacks() == before


def test_a_causal_conv_keeps_the_bucket_and_a_warm_bucket_compiles_nothing():
    for length in (3, 90, 125):
        out = causal_conv1d(ids_of(length).to(DEV))
        assert out.shape == (1, 4, length) and is_padded(out), length
    # 126 rows + 3 do not fit the bucket of 128: exact, so not padded.
    assert not is_padded(causal_conv1d(ids_of(126).to(DEV)))
    causal_conv1d(ids_of(40).to(DEV)).cpu()
    built = executables_built()
    for length in (3, 77, 125):
        ids = ids_of(length, seed=length)
        torch.testing.assert_close(causal_conv1d(ids.to(DEV)).cpu(), causal_conv1d(ids))
    assert executables_built() == built


def test_a_conv_that_records_autograd_gives_the_cpus_gradients():
    ids = ids_of(37, seed=3)
    grads = []
    for t in (ids, ids.to(DEV)):
        w = weight(4, 1, 4).to(t.device).requires_grad_()
        x = values_of(t).transpose(1, 2)
        out = F.conv1d(x, w, padding=3, groups=4)[..., :37]
        out.square().sum().backward()
        grads.append((out.detach().cpu(), w.grad.cpu()))
    torch.testing.assert_close(grads[1], grads[0])


def test_bad_convolutions_of_a_bucketed_input_raise_pytorchs_errors():
    x = values_of(ids_of(20).to(DEV)).transpose(1, 2)  # [1, 4, 20] of a bucket of 128
    with pytest.raises(RuntimeError, match="channels|groups"):
        F.conv1d(x, weight(4, 3, 3).to(DEV), padding=1)
    with pytest.raises(RuntimeError, match="[Kk]ernel size"):
        F.conv1d(x, weight(4, 4, 40).to(DEV))
