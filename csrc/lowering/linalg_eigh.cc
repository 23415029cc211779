// Symmetric eigendecomposition for float32/float64: _linalg_eigh (linalg.eigh, eigvalsh, and
// pinv / matrix_rank with hermitian=True).
//
// Cyclic two-sided Jacobi: A <- J^T A J zeroes one off-diagonal pair per rotation; n/2
// disjoint pairs rotate at once in the round-robin order (linalg_common.h: tournament), as
// row and column operations on [Bt, n, n/2] halves. The rotated pair's entries are then set
// to their exact values (a_pq = 0, a_pp - t a_pq, a_qq + t a_pq) so rounding cannot undo a
// rotation. Sweeps stop after one without a rotation or after kMaxSweeps (NaN cannot hang).
// Only the UPLO triangle is read, as LAPACK. Eigenvalues ascend; eigenvectors agree with
// LAPACK's up to sign (and the basis of a repeated eigenvalue's space). A NaN in the read
// triangle raises the CPU's error class (RuntimeError) at the next host sync; an inf gives NaN
// eigenvalues, as the CPU.
#include <algorithm>
#include <limits>
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

// sqrt(1 + z^2) without overflow.
Value hypot1(Builder& b, Value z) {
  Value az = unary(b, "stablehlo.abs", z), one = scalar_like(b, 1, z);
  Value big = max(b, az, one), small = min(b, az, one);
  Value r = div(b, small, big);
  return mul(b, big, unary(b, "stablehlo.sqrt", add(b, one, mul(b, r, r))));
}

// Columns [c*p - s*q | s*p + c*q] of x [Bt, r, 2h] = [p | q], c and s [Bt, h]: x J.
Value rotate_columns(Builder& b, Value x, Value c, Value s) {
  int64_t Bt = x.shape()[0], r = x.shape()[1], h = x.shape()[2] / 2;
  Value p = slice(b, x, {0, 0, 0}, {Bt, r, h}, {1, 1, 1}), q = slice(b, x, {0, 0, h}, {Bt, r, 2 * h}, {1, 1, 1});
  std::vector<int64_t> shape{Bt, r, h};
  Value cc = broadcast_in_dim(b, c, shape, {0, 2}), ss = broadcast_in_dim(b, s, shape, {0, 2});
  return concatenate(b, {sub(b, mul(b, cc, p), mul(b, ss, q)), add(b, mul(b, ss, p), mul(b, cc, q))}, 2);
}

// Jacobi on symmetric a [Bt, N, N] (N even) -> (diagonalized a, V [Bt, N, N] when want_v).
std::pair<Value, Value> two_sided_jacobi(Builder& b, Value a, Value amax, bool want_v) {
  int64_t Bt = a.shape()[0], N = a.shape()[1], h = N / 2, steps = N - 1;
  DType t = a.dtype();
  double eps = epsilon(t), tiny = t == DType::F64 ? std::numeric_limits<double>::min() : std::numeric_limits<float>::min();
  Type tk(DType::S64, {}), tp(DType::Pred, {});
  std::vector<Type> state{tk, tp, tp, a.type};
  Value v = eye(b, t, Bt, N, N);
  if (want_v) state.push_back(v.type);
  // Off-diagonal entries below this cannot move an eigenvalue by more than LAPACK's own error.
  Value floor = max(b, mul(b, amax, constant(b, eps * 1e-2, t, {Bt})), constant(b, tiny, t, {Bt}));
  std::string cond = b.region(state, [&](Builder& rb, const std::vector<Value>& x) {
    Value more = compare(rb, x[0], s64(rb, kMaxSweeps * steps), "LT");
    return std::vector<Value>{binary(rb, "stablehlo.and", more, unary(rb, "stablehlo.not", x[2]))};
  });
  std::string body = b.region(state, [&](Builder& rb, const std::vector<Value>& x) {
    Value A = x[3];
    Value d = diagonal(rb, A);
    Value app = slice(rb, d, {0, 0}, {Bt, h}, {1, 1}), aqq = slice(rb, d, {0, h}, {Bt, N}, {1, 1});
    Value apq = diagonal(rb, slice(rb, A, {0, 0, h}, {Bt, h, N}, {1, 1, 1}));
    Value abs_pq = unary(rb, "stablehlo.abs", apq);
    Value bound = mul(rb, mul(rb, unary(rb, "stablehlo.sqrt", unary(rb, "stablehlo.abs", app)),
                              unary(rb, "stablehlo.sqrt", unary(rb, "stablehlo.abs", aqq))),
                      scalar_like(rb, eps, app));
    Value rot = binary(rb, "stablehlo.and", compare(rb, abs_pq, bound, "GT"),
                       compare(rb, abs_pq, broadcast_in_dim(rb, floor, {Bt, h}, {0}), "GT"));
    // tan of the angle zeroing a_pq (Golub & Van Loan, symmetric Schur): J = [[c, s], [-s, c]].
    Value one = scalar_like(rb, 1, apq);
    Value g = select(rb, rot, apq, one);
    Value zeta = div(rb, sub(rb, aqq, app), mul(rb, scalar_like(rb, 2, g), g));
    Value tn = div(rb, sign_or_one(rb, zeta), add(rb, unary(rb, "stablehlo.abs", zeta), hypot1(rb, zeta)));
    tn = select(rb, rot, tn, zeros(rb, tn.type));
    Value c = div(rb, one, unary(rb, "stablehlo.sqrt", add(rb, one, mul(rb, tn, tn))));
    Value s = mul(rb, c, tn);
    Value X = rotate_columns(rb, A, c, s);                            // A J
    A = rotate_columns(rb, transpose(rb, X, {0, 2, 1}), c, s);        // (A J)^T J = J^T A J
    // Exact values on the rotated pairs.
    std::vector<int64_t> full{Bt, N, N};
    Value rot_row = broadcast_in_dim(rb, concatenate(rb, {rot, rot}, 1), full, {0, 1});
    Value tpq = mul(rb, tn, apq);
    Value dnew = broadcast_in_dim(rb, concatenate(rb, {sub(rb, app, tpq), add(rb, aqq, tpq)}, 1), full, {0, 1});
    Value diff = sub(rb, iota(rb, Type(DType::S64, full), 1), iota(rb, Type(DType::S64, full), 2));
    Value on_diag = compare(rb, diff, constant(rb, 0, DType::S64, full), "EQ");
    Value absdiff = unary(rb, "stablehlo.abs", diff);
    Value on_pair = compare(rb, absdiff, constant(rb, static_cast<double>(h), DType::S64, full), "EQ");
    A = select(rb, binary(rb, "stablehlo.and", rot_row, on_diag), dnew, A);
    A = select(rb, binary(rb, "stablehlo.and", rot_row, on_pair), zeros(rb, A.type), A);
    A = tournament(rb, tournament(rb, A, 1), 2);
    std::vector<Value> out{add(rb, x[0], s64(rb, 1)), x[1], x[2], A};
    if (want_v) out.push_back(tournament(rb, rotate_columns(rb, x[4], c, s), 2));
    Value rotated = binary(rb, "stablehlo.or", x[1], reduce(rb, rot, {0, 1}, "or"));
    Value sweep_end = compare(rb, rb.emit1("stablehlo.remainder", {out[0], s64(rb, steps)}, tk), s64(rb, 0), "EQ");
    out[2] = binary(rb, "stablehlo.and", sweep_end, unary(rb, "stablehlo.not", rotated));
    out[1] = select(rb, sweep_end, constant(rb, 0, DType::Pred), rotated);
    return out;
  });
  std::vector<Value> init{s64(b, 0), constant(b, 0, DType::Pred), constant(b, 0, DType::Pred), a};
  if (want_v) init.push_back(v);
  std::vector<Value> r = b.emit("stablehlo.while", init, state, "", {cond, body});
  return {r[3], want_v ? r[4] : Value{}};
}

