"""QR (geqrf, linalg.qr, householder_product/orgqr, ormqr), SVD (linalg.svd, svdvals and what
is built on them: pinv, matrix_rank, matrix_norm, cond), symmetric eigh (eigh, eigvalsh) and
lu_unpack on tpu against PyTorch on the CPU, float32 and float64, with no CPU fallback.

Householder QR follows LAPACK's algorithm and sign convention, so Q and R are compared
directly. Singular vectors and eigenvectors are unique only up to the sign of each column
(and any basis of a repeated value's space): they are compared through reconstruction,
orthogonality and, for distinct values, column by column after aligning signs."""
import pytest
import torch
import torch._dynamo

from helpers import DEV, fallbacks

DTYPES = [torch.float32, torch.float64]


def rand(*shape, dtype=torch.float64, seed=0):
    """Like helpers.rand, but drawn in float64 (matrices whose conditioning the float64 cases
    rely on) with its own seeds: the hard-input cases below were sized against these values."""
    g = torch.Generator().manual_seed(seed + 7 * sum(shape))
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def with_singular_values(s, m, n, dtype, seed=0):
    """An m x n matrix (batch of one) with singular values s (len min(m, n))."""
    g = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(m, m, generator=g, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    k = min(m, n)
    return (u[:, :k] * torch.tensor(s, dtype=torch.float64)) @ v[:, :k].mT


def on_tpu(f, *xs):
    before = fallbacks()
    got = f(*[x.to(DEV) for x in xs])
    got = tuple(g.cpu() for g in got) if isinstance(got, tuple) else got.cpu()
    assert fallbacks() == before, fallbacks()
    return got


def check(f, *xs, **kw):
    got, want = on_tpu(f, *xs), f(*xs)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **kw)


def eye_like(x):
    return torch.eye(x.shape[-1], dtype=x.dtype).expand_as(x)


def same_up_to_sign(got, want, **kw):
    """Columns of got equal those of want up to a sign per column."""
    sign = torch.sign((got * want).sum(-2, keepdim=True))
    sign[sign == 0] = 1
    torch.testing.assert_close(got * sign, want, **kw)


SHAPES = [(1, 1), (5, 5), (7, 3), (3, 7), (2, 4, 6), (2, 3, 5, 2), (1, 9)]


# ---------------------------------------------------------------- QR

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_qr_modes_and_geqrf(dtype, shape):
    a = rand(*shape, dtype=dtype)
    check(torch.geqrf, a)
    for mode in ["reduced", "complete", "r"]:
        check(lambda t: torch.linalg.qr(t, mode=mode), a)
    check(lambda t: torch.linalg.qr(t.mT), a)  # non-contiguous
    check(lambda t: torch.qr(t, some=False), a)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0), (2, 0, 4), (0, 3, 3)])
def test_qr_empty(shape):
    a = torch.zeros(shape)
    check(torch.geqrf, a)
    for mode in ["reduced", "complete", "r"]:
        check(lambda t: torch.linalg.qr(t, mode=mode), a)  # complete with n = 0: Q = I


@pytest.mark.parametrize("dtype", DTYPES)
def test_qr_hard_inputs(dtype):
    # An exactly zero column gives tau = 0 (H = I) in LAPACK and here: deterministic.
    a = rand(6, 4, dtype=dtype)
    a[:, 1] = 0
    check(torch.geqrf, a)
    check(lambda t: torch.linalg.qr(t, mode="complete"), a)
    check(torch.geqrf, torch.zeros(3, 3, dtype=dtype))
    check(torch.geqrf, torch.eye(4, dtype=dtype)[:, [2, 0, 3, 1]])  # a permutation
    huge = rand(4, 3, dtype=dtype) * (1e30 if dtype == torch.float32 else 1e300)
    check(torch.geqrf, huge)  # norms are scaled: no overflow
    # Rank-deficient: the trailing reflectors act on rounding noise, which differs from
    # LAPACK's, so only the factorization's properties are compared.
    r = (rand(7, 2, dtype=dtype) @ rand(2, 5, dtype=dtype, seed=1))
    q, rr = on_tpu(lambda t: torch.linalg.qr(t, mode="complete"), r)
    torch.testing.assert_close(q @ rr, r)
    torch.testing.assert_close(q.mT @ q, eye_like(q))
    assert torch.equal(rr, rr.triu())


