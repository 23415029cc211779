"""PyTorch's lazy conjugate and negative bits (z.conj(), torch._neg_view) on tpu.

A conj/neg view shares its storage and flips a bit; every consumer must read the view's values.
PyTorch resolves the bits for most ops (through copy_, which the backend implements) and hands
others (mm, bmm, addmm, dot, vdot, copy_, ...) the view itself. Every case compares with the CPU,
on complex data with non-zero imaginary parts.
"""
import pytest
import torch

import torch_tpu
from helpers import DEV, fallbacks

torch.manual_seed(0)
Z = torch.randn(3, 4, dtype=torch.complex64)
W = torch.randn(4, 3, dtype=torch.complex64)
X = torch.randn(3, 4)

VIEWS = {
    "conj": torch.conj,
    "neg": torch._neg_view,
    "conj_neg": lambda t: torch._neg_view(t.conj()),
    "conj_of_transpose": lambda t: t.mT.conj().mT,
}

CONSUMERS = {
    "values": lambda v: v.cpu(),
    "mul_by_base": lambda v: v * v.resolve_conj().resolve_neg().conj(),
    "add_scalar": lambda v: v + (1 + 2j),
    "imag": lambda v: v.imag * 1 if v.is_complex() else v * 1,
    "real": lambda v: v.real * 1 if v.is_complex() else v * 1,
    "sum": lambda v: v.sum(0),
    "clone": lambda v: v.clone(),
    "contiguous_t": lambda v: v.t().contiguous(),
    "abs": lambda v: v.abs(),
    "exp": lambda v: v.exp(),
    "cat": lambda v: torch.cat([v, v.resolve_conj().resolve_neg()]),
    "mm": lambda v: v @ W.to(v.device),
    "mm_rhs": lambda v: W.to(v.device) @ v,
    "bmm": lambda v: torch.bmm(v.unsqueeze(0), W.to(v.device).unsqueeze(0)),
    "addmm": lambda v: torch.addmm(torch.ones(3, 3, dtype=v.dtype, device=v.device), v, W.to(v.device)),
    "dot": lambda v: torch.dot(v[0], v[1]),
    "vdot": lambda v: torch.vdot(v[0], v[1]),
    "index_select": lambda v: v.index_select(1, torch.tensor([3, 0], device=v.device)),
    "to_float64": lambda v: v.to(torch.complex128),
}


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("consumer", CONSUMERS)
def test_view_values_reach_every_consumer(view, consumer):
    make, use = VIEWS[view], CONSUMERS[consumer]
    expected = use(make(Z))
    before = fallbacks()
    actual = use(make(Z.to(DEV)))
    torch.testing.assert_close(actual.cpu(), expected.resolve_conj().resolve_neg())
    assert fallbacks() == before, fallbacks()


@pytest.mark.parametrize("view", ["neg", "conj"])
def test_real_tensors(view):
    v = VIEWS[view]
    torch.testing.assert_close((v(X.to(DEV)) * 2 + 1).cpu(), v(X) * 2 + 1)
    torch.testing.assert_close((v(X.to(DEV)) @ X.T.to(DEV)).cpu(), v(X) @ X.T)


def test_matrix_products_of_conjugate_transposes():
    z = Z.to(DEV)
    torch.testing.assert_close((z.mH @ z).cpu(), Z.mH @ Z)
    torch.testing.assert_close((z @ z.mH).cpu(), Z @ Z.mH)
    torch.testing.assert_close((z * z.conj()).cpu(), Z * Z.conj())
    torch.testing.assert_close(z.conj().imag.cpu(), Z.conj().imag)
    torch.testing.assert_close(torch.conj_physical(z).cpu(), torch.conj_physical(Z))


def test_copies_between_devices_keep_values():
    z = Z.to(DEV)
    torch.testing.assert_close(z.conj().cpu(), Z.conj().resolve_conj())
    torch.testing.assert_close(Z.conj().to(DEV).cpu(), Z.conj().resolve_conj())
    torch.testing.assert_close(torch._neg_view(z).to("cpu"), -Z)
    # copy_ into a conj view stores the conjugate of the values.
    dst = torch.zeros_like(z)
    dst.conj().copy_(z)
    torch.testing.assert_close(dst.cpu(), Z.conj())
    dst = torch.zeros_like(z)
    torch._neg_view(dst).copy_(Z.conj())  # from the host, with bits on both sides
    torch.testing.assert_close(dst.cpu(), -Z.conj())


def test_in_place_op_through_a_conj_view_writes_the_base():
    z, ref = Z.to(DEV).clone(), Z.clone()
    z.conj().add_(1j)
    ref.conj().add_(1j)
    torch.testing.assert_close(z.cpu(), ref)
    z.conj().mul_(torch.full((4,), 2 - 1j, device=DEV))
    ref.conj().mul_(torch.full((4,), 2 - 1j))
    torch.testing.assert_close(z.cpu(), ref)


def test_item_and_printing_of_a_conj_view():
    z = Z.to(DEV)
    assert z.conj()[1, 2].item() == Z.conj()[1, 2].item()
    assert "device='tpu:0'" in repr(z.conj())


def test_compiled_graph_reads_conj_and_neg_inputs():
    f = torch.compile(lambda a, b: a * b + 1, backend="tpu", fullgraph=True)
    z = Z.to(DEV)
    torch.testing.assert_close(f(z.conj(), z).cpu(), Z.conj() * Z + 1)
    torch.testing.assert_close(f(torch._neg_view(z), z).cpu(), -Z * Z + 1)


def test_complex_matrix_products_run_on_the_device():
    z, w = Z.to(DEV), W.to(DEV)
    before = fallbacks()
    torch.testing.assert_close((z @ w).cpu(), Z @ W)
    torch.testing.assert_close(torch.vdot(z[0], z[1]).cpu(), torch.vdot(Z[0], Z[1]))
    torch.testing.assert_close(torch.baddbmm(z.unsqueeze(0), z.unsqueeze(0), z.mH.unsqueeze(0) @ z.unsqueeze(0),
                                             beta=0.5, alpha=1 - 1j).cpu(),
                               torch.baddbmm(Z.unsqueeze(0), Z.unsqueeze(0), Z.mH.unsqueeze(0) @ Z.unsqueeze(0),
                                             beta=0.5, alpha=1 - 1j))
    assert fallbacks() == before, fallbacks()
