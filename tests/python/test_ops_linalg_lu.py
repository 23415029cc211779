"""LU-based linear algebra (linalg.lu_factor(_ex), linalg.lu, linalg.lu_solve, linalg.inv(_ex),
linalg.solve(_ex)) on tpu against PyTorch on the CPU, for float32 and float64."""
import pytest
import torch
import torch._dynamo

from helpers import DEV, fallbacks, rand


def well_conditioned(*shape, dtype=torch.float32, seed=0):
    # A Gaussian n x n matrix has norm about 2 sqrt(n): the shift keeps the condition number
    # small, so float32 results of two elimination orders agree to the default tolerance.
    n = shape[-1]
    return rand(*shape, dtype=dtype, seed=seed) + (2 * n ** 0.5 + 2) * torch.eye(n, dtype=dtype)


def check(f, *xs, **kw):
    before = fallbacks()
    got = f(*[x.to(DEV) for x in xs])
    assert fallbacks() == before, fallbacks()
    want = f(*xs)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, **kw)


DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (3, 4, 4), (2, 2, 6, 6), (4, 6), (7, 3), (2, 5, 3)])
def test_lu_factor_and_lu(dtype, shape):
    a = rand(*shape, dtype=dtype)
    check(lambda t: torch.linalg.lu_factor_ex(t), a)
    check(lambda t: torch.linalg.lu_factor(t), a)
    check(lambda t: torch.linalg.lu(t), a)


def test_lu_singular_and_special_values():
    a = torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])  # rank 2
    check(lambda t: torch.linalg.lu_factor_ex(t), a)
    z = torch.zeros(2, 3, 3)
    z[1] = torch.eye(3)
    check(lambda t: torch.linalg.lu_factor_ex(t), z)  # info = 1 for the zero matrix
    check(lambda t: torch.linalg.lu_factor_ex(t), torch.tensor([[0.0, 1.0], [0.0, 2.0]]))  # info = 1
    ties = torch.tensor([[1.0, 2.0], [-1.0, 3.0]])  # |pivot| ties: the first row wins
    check(lambda t: torch.linalg.lu(t), ties)
    inf = torch.tensor([[float("inf"), 1.0], [1.0, 2.0]])
    check(lambda t: torch.linalg.lu_factor_ex(t).pivots, inf)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve(dtype, left, adjoint):
    a = well_conditioned(3, 5, 5, dtype=dtype)
    b = rand(3, 5, 2, dtype=dtype, seed=1) if left else rand(3, 2, 5, dtype=dtype, seed=1)
    check(lambda t, r: torch.linalg.lu_solve(*torch.linalg.lu_factor(t), r, left=left, adjoint=adjoint), a, b)
    check(lambda t, r: torch.linalg.lu_solve(*torch.linalg.lu_factor(t[0]), r, left=left, adjoint=adjoint), a, b)  # broadcast


@pytest.mark.parametrize("dtype", DTYPES)
def test_inv(dtype):
    for shape in [(1, 1), (4, 4), (2, 3, 6, 6)]:
        a = well_conditioned(*shape, dtype=dtype)
        check(lambda t: torch.linalg.inv(t), a)
        check(lambda t: torch.linalg.inv_ex(t), a)
        check(lambda t: torch.inverse(t.mT), a)  # non-contiguous
    check(lambda t: torch.linalg.inv_ex(t).info, torch.zeros(2, 2))  # singular: info, no error


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve(dtype):
    a = well_conditioned(2, 4, 4, dtype=dtype)
    check(lambda t, r: torch.linalg.solve(t, r), a, rand(2, 4, 3, dtype=dtype))
    check(lambda t, r: torch.linalg.solve(t, r), a, rand(2, 4, dtype=dtype))  # batch of vectors
    check(lambda t, r: torch.linalg.solve(t, r), a, rand(4, dtype=dtype))  # one vector, broadcast
    check(lambda t, r: torch.linalg.solve(t, r), a[0], rand(3, 4, 2, dtype=dtype))  # A broadcast
    check(lambda t, r: torch.linalg.solve(t, r, left=False), a, rand(2, 3, 4, dtype=dtype))
    check(lambda t, r: torch.linalg.solve_ex(t, r), a, rand(2, 4, 3, dtype=dtype))


def test_gradients():
    a = well_conditioned(3, 4, 4)
    b = rand(3, 4, 2)

    def run(dev):
        x = a.to(dev).requires_grad_()
        y = b.to(dev).requires_grad_()
        loss = torch.linalg.inv(x).sum() + torch.linalg.solve(x, y).pow(2).sum()
        p, l, u = torch.linalg.lu(x)
        loss = loss + (l * 2).sum() + u.sum()
        loss.backward()
        return x.grad, y.grad

    before = fallbacks()
    got = run(DEV)
    assert fallbacks() == before, fallbacks()
    for g, w in zip(got, run("cpu")):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-4, atol=1e-5)  # sums of several solves


def test_empty_and_errors():
    check(lambda t: torch.linalg.inv(t), torch.zeros(0, 3, 3))
    check(lambda t: torch.linalg.lu_factor_ex(t), torch.zeros(2, 0, 0))
    for f, x in [(lambda t: torch.linalg.inv(t), rand(3, 4)),
                 (lambda t: torch.linalg.inv(t), rand(3)),
                 (lambda t: torch.linalg.lu_factor(t), torch.zeros(3, 3)),  # singular: check_errors
                 (lambda t: torch.linalg.inv(t), torch.zeros(2, 2)),
                 (lambda t: torch.linalg.solve(t, t[..., :1]), torch.zeros(3, 3))]:
        with pytest.raises(Exception) as cpu:
            f(x)
        with pytest.raises(type(cpu.value)):
            f(x.to(DEV)).cpu()


def test_complex_and_bf16_go_to_the_cpu():
    # Documented: complex LU is not lowered (NotLowerable -> CPU fallback, same results).
    a = well_conditioned(3, 3).to(torch.complex64) * (1 + 1j)
    torch.testing.assert_close(torch.linalg.inv(a.to(DEV)).cpu(), torch.linalg.inv(a))


def test_solve_in_compiled_graph():
    # (linalg.solve / lu_factor / inv with check_errors add an effectful error check that graphs do not
    # support yet; the _ex forms have none.)
    torch._dynamo.reset()

    def f(a, b):
        return torch.linalg.solve_ex(a, b).result + 1, torch.linalg.inv_ex(a), torch.linalg.lu_factor_ex(a)

    a, b = well_conditioned(2, 5, 5), rand(2, 5, 3)
    before = fallbacks()
    got = torch.compile(f, backend="tpu", fullgraph=True)(a.to(DEV), b.to(DEV))
    assert fallbacks() == before, fallbacks()
    torch.testing.assert_close(torch.utils._pytree.tree_map(lambda t: t.cpu(), got), f(a, b))