// _linalg_eigh(A, UPLO="L", compute_v=True) -> (eigenvalues, eigenvectors)
std::vector<Value> eigh(Context& c) {
  Builder& b = c.b;
  Value a = c.tensor(0);
  if (a.rank() < 2) throw InvalidCall("linalg.eigh: The input tensor A must have at least 2 dimensions.");
  int64_t n = a.shape().back();
  if (a.shape()[a.rank() - 2] != n) {
    throw InvalidCall("linalg.eigh: A must be batches of square matrices, but they are " +
                      std::to_string(a.shape()[a.rank() - 2]) + " by " + std::to_string(n) + " matrices");
  }
  require_f32_f64(a.dtype(), "linalg_eigh_cpu");
  std::string uplo = c.has(1) ? c.arg(1).s : "L";
  if (uplo != "L" && uplo != "l" && uplo != "U" && uplo != "u") {
    throw InvalidCall("Expected UPLO argument to be 'L' or 'U', but got " + uplo);
  }
  bool want_v = !c.has(2) || c.bool_arg(2);
  const Type &tw = c.out(0), &tv = c.out(1);
  if (tw.numel() == 0) return {zeros(b, tw), zeros(b, tv)};
  DType t = a.dtype();
  Value ab = as_batch(b, a);
  int64_t Bt = ab.shape()[0];
  Value tri = diag_mask(b, Bt, n, n, uplo == "L" || uplo == "l" ? "GE" : "LE");
  Value sym = select(b, tri, ab, transpose_last2(b, ab));
  b.assert_false(any_nan(b, sym),
                 "linalg.eigh: The algorithm failed to converge because the input matrix contained non-finite values.",
                 CheckKind::RuntimeError);
  Value amax = reduce(b, unary(b, "stablehlo.abs", sym), {1, 2}, "max");
  int64_t Np = n + (n % 2);
  if (Np != n) sym = pad(b, sym, zeros(b, Type(t, {})), {0, 0, 0}, {0, 1, 1}, {0, 0, 0});  // never rotates
  auto [d, vr] = two_sided_jacobi(b, sym, amax, want_v);
  Value w = slice(b, diagonal(b, d), {0, 0}, {Bt, n}, {1, 1});
  std::vector<Value> sorted = sort(b, {w, iota(b, Type(DType::S64, {Bt, n}), 1)}, 1, false, true);
  Value wout = reshape(b, sorted[0], tw.shape);
  if (!want_v || tv.numel() == 0) return {wout, zeros(b, tv)};
  Value V = gather_columns(b, slice(b, vr, {0, 0, 0}, {Bt, n, n}, {1, 1, 1}), sorted[1]);
  return {wout, reshape(b, V, tv.shape)};
}

const Registrar registrar({
    {"_linalg_eigh", eigh},
    {"_linalg_eigh.eigenvalues", eigh},  // out= (rule_for knows only overloads named like "out")
});

}  // namespace
}  // namespace tpu::lowering
