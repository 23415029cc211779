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


def _non_out_args(schema):
    return [a.name for a in schema.arguments if not (a.kwarg_only and a.alias_info is not None and a.alias_info.is_write)]


def test_every_out_overload_is_served_by_a_rule_with_its_arguments():
    # rule_for serves `any.out` by name stripping: it once found `any` (no dim) and reduced every
    # dim of any(x, dim, out=...). A rule for another overload must read the same leading arguments.
    import torch_tpu

    wrong = []
    for op in torch_tpu._C._register_kernels():
        name, _, overload = op.replace("aten::", "").partition(".")
        rule = torch_tpu._C._rule_for(op)
        if "out" not in overload or not rule or rule == f"{name}.{overload}":
            continue
        rule_name, _, rule_overload = rule.partition(".")
        mine = _non_out_args(getattr(getattr(torch.ops.aten, name), overload)._schema)
        try:
            rule_schema = getattr(getattr(torch.ops.aten, rule_name), rule_overload or "default")._schema
        except AttributeError:
            continue  # a rule named for its meaning (bernoulli.float), not after an overload
        theirs = [a.name for a in rule_schema.arguments]
        if theirs[:len(mine)] != mine:
            wrong.append((op, rule, mine, theirs))
    assert not wrong, wrong


def test_every_registered_op_with_results_has_a_meta_kernel():
    # The engine sizes an op's results with its Meta kernel before applying the rule; an op with
    # a rule but no Meta kernel silently ran on the CPU (torch.logcumsumexp, batch norm's out=
    # overloads, ...) and, for out= calls the CPU kernel does not check, read out of bounds.
    import torch_tpu

    kinds = ("Meta", "CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")
    missing = []
    for op in torch_tpu._C._register_kernels():
        name, _, overload = op.partition(".")
        if not getattr(getattr(torch.ops.aten, name), overload or "default")._schema.returns:
            continue  # nothing to size (_cummax_helper, in-place fused optimizers)
        if not any(torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{op}", k) for k in kinds):
            missing.append(op)
    assert not missing, missing


def test_any_and_all_out_reduce_only_the_given_dim():
    x = torch.tensor([[True, False, False], [False, False, False]])
    check(lambda v: torch.any(v, 1, out=torch.empty(0, dtype=torch.bool, device=v.device)), x)
    check(lambda v: torch.all(v, 0, out=torch.empty(0, dtype=torch.bool, device=v.device)), x)
    empty = torch.zeros(0, 5, 7, dtype=torch.bool)
    check(lambda v: torch.any(v, -2, out=torch.empty(0, 7, 5, dtype=torch.bool, device=v.device).transpose(1, 2)), empty)
