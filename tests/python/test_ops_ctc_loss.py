"""F.ctc_loss / nn.CTCLoss on tpu (_ctc_loss, _ctc_loss_backward) against the CPU: padded and
concatenated targets, every reduction, zero_infinity, impossible alignments, empty targets and
zero-length inputs, unbatched input, bad arguments."""
import pytest
import torch
import torch.nn.functional as F

from helpers import DEV, fallbacks


def case(dtype=torch.float32, seed=0, T=7, B=4, C=5):
    torch.manual_seed(seed)
    lp = torch.randn(T, B, C, dtype=dtype).log_softmax(2)
    targets = torch.tensor([[1, 2, 2, 3], [3, 0, 0, 0], [4, 4, 1, 1], [2, 1, 2, 1]])[:B]
    input_lengths = torch.tensor([7, 4, 5, 6])[:B]
    target_lengths = torch.tensor([4, 1, 3, 0])[:B]  # 0: an empty target
    return lp, targets, input_lengths, target_lengths


def compare(lp, targets, il, tl, **kw):
    x, y = lp.clone().requires_grad_(), lp.to(DEV).requires_grad_()
    before = fallbacks()
    ld = F.ctc_loss(y, targets.to(DEV), il.to(DEV), tl.to(DEV), **kw)
    torch.manual_seed(9)
    g = torch.rand(ld.shape, dtype=lp.dtype)
    ld.backward(g.to(DEV))
    assert fallbacks() == before, fallbacks()
    lc = F.ctc_loss(x, targets, il, tl, **kw)
    lc.backward(g)
    torch.testing.assert_close(ld.detach().cpu(), lc.detach(), equal_nan=True)
    torch.testing.assert_close(y.grad.cpu(), x.grad, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_padded_targets(dtype, reduction, zero_infinity):
    compare(*case(dtype), reduction=reduction, zero_infinity=zero_infinity)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_concatenated_targets(reduction):
    lp, targets, il, tl = case(torch.float64, seed=1)
    flat = torch.cat([targets[i, :n] for i, n in enumerate(tl.tolist())])
    compare(lp, flat, il, tl, reduction=reduction)
    compare(lp, flat.int(), il, tl, reduction=reduction, blank=0)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_impossible_alignment_gives_inf(zero_infinity):
    """Input too short for the target (3 labels with a repeat need 4 steps): inf loss, NaN or zero
    gradient as on the CPU."""
    lp, _, _, _ = case(torch.float64, seed=2, T=3, B=2)
    targets = torch.tensor([[1, 1, 2], [3, 0, 0]])
    compare(lp, targets, torch.tensor([3, 2]), torch.tensor([3, 1]), reduction="none", zero_infinity=zero_infinity)


def test_zero_length_input_and_other_blank():
    lp, targets, _, tl = case(torch.float64, seed=3)
    compare(lp, targets, torch.tensor([0, 4, 0, 6]), tl, reduction="none")
    compare(lp, targets.clamp(max=3), torch.tensor([7, 4, 5, 6]), tl, blank=4, reduction="sum")


def test_unbatched_and_module():
    lp, targets, il, tl = case(torch.float32, seed=4, B=1)
    compare(lp[:, 0], targets[0], il[0], tl[0], reduction="none")
    loss = torch.nn.CTCLoss(blank=0, zero_infinity=True)
    x, y = lp.clone().requires_grad_(), lp.to(DEV).requires_grad_()
    before = fallbacks()
    ld = loss(y, targets.to(DEV), il.to(DEV), tl.to(DEV))
    ld.backward()
    assert fallbacks() == before
    lc = loss(x, targets, il, tl)
    lc.backward()
    torch.testing.assert_close(ld.detach().cpu(), lc.detach())
    torch.testing.assert_close(y.grad.cpu(), x.grad)


def test_noncontiguous_log_probs_and_int_lengths():
    torch.manual_seed(5)
    lp = torch.randn(3, 6, 5).log_softmax(2).transpose(0, 1)  # (6, 3, 5), not contiguous
    targets = torch.tensor([[1, 2], [2, 2], [3, 1]])
    compare(lp, targets, torch.tensor([6, 5, 6], dtype=torch.int32), torch.tensor([2, 2, 1], dtype=torch.int32))
    # int list lengths through the low-level op
    before = fallbacks()
    d = torch.ops.aten._ctc_loss(lp.to(DEV), targets.to(DEV), [6, 5, 6], [2, 2, 1])[0]
    assert fallbacks() == before
    torch.testing.assert_close(d.cpu(), torch.ops.aten._ctc_loss(lp, targets, [6, 5, 6], [2, 2, 1])[0])


@pytest.mark.parametrize("bad", ["bf16", "float_targets", "long_input", "short_targets", "blank", "batch", "rank"])
def test_bad_arguments_raise_like_cpu(bad):
    lp, targets, _, _ = case()
    il, tl = [7, 4, 5, 6], [4, 1, 3, 0]
    calls = {
        "bf16": lambda d: torch.ops.aten._ctc_loss(lp.bfloat16().to(d), targets.to(d), il, tl),
        "float_targets": lambda d: torch.ops.aten._ctc_loss(lp.to(d), targets.float().to(d), il, tl),
        "long_input": lambda d: torch.ops.aten._ctc_loss(lp.to(d), targets.to(d), [8, 4, 5, 6], tl),
        "short_targets": lambda d: torch.ops.aten._ctc_loss(lp.to(d), targets[:, :2].to(d), il, tl),
        "blank": lambda d: torch.ops.aten._ctc_loss(lp.to(d), targets.to(d), il, tl, 5),
        "batch": lambda d: torch.ops.aten._ctc_loss(lp.to(d), targets.to(d), il[:3], tl),
        "rank": lambda d: torch.ops.aten._ctc_loss(lp[0].to(d), targets.to(d), il, tl),
    }
    with pytest.raises(Exception) as cpu:
        calls[bad]("cpu")
    with pytest.raises(type(cpu.value)) as dev:
        calls[bad](DEV)
    # Meta-kernel checks name the tensor type as the meta kernel saw it ("MetaFloatType" for
    # "torch.FloatTensor"): compare up to the type name.
    assert str(cpu.value).split(" (while")[0].split("; but got")[0].split("\n")[0] in str(dev.value)


def test_tensor_lengths_overload():
    """_ctc_loss.Tensor (lengths as tensors) and its backward: lengths read once on the host."""
    lp, targets, il, tl = case(torch.float64, seed=6)
    x, y = lp.clone().requires_grad_(), lp.to(DEV).requires_grad_()
    before = fallbacks()
    nd, _ = torch.ops.aten._ctc_loss.Tensor(y, targets.to(DEV), il.to(DEV), tl.to(DEV))
    nd.sum().backward()
    assert fallbacks() == before, fallbacks()
    nc, _ = torch.ops.aten._ctc_loss.Tensor(x, targets, il, tl)
    nc.sum().backward()
    torch.testing.assert_close(nd.detach().cpu(), nc.detach())
    torch.testing.assert_close(y.grad.cpu(), x.grad)


def test_longer_sequences_many_classes():
    """A speech-like size: long inputs, many classes, peaked distributions (most class terms
    far below the best path)."""
    torch.manual_seed(7)
    T, B, C = 60, 3, 40
    lp = (torch.randn(T, B, C) * 4).log_softmax(2)
    targets = torch.randint(1, C, (B, 20))
    compare(lp, targets, torch.tensor([60, 45, 52]), torch.tensor([20, 12, 17]), reduction="mean")
