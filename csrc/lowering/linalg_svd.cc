// Singular value decomposition for float32/float64: _linalg_svd (linalg.svd, svdvals, and
// through them pinv, matrix_rank, matrix_norm(ord=2/nuc), cond, ...).
//
// One-sided (Hestenes) Jacobi: the columns of G (A, or A^T when m < n) are rotated pairwise
// until all are orthogonal; then sigma_j = ||g_j||, U = g_j / sigma_j, V = the product of the
// rotations. Pairs are rotated n/2 at a time in the round-robin order (tournament), which is
// plain vector arithmetic over [Bt, m, n/2] blocks. Sweeps stop after the first sweep in which
// every pair was orthogonal to rounding (|g_p . g_q| <= 2 m eps ||g_p|| ||g_q||) or after
// kMaxSweeps, so NaN cannot hang.
// U is completed to an orthonormal basis (zero singular values, full_matrices) by Householder
// QR of the normalized columns. Singular vectors agree with LAPACK's up to the sign of each
// column (and any basis of a repeated singular value's space). A NaN in the input raises the
// CPU's error at the next host sync (device-side check); an inf gives NaN values, as the CPU.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "lowering/linalg_common.h"
#include "lowering/math_helpers.h"

namespace tpu::lowering {
namespace {

using namespace hlo;
using namespace linalg;

constexpr int64_t kMaxSweeps = 40;

Value s64(Builder& b, int64_t v) { return constant(b, static_cast<double>(v), DType::S64); }

// Last-dim halves of x [Bt, r, 2h].
std::pair<Value, Value> halves(Builder& b, Value x) {
  int64_t Bt = x.shape()[0], r = x.shape()[1], h = x.shape()[2] / 2;
  return {slice(b, x, {0, 0, 0}, {Bt, r, h}, {1, 1, 1}), slice(b, x, {0, 0, h}, {Bt, r, 2 * h}, {1, 1, 1})};
}

// [c*p - s*q | s*p + c*q] for p, q [Bt, r, h] and c, s [Bt, h].
Value rotate(Builder& b, Value p, Value q, Value c, Value s) {
  const std::vector<int64_t>& shape = p.shape();
  Value cc = broadcast_in_dim(b, c, shape, {0, 2}), ss = broadcast_in_dim(b, s, shape, {0, 2});
  return concatenate(b, {sub(b, mul(b, cc, p), mul(b, ss, q)), add(b, mul(b, ss, p), mul(b, cc, q))}, 2);
}

// sqrt(1 + z^2) without overflow.
Value hypot1(Builder& b, Value z) {
  Value az = unary(b, "stablehlo.abs", z), one = scalar_like(b, 1, z);
  Value big = max(b, az, one), small = min(b, az, one);
  Value r = div(b, small, big);
  return mul(b, big, unary(b, "stablehlo.sqrt", add(b, one, mul(b, r, r))));
}

// Jacobi rotation (c, s) zeroing the off-diagonal of [[alpha, gamma], [gamma, beta]] with
// J = [[c, s], [-s, c]] (Golub & Van Loan's symmetric Schur); identity where !rot.
std::pair<Value, Value> jacobi_rotation(Builder& b, Value alpha, Value beta, Value gamma, Value rot) {
  Value one = scalar_like(b, 1, gamma);
  Value g = select(b, rot, gamma, one);
  Value zeta = div(b, sub(b, beta, alpha), mul(b, scalar_like(b, 2, g), g));
  Value t = div(b, sign_or_one(b, zeta), add(b, unary(b, "stablehlo.abs", zeta), hypot1(b, zeta)));
  t = select(b, rot, t, zeros(b, t.type));
  Value c = div(b, one, unary(b, "stablehlo.sqrt", add(b, one, mul(b, t, t))));
  return {c, mul(b, c, t)};
}

// One-sided Jacobi on g [Bt, M, N] (N even): returns the rotated g and V [Bt, N, N] (V only
// when want_v).
std::pair<Value, Value> one_sided_jacobi(Builder& b, Value g, bool want_v) {
  int64_t Bt = g.shape()[0], M = g.shape()[1], N = g.shape()[2], h = N / 2;
  DType t = g.dtype();
  // Pairs further from orthogonal than eps are rotated; sweeps end after one in which no pair
  // was further than 2 M eps, the rounding error of a length-M dot product: below that, the
  // measured angle is noise and the test may never settle, while quadratic convergence has
  // made the rotated columns orthogonal to working precision.
  double tol_rot = epsilon(t), tol_stop = 2.0 * static_cast<double>(M) * epsilon(t);
  Value v = eye(b, t, Bt, N, N);
  Type tk(DType::S64, {}), tp(DType::Pred, {});
  std::vector<Type> state{tk, tp, tp, g.type};
  if (want_v) state.push_back(v.type);
  int64_t steps = N - 1;
  std::string cond = b.region(state, [&](Builder& rb, const std::vector<Value>& x) {
    Value more = compare(rb, x[0], s64(rb, kMaxSweeps * steps), "LT");
    return std::vector<Value>{binary(rb, "stablehlo.and", more, unary(rb, "stablehlo.not", x[2]))};
  });
  std::string body = b.region(state, [&](Builder& rb, const std::vector<Value>& x) {
    auto [p, q] = halves(rb, x[3]);
    Value alpha = reduce(rb, mul(rb, p, p), {1}, "add"), beta = reduce(rb, mul(rb, q, q), {1}, "add");
    Value gamma = reduce(rb, mul(rb, p, q), {1}, "add");
    Value norms = mul(rb, unary(rb, "stablehlo.sqrt", alpha), unary(rb, "stablehlo.sqrt", beta));
    Value agamma = unary(rb, "stablehlo.abs", gamma);
    Value rot = compare(rb, agamma, mul(rb, norms, scalar_like(rb, tol_rot, alpha)), "GT");
    Value far = compare(rb, agamma, mul(rb, norms, scalar_like(rb, tol_stop, alpha)), "GT");
    auto [c, s] = jacobi_rotation(rb, alpha, beta, gamma, rot);
    std::vector<Value> out{add(rb, x[0], s64(rb, 1)), x[1], x[2], tournament(rb, rotate(rb, p, q, c, s), 2)};
    if (want_v) {
      auto [vp, vq] = halves(rb, x[4]);
      out.push_back(tournament(rb, rotate(rb, vp, vq, c, s), 2));
    }
    // A sweep is over when the schedule has come round; stop after one with no far pair.
    Value rotated = binary(rb, "stablehlo.or", x[1], reduce(rb, far, {0, 1}, "or"));
    Value sweep_end = compare(rb, rb.emit1("stablehlo.remainder", {out[0], s64(rb, steps)}, tk), s64(rb, 0), "EQ");
    out[2] = binary(rb, "stablehlo.and", sweep_end, unary(rb, "stablehlo.not", rotated));
    out[1] = select(rb, sweep_end, constant(rb, 0, DType::Pred), rotated);
    return out;
  });
  std::vector<Value> init{s64(b, 0), constant(b, 0, DType::Pred), constant(b, 0, DType::Pred), g};
  if (want_v) init.push_back(v);
  std::vector<Value> r = b.emit("stablehlo.while", init, state, "", {cond, body});
  return {r[3], want_v ? r[4] : Value{}};
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
  Value amax = reduce(b, unary(b, "stablehlo.abs", g), {1, 2}, "max");
  amax = select(b, compare(b, amax, zeros(b, amax.type), "GT"), amax, constant(b, 1, t, {Bt}));
  g = div(b, g, broadcast_in_dim(b, amax, g.shape(), {0}));
  if (Np != N) g = pad(b, g, zeros(b, Type(t, {})), {0, 0, 0}, {0, 0, 1}, {0, 0, 0});  // a zero column never rotates
  auto [gr, vr] = one_sided_jacobi(b, g, uv);
  gr = slice(b, gr, {0, 0, 0}, {Bt, M, N}, {1, 1, 1});
  Value sigma = unary(b, "stablehlo.sqrt", reduce(b, mul(b, gr, gr), {1}, "add"));  // [Bt, N]
  Value idx = iota(b, Type(DType::S64, {Bt, N}), 1);
  std::vector<Value> sorted = sort(b, {sigma, idx}, 1, true, true);
  Svd r;
  r.s = mul(b, sorted[0], broadcast_in_dim(b, amax, {Bt, N}, {0}));
  if (!uv) return r;
  Value V = gather_columns(b, slice(b, vr, {0, 0, 0}, {Bt, N, N}, {1, 1, 1}), sorted[1]);  // [Bt, N, N]
  Value G = gather_columns(b, gr, sorted[1]);
  Value sg = sorted[0];
  Value positive = compare(b, sg, zeros(b, sg.type), "GT");
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