def test_qr_nan_propagates():
    a = rand(4, 3)
    a[2, 1] = float("nan")
    q, r = on_tpu(torch.linalg.qr, a)
    # As LAPACK: the NaN reaches its column and the trailing block, not R's finished row 0 or
    # Q's first column.
    want_q, want_r = torch.linalg.qr(a)
    assert q[:, 1:].isnan().all() and r[0, 1].isnan() and r[1:, 2].isnan().all()
    torch.testing.assert_close(q, want_q, equal_nan=True)
    torch.testing.assert_close(r, want_r, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_householder_product_and_ormqr(dtype):
    a = rand(3, 6, 4, dtype=dtype)
    v, tau = torch.geqrf(a)
    check(torch.linalg.householder_product, v, tau)
    check(torch.linalg.householder_product, v, tau[..., :2])  # fewer reflectors than columns
    check(torch.orgqr, v, tau)
    for left in [True, False]:
        for transpose in [False, True]:
            c = rand(3, 6, 5, dtype=dtype, seed=2) if left else rand(3, 5, 6, dtype=dtype, seed=2)
            check(lambda x, t, y: torch.ormqr(x, t, y, left=left, transpose=transpose), v, tau, c)
    w, tw = torch.geqrf(rand(6, 8, dtype=dtype))  # wide: 6 reflectors on 8 columns
    check(lambda x, t, y: torch.ormqr(x, t, y), w, tw, rand(6, 3, dtype=dtype))


def test_qr_gradients():
    a = rand(2, 6, 4, dtype=torch.float64)

    def run(dev):
        x = a.to(dev).requires_grad_()
        q, r = torch.linalg.qr(x)
        (q.sin().sum() + (r * r).sum()).backward()
        return x.grad

    before = fallbacks()
    got = run(DEV)
    assert fallbacks() == before, fallbacks()
    torch.testing.assert_close(got.cpu(), run("cpu"))


# ---------------------------------------------------------------- lu_unpack

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (6, 3), (3, 6), (2, 4, 4), (2, 3, 5, 2)])
def test_lu_unpack(dtype, shape):
    lu, piv = torch.linalg.lu_factor(rand(*shape, dtype=dtype))
    check(torch.lu_unpack, lu, piv)
    check(lambda x, p: torch.lu_unpack(x, p, unpack_data=False), lu, piv)
    check(lambda x, p: torch.lu_unpack(x, p, unpack_pivots=False), lu, piv)
    check(lambda x, p: torch.lu_unpack(x.mT.contiguous().mT, p), lu, piv)


def test_lu_unpack_gradients():
    a = rand(3, 4, 4)

    def run(dev):
        x = a.to(dev).requires_grad_()
        lu, piv = torch.linalg.lu_factor(x)
        p, l, u = torch.lu_unpack(lu, piv)
        ((p @ l).sum() + u.pow(2).sum()).backward()
        return x.grad

    before = fallbacks()
    got = run(DEV)
    assert fallbacks() == before, fallbacks()
    torch.testing.assert_close(got.cpu(), run("cpu"))


# ---------------------------------------------------------------- SVD

def check_svd(a, full_matrices=False, distinct=True, **kw):
    u, s, vh = on_tpu(lambda t: torch.linalg.svd(t, full_matrices=full_matrices), a)
    cu, cs, cvh = torch.linalg.svd(a, full_matrices=full_matrices)
    assert u.shape == cu.shape and s.shape == cs.shape and vh.shape == cvh.shape
    torch.testing.assert_close(s, cs, **kw)
    k = s.shape[-1]
    torch.testing.assert_close((u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :], a, **kw)
    torch.testing.assert_close(u.mT @ u, eye_like(u.mT @ u), **kw)
    torch.testing.assert_close(vh @ vh.mT, eye_like(vh @ vh.mT), **kw)
    if distinct:  # unique singular vectors up to sign
        same_up_to_sign(u[..., :k], cu[..., :k], **kw)
        same_up_to_sign(vh[..., :k, :].mT, cvh[..., :k, :].mT, **kw)
    torch.testing.assert_close(on_tpu(torch.linalg.svdvals, a), cs, **kw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES + [(8, 8), (2, 12, 5)])
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd(dtype, shape, full_matrices):
    check_svd(rand(*shape, dtype=dtype), full_matrices)
    check_svd(rand(*shape, dtype=dtype).mT, full_matrices)  # non-contiguous, transposed shape


