// Singular value decomposition for float32/float64: _linalg_svd (linalg.svd, svdvals, and
// through them pinv, matrix_rank, matrix_norm(ord=2/nuc), cond, ...).
//
// One-sided (Hestenes) Jacobi: the columns of G (A, or A^T when m < n) are rotated pairwise
// until all are orthogonal; then sigma_j = ||g_j||, U = g_j / sigma_j, V = the product of the
// rotations. Pairs are rotated n/2 at a time in the round-robin order (tournament), which is
// plain vector arithmetic over [Bt, m, n/2] blocks. Sweeps stop after the first sweep in which
// every pair was orthogonal to rounding (|g_p . g_q| <= 2 m eps ||g_p|| ||g_q||) or after
// kMaxJacobiSweeps (linalg_jacobi.h), so NaN cannot hang.
// U is completed to an orthonormal basis (zero singular values, full_matrices) by Householder
// QR of the normalized columns. Singular vectors agree with LAPACK's up to the sign of each
// column (and any basis of a repeated singular value's space). A NaN in the input raises the
// CPU's error at the next host sync (device-side check); an inf gives NaN values, as the CPU.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "lowering/linalg_common.h"
#include "lowering/linalg_jacobi.h"
#include "lowering/math_helpers.h"

namespace tpu::lowering {
namespace {

using namespace hlo;
using namespace linalg;

// One-sided Jacobi on g [Bt, M, N] (N even): returns the rotated g and V [Bt, N, N] (V only
// when want_v).
std::pair<Value, Value> one_sided_jacobi(Builder& b, Value g, bool want_v) {
  int64_t Bt = g.shape()[0], M = g.shape()[1], N = g.shape()[2];
  DType t = g.dtype();
  // Pairs further from orthogonal than eps are rotated; sweeps end after one in which no pair
  // was further than 2 M eps, the rounding error of a length-M dot product: below that, the
  // measured angle is noise and the test may never settle, while quadratic convergence has
  // made the rotated columns orthogonal to working precision.
  double tol_rot = epsilon(t), tol_stop = 2.0 * static_cast<double>(M) * epsilon(t);
  std::vector<Value> carried{g};
  if (want_v) carried.push_back(eye(b, t, Bt, N, N));
  std::vector<Value> r = jacobi_sweeps(b, carried, N, [&](Builder& rb, const std::vector<Value>& x) {
    auto [p, q] = halves(rb, x[0]);
    Value alpha = reduce(rb, mul(rb, p, p), {1}, "add"), beta = reduce(rb, mul(rb, q, q), {1}, "add");
    Value gamma = reduce(rb, mul(rb, p, q), {1}, "add");
    Value norms = mul(rb, unary(rb, Unary::Sqrt, alpha), unary(rb, Unary::Sqrt, beta));
    Value agamma = unary(rb, Unary::Abs, gamma);
    Value rot = compare(rb, agamma, mul(rb, norms, scalar_like(rb, tol_rot, alpha)), Direction::GT);
    Value far = compare(rb, agamma, mul(rb, norms, scalar_like(rb, tol_stop, alpha)), Direction::GT);
    Rotation j = jacobi_rotation(rb, alpha, beta, gamma, rot);
    std::vector<Value> next{tournament(rb, rotate(rb, p, q, j.c, j.s), 2)};
    if (want_v) {
      auto [vp, vq] = halves(rb, x[1]);
      next.push_back(tournament(rb, rotate(rb, vp, vq, j.c, j.s), 2));
    }
    return std::make_pair(next, far);
  });
  return {r[0], want_v ? r[1] : Value{}};
}

}  // namespace

namespace linalg {

using namespace hlo;

Svd svd_decompose(Builder& b, Value ab, bool full, bool uv) {
  DType t = ab.dtype();
  int64_t Bt = ab.shape()[0], m = ab.shape()[1], n = ab.shape()[2];
  bool wide = m < n;
  Value g = wide ? transpose_last2(b, ab) : ab;  // [Bt, M, N], M >= N
  int64_t M = g.shape()[1], N = g.shape()[2], Np = N + (N % 2);
  // Scale by the largest |a| so that the squared norms neither overflow nor underflow.
  Value amax = reduce(b, unary(b, Unary::Abs, g), {1, 2}, "max");
  amax = select(b, compare(b, amax, zeros(b, amax.type), Direction::GT), amax, constant(b, 1, t, {Bt}));
  g = div(b, g, broadcast_in_dim(b, amax, g.shape(), {0}));
  if (Np != N) g = pad(b, g, zeros(b, Type(t, {})), {0, 0, 0}, {0, 0, 1}, {0, 0, 0});  // a zero column never rotates
  auto [gr, vr] = one_sided_jacobi(b, g, uv);
  gr = slice(b, gr, {0, 0, 0}, {Bt, M, N}, {1, 1, 1});
  Value sigma = unary(b, Unary::Sqrt, reduce(b, mul(b, gr, gr), {1}, "add"));  // [Bt, N]
  Value idx = iota(b, Type(DType::S64, {Bt, N}), 1);
  std::vector<Value> sorted = sort(b, {sigma, idx}, 1, true, true);
  Svd r;
  r.s = mul(b, sorted[0], broadcast_in_dim(b, amax, {Bt, N}, {0}));
  if (!uv) return r;
  Value V = gather_columns(b, slice(b, vr, {0, 0, 0}, {Bt, N, N}, {1, 1, 1}), sorted[1]);  // [Bt, N, N]
  Value G = gather_columns(b, gr, sorted[1]);
  Value sg = sorted[0];
  Value positive = compare(b, sg, zeros(b, sg.type), Direction::GT);
  Value inv = select(b, positive, div(b, constant(b, 1, t, {Bt, N}), sg), zeros(b, sg.type));
  Value U0 = mul(b, G, broadcast_in_dim(b, inv, G.shape(), {0, 2}));  // zero columns for sigma = 0
  // Orthonormal completion: Q of U0 = Q R has U0's columns (times sign(R_jj)) first.
  int64_t ucols = full ? M : N;
  Qr f = householder_qr(b, U0);
  Value Q = householder_product(b, f.a, f.tau, ucols);
  Value d = sign_or_one(b, diagonal(b, f.a));  // [Bt, N]
  if (ucols > N) d = pad(b, d, constant(b, 1, t), {0, 0}, {0, ucols - N}, {0, 0});
  Value U = mul(b, Q, broadcast_in_dim(b, d, Q.shape(), {0, 2}));  // [Bt, M, ucols]
  r.u = wide ? V : U;
  r.v = wide ? U : V;
  return r;
}

}  // namespace linalg

namespace {

// _linalg_svd(A, full_matrices=False, compute_uv=True, *, driver=None) -> (U, S, Vh)
std::vector<Value> svd(Context& c) {
  Builder& b = c.b;
  Value a = c.tensor(0);
  if (a.rank() < 2) throw InvalidCall("linalg.svd: The input tensor A must have at least 2 dimensions.");
  require_f32_f64(a.dtype(), "linalg_svd_cpu");
  bool full = c.has(1) && c.bool_arg(1), uv = !c.has(2) || c.bool_arg(2);
  DType t = a.dtype();
  Value ab = as_batch(b, a);
  int64_t Bt = ab.shape()[0], m = ab.shape()[1], n = ab.shape()[2], k = std::min(m, n);
  const Type &tu = c.out(0), &ts = c.out(1), &tv = c.out(2);
  if (Bt == 0) return {zeros(b, tu), zeros(b, ts), zeros(b, tv)};
  b.assert_false(any_nan(b, a),
                 "linalg.svd: The algorithm failed to converge because the input matrix contained non-finite values.",
                 CheckKind::RuntimeError);
  if (k == 0) {  // U and Vh are identities where square and non-empty
    auto id = [&](const Type& out, int64_t size) {
      return out.numel() == 0 ? zeros(b, out) : reshape(b, eye(b, t, Bt, size, size), out.shape);
    };
    return {uv ? id(tu, m) : zeros(b, tu), zeros(b, ts), uv ? id(tv, n) : zeros(b, tv)};
  }
  Svd r = svd_decompose(b, ab, full, uv);
  Value S = reshape(b, r.s, ts.shape);
  if (!uv) return {zeros(b, tu), S, zeros(b, tv)};
  return {reshape(b, r.u, tu.shape), S, reshape(b, transpose_last2(b, r.v), tv.shape)};
}

const Registrar registrar({
    {"_linalg_svd", svd},
    {"_linalg_svd.U", svd},  // out= (rule_for knows only overloads named like "out")
});

}  // namespace
}  // namespace tpu::lowering
