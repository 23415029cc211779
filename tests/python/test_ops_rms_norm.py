"""_fused_rms_norm and _fused_rms_norm_backward (nn.RMSNorm, F.rms_norm) against the CPU's
decomposition, with no CPU fallback."""
import pytest
import torch

from helpers import DEV, fallbacks


def rms_backward_ref(g, x, shape, rstd, w, mask):
    from torch._decomp import decomposition_table
    return decomposition_table[torch.ops.aten._fused_rms_norm_backward.default](g, x, shape, rstd, w, mask)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("shape,normalized", [((4, 8), (8,)), ((2, 3, 5), (3, 5)), ((7,), (7,)), ((0, 4), (4,))])
@pytest.mark.parametrize("weighted", [True, False])
def test_fused_rms_norm_backward(dtype, shape, normalized, weighted):
    torch.manual_seed(0)
    x = torch.randn(shape).to(dtype)
    g = torch.randn(shape).to(dtype)
    w = torch.randn(normalized).to(dtype) if weighted else None
    _, rstd = torch.ops.aten._fused_rms_norm(x, list(normalized), w, 1e-5)
    before = fallbacks()
    for mask in ([True, True], [True, False], [False, True]):
        ref = rms_backward_ref(g, x, list(normalized), rstd, w, mask)
        out = torch.ops.aten._fused_rms_norm_backward(g.to(DEV), x.to(DEV), list(normalized), rstd.to(DEV),
                                                      None if w is None else w.to(DEV), mask)
        for o, r in zip(out, ref):
            assert (o is None) == (r is None)
            if r is not None:
                torch.testing.assert_close(o.cpu(), r)
    assert fallbacks() == before


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_module_training_has_no_fallback(dtype):
    torch.manual_seed(1)
    ref = torch.nn.RMSNorm((6,), eps=1e-6).to(dtype)
    with torch.no_grad():
        ref.weight.copy_(torch.randn(6))
    dev = torch.nn.RMSNorm((6,), eps=1e-6).to(dtype).to(DEV)
    dev.load_state_dict(ref.state_dict())
    x = torch.randn(3, 4, 6).to(dtype)
    x[0, 0] = 0  # an all-zero row: rstd = 1/sqrt(eps)
    xc, xd = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    before = fallbacks()
    yd = dev(xd)
    yd.square().sum().backward()
    assert fallbacks() == before
    yc = ref(xc)
    yc.square().sum().backward()
    torch.testing.assert_close(yd.cpu(), yc)
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)
    torch.testing.assert_close(dev.weight.grad.cpu(), ref.weight.grad)


def test_fused_rms_norm_noncontiguous():
    x = torch.randn(6, 4).t()
    w = torch.randn(6)
    before = fallbacks()
    out = torch.ops.aten._fused_rms_norm(x.to(DEV), [6], w.to(DEV), 1e-5)
    ref = torch.ops.aten._fused_rms_norm(x, [6], w, 1e-5)
    assert fallbacks() == before
    for o, r in zip(out, ref):
        torch.testing.assert_close(o.cpu(), r)