@pytest.mark.parametrize("dtype", DTYPES)
def test_svd_hard_inputs(dtype):
    f64 = dtype == torch.float64
    # Ill-conditioned (cond 1e12 / 1e5): Jacobi's small singular values are accurate to
    # eps * ||A|| like LAPACK's, so the default tolerances hold.
    ill = with_singular_values([1.0, 1e-3, 1e-6, 1e-9, 1e-12] if f64 else [1.0, 0.1, 1e-3, 1e-4, 1e-5], 7, 5, dtype)
    check_svd(ill.to(dtype), full_matrices=True, distinct=False)
    check_svd(ill.to(dtype)[:4].mT, distinct=False)
    # Rank-deficient (rank 2 of 6): zero singular values, U completed to an orthonormal basis.
    low = (rand(8, 2) @ rand(2, 6, seed=1)).to(dtype)
    check_svd(low, full_matrices=True, distinct=False)
    check_svd(low.mT, full_matrices=True, distinct=False)
    # Repeated singular values: an orthogonal matrix (all ones) and a repeated pair.
    q = torch.linalg.qr(rand(6, 6))[0].to(dtype)
    check_svd(q, full_matrices=True, distinct=False)
    check_svd(with_singular_values([3.0, 2.0, 2.0, 1.0], 5, 4, dtype).to(dtype), distinct=False)
    # Zero and one-entry matrices; scaled far from 1 (no overflow in the column norms).
    check_svd(torch.zeros(4, 3, dtype=dtype), full_matrices=True, distinct=False)
    check_svd(torch.zeros(2, 3, 4, dtype=dtype), distinct=False)
    big = 1e30 if dtype == torch.float32 else 1e200
    x = rand(5, 4, dtype=dtype)
    torch.testing.assert_close(on_tpu(torch.linalg.svdvals, x * big) / big, torch.linalg.svdvals(x))
    torch.testing.assert_close(on_tpu(torch.linalg.svdvals, x / big) * big, torch.linalg.svdvals(x))


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0), (2, 0, 4), (0, 3, 3)])
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd_empty(shape, full_matrices):
    check(lambda t: torch.linalg.svd(t, full_matrices=full_matrices), torch.zeros(shape))  # U/V = I where square
    check(torch.linalg.svdvals, torch.zeros(shape))


def test_svd_nan_raises_inf_gives_nan():
    a = rand(3, 3)
    a[1, 1] = float("nan")
    with pytest.raises(RuntimeError, match="non-finite"):
        torch.linalg.svd(a)
    with pytest.raises(RuntimeError, match="non-finite"):  # device-side check: raised at the sync
        torch.linalg.svdvals(a.to(DEV)).cpu()
    a[1, 1] = float("inf")  # the CPU returns NaN singular values, no error
    assert on_tpu(torch.linalg.svdvals, a).isnan().any() and torch.linalg.svdvals(a).isnan().all()


def test_svd_gradients():
    a = rand(2, 5, 3)

    def run(dev, full):
        x = a.to(dev).requires_grad_()
        u, s, vh = torch.linalg.svd(x, full_matrices=False)
        # Sign-invariant: s and the products u_j v_j^T.
        (s.pow(2).sum() + (u @ vh).sin().sum() + torch.linalg.svdvals(x.mT).sum()).backward()
        return x.grad

    before = fallbacks()
    got = run(DEV, False)
    assert fallbacks() == before, fallbacks()
    torch.testing.assert_close(got.cpu(), run("cpu", False))


@pytest.mark.parametrize("dtype", DTYPES)
def test_svd_consumers(dtype):
    a = rand(2, 6, 4, dtype=dtype)
    low = (rand(6, 2) @ rand(2, 5, seed=1)).to(dtype)
    check(torch.linalg.pinv, a)
    check(torch.linalg.pinv, low)
    check(lambda t: torch.linalg.pinv(t @ t.mT, hermitian=True), a)
    check(torch.linalg.matrix_rank, a)
    check(torch.linalg.matrix_rank, low)
    check(lambda t: torch.linalg.matrix_rank(t @ t.mT, hermitian=True), low)
    check(lambda t: torch.linalg.matrix_norm(t, ord=2), a)
    check(lambda t: torch.linalg.matrix_norm(t, ord=-2), a)
    check(lambda t: torch.linalg.matrix_norm(t, ord="nuc"), a)
    check(torch.linalg.cond, a[..., :4, :])


