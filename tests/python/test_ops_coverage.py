"""Lowering rules that the op-family and OpInfo tests do not reach through other paths."""
import pytest
import torch

from helpers import check

pytestmark = pytest.mark.usefixtures("no_fallbacks")


def test_sigmoid_backward():
    x = torch.randn(4, 5)
    a = x.clone().requires_grad_()
    b = x.clone().to("tpu").requires_grad_()
    torch.sigmoid(a).sum().backward()
    torch.sigmoid(b).sum().backward()
    torch.testing.assert_close(b.grad.cpu(), a.grad)


def test_scalar_overloads():
    x = torch.randn(3, 4)
    check(lambda v: torch.clamp_min(v, 0.1), x)
    check(lambda v: torch.clamp_max(v, -0.1), x)
    check(lambda v: torch.pow(2.0, v), x)
    check(lambda v: torch.ge(v, torch.tensor(0.0)), x)
    check(lambda v: torch.le(v, 0.5), x)


def test_fill_with_tensor_and_eye():
    t = torch.zeros(3, 3, device="tpu")
    t.fill_(torch.tensor(2.5, device="tpu"))
    assert t.cpu().eq(2.5).all()
    assert torch.equal(torch.eye(4, device="tpu").cpu(), torch.eye(4))
    assert torch.equal(torch.eye(2, 3, device="tpu").cpu(), torch.eye(2, 3))


def test_scatter_value_reduce_and_foreach_unary():
    x = torch.ones(2, 4)
    idx = torch.tensor([[0, 1], [2, 3]])
    check(lambda v, i: v.scatter(1, i, 3.0, reduce="multiply"), x, idx)
    xs = [torch.rand(3) + 0.5, torch.rand(2, 2) + 0.5]
    for fn in (torch._foreach_rsqrt, torch._foreach_sign):
        got = fn([v.to("tpu") for v in xs])
        for g, e in zip(got, fn(xs)):
            torch.testing.assert_close(g.cpu(), e)


def test_isin_scalar_element():
    test = torch.tensor([1, 4, 9])
    assert torch.isin(4, test.to("tpu")).cpu().item() is True
    assert torch.isin(5, test.to("tpu")).cpu().item() is False