def test_svd_errors_match_cpu():
    for f, x in [(torch.linalg.svd, rand(3)),
                 (torch.linalg.svdvals, torch.ones(3, 3, dtype=torch.int64)),
                 (torch.linalg.svd, torch.ones(3, 3, dtype=torch.bfloat16)),
                 (torch.linalg.qr, rand(3)),
                 (torch.linalg.qr, torch.ones(3, 3, dtype=torch.int64)),
                 (torch.geqrf, torch.ones(3, 3, dtype=torch.int64)),
                 (torch.geqrf, torch.ones(3, 3, dtype=torch.float16)),
                 (torch.linalg.eigh, rand(3, 4)),
                 (torch.linalg.eigh, torch.ones(3, 3, dtype=torch.int64)),
                 (lambda t: torch.linalg.householder_product(t, t[0]), rand(3, 4)),
                 (lambda t: torch.ormqr(t, t[0, :2], t), rand(3, 3)),
                 (lambda t: torch.lu_unpack(t, torch.ones(3, dtype=torch.int32)), rand(3))]:
        with pytest.raises(Exception) as cpu:
            f(x)
        with pytest.raises(type(cpu.value)):
            f(x.to(DEV))


# ---------------------------------------------------------------- eigh

def check_eigh(a, uplo="L", distinct=True, **kw):
    w, v = on_tpu(lambda t: torch.linalg.eigh(t, UPLO=uplo), a)
    cw, cv = torch.linalg.eigh(a, UPLO=uplo)
    torch.testing.assert_close(w, cw, **kw)
    sym = cv @ torch.diag_embed(cw) @ cv.mT  # the matrix LAPACK read (one triangle)
    torch.testing.assert_close(v @ torch.diag_embed(w) @ v.mT, sym, **kw)
    torch.testing.assert_close(v.mT @ v, eye_like(v), **kw)
    if distinct:
        same_up_to_sign(v, cv, **kw)
    torch.testing.assert_close(on_tpu(lambda t: torch.linalg.eigvalsh(t, UPLO=uplo), a), cw, **kw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 5), (8, 8), (3, 6, 6), (2, 2, 7, 7)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(dtype, shape, uplo):
    a = rand(*shape, dtype=dtype)  # not symmetric: only the UPLO triangle counts
    check_eigh(a, uplo)
    check_eigh(a.mT, uplo)  # non-contiguous


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_hard_inputs(dtype):
    q = torch.linalg.qr(rand(6, 6))[0]
    spd_ill = (q * torch.tensor([1.0, 1e-2, 1e-4, 1e-5, 1e-6, 1e-7])) @ q.mT  # cond 1e7
    check_eigh(spd_ill.to(dtype), distinct=dtype == torch.float64)
    repeated = (q * torch.tensor([2.0, 2.0, -1.0, -1.0, -1.0, 5.0])) @ q.mT
    check_eigh(repeated.to(dtype), distinct=False)
    check_eigh(torch.eye(5, dtype=dtype), distinct=False)
    check_eigh(torch.zeros(2, 4, 4, dtype=dtype), distinct=False)
    check_eigh(torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=dtype))  # zero diagonal
    check_eigh(torch.diag(torch.tensor([3.0, -1.0, 2.0], dtype=dtype)))  # already diagonal: sorted only
    big = 1e30 if dtype == torch.float32 else 1e250
    s = rand(4, 4, dtype=dtype)
    torch.testing.assert_close(on_tpu(torch.linalg.eigvalsh, s * big) / big, torch.linalg.eigvalsh(s))


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (0, 3, 3)])
def test_eigh_empty(shape):
    check(torch.linalg.eigh, torch.zeros(shape))
    check(torch.linalg.eigvalsh, torch.zeros(shape))


def test_eigh_nan_raises():
    a = rand(3, 3)
    a[2, 0] = float("nan")  # in the lower triangle, which UPLO="L" reads
    with pytest.raises(RuntimeError):
        torch.linalg.eigh(a)
    with pytest.raises(RuntimeError, match="non-finite"):
        torch.linalg.eigh(a.to(DEV))[0].cpu()
    check(lambda t: torch.linalg.eigvalsh(t, UPLO="U"), a)  # the NaN is in the unread triangle


def test_eigh_gradients():
    a = rand(2, 5, 5)

    def run(dev):
        x = a.to(dev).requires_grad_()
        w, v = torch.linalg.eigh(x)
        (w.pow(2).sum() + v.pow(2)[..., 0].sum() + torch.linalg.eigvalsh(x, UPLO="U").sum()).backward()
        return x.grad

    before = fallbacks()
    got = run(DEV)
    assert fallbacks() == before, fallbacks()
    torch.testing.assert_close(got.cpu(), run("cpu"))


def test_decompositions_in_compiled_graph():
    torch._dynamo.reset()

    def f(a):
        q, r = torch.linalg.qr(a)
        s = torch.linalg.svdvals(a)
        w = torch.linalg.eigvalsh(a.mT @ a)
        return q.abs() + 1, r.abs(), s, w

    a = rand(2, 6, 4)
    before = fallbacks()
    got = torch.compile(f, backend="tpu", fullgraph=True)(a.to(DEV))
    assert fallbacks() == before, fallbacks()
    torch.testing.assert_close(tuple(g.cpu() for g in got), f(a))


# ---------------------------------------------------------------- lstsq

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shapes", [((6, 3), (6, 2)), ((3, 6), (3, 2)), ((2, 6, 4), (1, 6, 3)), ((4, 4), (4,)),
                                    ((2, 5, 3), (2, 5)), ((4, 7), (4,))])
def test_lstsq(dtype, driver, shapes):
    a, b = rand(*shapes[0], dtype=dtype), rand(*shapes[1], dtype=dtype, seed=1)
    m, n = shapes[0][-2:]
    if driver in ("gelsd", "gelss") and m > n:
        # Their residuals are [..., k] only when every matrix has full rank: a shape that
        # depends on the data, so these calls run on the CPU fallback (documented).
        torch.testing.assert_close(torch.linalg.lstsq(a.to(DEV), b.to(DEV), driver=driver).solution.cpu(),
                                   torch.linalg.lstsq(a, b, driver=driver).solution)
        return
    check(lambda x, y: tuple(torch.linalg.lstsq(x, y, driver=driver)), a, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lstsq_rank_deficient_and_rcond(dtype):
    # Rank 2 of 4: gelsy and the SVD both give the minimum-norm solution and rank 2.
    a = (rand(6, 2) @ rand(2, 4, seed=1)).to(dtype)
    b = rand(6, 3, dtype=dtype, seed=2)
    check(lambda x, y: tuple(torch.linalg.lstsq(x, y)), a, b)
    check(lambda x, y: tuple(torch.linalg.lstsq(x.mT, y[:4])), a, b)
    ill = with_singular_values([1.0, 1e-2, 1e-9], 5, 3, dtype).to(dtype)
    # rcond truncates to rank 2. gelsy truncates a pivoted QR rather than the SVD: same rank,
    # but its solution differs from the SVD-truncated one (here by ~1e-4 relative), so the
    # solutions are compared with gelsd, which truncates the SVD as we do.
    check(lambda x, y: torch.linalg.lstsq(x, y, rcond=1e-5).rank, ill, b[:5])
    # float32: the kept part has condition number 100, so both results carry ~100 eps errors.
    tol = {} if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-4)
    check(lambda x, y: tuple(torch.linalg.lstsq(x, y, rcond=1e-5, driver="gelsd")), ill.mT, b[:3], **tol)


def test_lstsq_gradients():
    a, b = rand(2, 6, 3), rand(2, 6, 2, seed=1)

    def run(dev):
        x, y = a.to(dev).requires_grad_(), b.to(dev).requires_grad_()
        torch.linalg.lstsq(x, y).solution.pow(2).sum().backward()
        return x.grad, y.grad

    before = fallbacks()
    got = run(DEV)
    assert fallbacks() == before, fallbacks()
    for g, w in zip(got, run("cpu")):
        torch.testing.assert_close(g.cpu(), w)


def test_lstsq_errors_match_cpu():
    for f, args in [(torch.linalg.lstsq, (rand(3), rand(3))),
                    (torch.linalg.lstsq, (rand(4, 3), rand(5, 2))),
                    (torch.linalg.lstsq, (rand(4, 3), rand(4, 2, dtype=torch.float32))),
                    (torch.linalg.lstsq, (rand(2, 4, 3), rand(3, 4, 2))),
                    (lambda x, y: torch.linalg.lstsq(x, y, driver="bad"), (rand(4, 3), rand(4, 2)))]:
        with pytest.raises(Exception) as cpu:
            f(*args)
        with pytest.raises(type(cpu.value)):
            f(*[t.to(DEV) for t in args])



# ---------------------------------------------------------------- Cholesky

def spd(*shape, dtype=torch.float64, seed=0):
    a = rand(*shape, dtype=torch.float64, seed=seed)
    return (a @ a.mT + shape[-1] * torch.eye(shape[-1], dtype=torch.float64)).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (3, 6, 6), (2, 2, 4, 4)])
def test_cholesky(dtype, shape):
    a = spd(*shape, dtype=dtype)
    junk = rand(*shape, dtype=dtype, seed=3)  # the triangle LAPACK does not read
    lower, upper = a.tril() + junk.triu(1), a.triu() + junk.tril(-1)
    check(torch.linalg.cholesky, lower)
    check(lambda t: tuple(torch.linalg.cholesky_ex(t)), lower)
    check(lambda t: torch.linalg.cholesky(t, upper=True), upper)
    check(lambda t: torch.linalg.cholesky(t.mT), lower.mT.contiguous())  # non-contiguous
    b = rand(*shape[:-1], 3, dtype=dtype, seed=1)
    l = torch.linalg.cholesky(a)
    check(torch.cholesky_solve, b, l)
    check(lambda x, f: torch.cholesky_solve(x, f, upper=True), b, l.mT)
    check(torch.cholesky_solve, b, l[..., :1, :, :] if l.dim() > 2 else l)  # broadcast factor
    check(torch.cholesky_inverse, l)
    check(lambda f: torch.cholesky_inverse(f, upper=True), l.mT)


def test_cholesky_not_positive_definite():
    a = spd(3, 4, 4)
    a[1, 2, 2] = -100.0  # fails at column 3 (info = 3)
    a[2, 0, 0] = float("nan")  # fails at column 1
    check(lambda t: torch.linalg.cholesky_ex(t).info, a)
    torch.testing.assert_close(on_tpu(torch.linalg.cholesky_ex, a)[0][0], torch.linalg.cholesky(a[0]))
    with pytest.raises(torch.linalg.LinAlgError):  # check_errors: PyTorch raises from info
        torch.linalg.cholesky(a.to(DEV))
    check(lambda t: tuple(torch.linalg.cholesky_ex(t)), torch.zeros(0, 3, 3))


def test_cholesky_gradients_and_distributions():
    a = spd(2, 4, 4)
    b = rand(2, 4, 2, seed=1)

    def run(dev):
        x, y = a.to(dev).requires_grad_(), b.to(dev).requires_grad_()
        l = torch.linalg.cholesky(x)
        (l.sum() + torch.cholesky_solve(y, l).pow(2).sum() + torch.cholesky_inverse(l).sum()).backward()
        return x.grad, y.grad

    before = fallbacks()
    got = run(DEV)
    assert fallbacks() == before, fallbacks()
    for g, w in zip(got, run("cpu")):
        torch.testing.assert_close(g.cpu(), w)
    # MultivariateNormal's log_prob: Cholesky and triangular solves.
    dist = lambda t: torch.distributions.MultivariateNormal(torch.zeros(4, dtype=t.dtype, device=t.device), t[0])
    check(lambda t, y: dist(t).log_prob(y[0].mT), a, b)


def test_out_variants():
    a = rand(2, 5, 3)
    s = a[0].mT @ a[0]

    def run(dev):
        t, q = a.to(dev), s.to(dev)
        new = lambda: torch.empty(0, dtype=a.dtype, device=dev)
        outs = [new() for _ in range(11)]
        torch.geqrf(t, out=(outs[0], outs[1]))
        torch.linalg.qr(t, out=(outs[2], outs[3]))
        torch.linalg.svdvals(t, out=outs[4])
        torch.linalg.eigvalsh(q, out=outs[5])
        torch.linalg.eigh(q, out=(outs[6], outs[7]))
        torch.linalg.lstsq(t, t[..., :2], out=(outs[8], outs[9], outs[10], new()))
        return [o.cpu() for o in outs[:6] + [outs[8]]]

    before = fallbacks()
    got = run(DEV)
    assert fallbacks() == before, fallbacks()
    for g, w in zip(got, run("cpu")):
        torch.testing.assert_close(g, w)
