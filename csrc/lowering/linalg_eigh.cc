// Symmetric eigendecomposition for float32/float64: _linalg_eigh (linalg.eigh, eigvalsh, and
// pinv / matrix_rank with hermitian=True).
//
// Cyclic two-sided Jacobi: A <- J^T A J zeroes one off-diagonal pair per rotation; n/2
// disjoint pairs rotate at once in the round-robin order (linalg_common.h: tournament), as
// row and column operations on [Bt, n, n/2] halves. The rotated pair's entries are then set
// to their exact values (a_pq = 0, a_pp - t a_pq, a_qq + t a_pq) so rounding cannot undo a
// rotation. Sweeps (linalg_jacobi.h) stop after one without a rotation or after kMaxJacobiSweeps.
// Only the UPLO triangle is read, as LAPACK. Eigenvalues ascend; eigenvectors agree with
// LAPACK's up to sign (and the basis of a repeated eigenvalue's space). A NaN in the read
// triangle raises the CPU's error class (RuntimeError) at the next host sync; an inf gives NaN
// eigenvalues, as the CPU.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "lowering/linalg_common.h"
#include "lowering/linalg_jacobi.h"
#include "lowering/math_helpers.h"

namespace tpu::lowering {
namespace {

using namespace hlo;
using namespace linalg;

// Jacobi on symmetric a [Bt, N, N] (N even) -> (diagonalized a, V [Bt, N, N] when want_v).
std::pair<Value, Value> two_sided_jacobi(Builder& b, Value a, Value amax, bool want_v) {
  int64_t Bt = a.shape()[0], N = a.shape()[1], h = N / 2;
  DType t = a.dtype();
  double eps = epsilon(t), tiny = t == DType::F64 ? std::numeric_limits<double>::min() : std::numeric_limits<float>::min();
  // Off-diagonal entries below this cannot move an eigenvalue by more than LAPACK's own error.
  Value floor = max(b, mul(b, amax, constant(b, eps * 1e-2, t, {Bt})), constant(b, tiny, t, {Bt}));
  std::vector<Value> carried{a};
  if (want_v) carried.push_back(eye(b, t, Bt, N, N));
  std::vector<Value> r = jacobi_sweeps(b, carried, N, [&](Builder& rb, const std::vector<Value>& x) {
    Value A = x[0];
    Value d = diagonal(rb, A);
    Value app = slice(rb, d, {0, 0}, {Bt, h}, {1, 1}), aqq = slice(rb, d, {0, h}, {Bt, N}, {1, 1});
    Value apq = diagonal(rb, slice(rb, A, {0, 0, h}, {Bt, h, N}, {1, 1, 1}));
    Value abs_pq = unary(rb, Unary::Abs, apq);
    Value bound = mul(rb, mul(rb, unary(rb, Unary::Sqrt, unary(rb, Unary::Abs, app)),
                              unary(rb, Unary::Sqrt, unary(rb, Unary::Abs, aqq))),
                      scalar_like(rb, eps, app));
    Value rot = logical_and(rb, compare(rb, abs_pq, bound, Direction::GT),
                            compare(rb, abs_pq, broadcast_in_dim(rb, floor, {Bt, h}, {0}), Direction::GT));
    Rotation j = jacobi_rotation(rb, app, aqq, apq, rot);
    auto [p, q] = halves(rb, A);
    Value X = rotate(rb, p, q, j.c, j.s);                      // A J
    auto [xp, xq] = halves(rb, transpose(rb, X, {0, 2, 1}));
    A = rotate(rb, xp, xq, j.c, j.s);                          // (A J)^T J = J^T A J
    // Exact values on the rotated pairs.
    std::vector<int64_t> full{Bt, N, N};
    Value rot_row = broadcast_in_dim(rb, concatenate(rb, {rot, rot}, 1), full, {0, 1});
    Value tpq = mul(rb, j.t, apq);
    Value dnew = broadcast_in_dim(rb, concatenate(rb, {sub(rb, app, tpq), add(rb, aqq, tpq)}, 1), full, {0, 1});
    Value diff = sub(rb, iota(rb, Type(DType::S64, full), 1), iota(rb, Type(DType::S64, full), 2));
    Value on_diag = compare(rb, diff, constant(rb, 0, DType::S64, full), Direction::EQ);
    Value absdiff = unary(rb, Unary::Abs, diff);
    Value on_pair = compare(rb, absdiff, constant(rb, static_cast<double>(h), DType::S64, full), Direction::EQ);
    A = select(rb, logical_and(rb, rot_row, on_diag), dnew, A);
    A = select(rb, logical_and(rb, rot_row, on_pair), zeros(rb, A.type), A);
    std::vector<Value> next{tournament(rb, tournament(rb, A, 1), 2)};
    if (want_v) {
      auto [vp, vq] = halves(rb, x[1]);
      next.push_back(tournament(rb, rotate(rb, vp, vq, j.c, j.s), 2));
    }
    return std::make_pair(next, rot);
  });
  return {r[0], want_v ? r[1] : Value{}};
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
  Value tri = diag_mask(b, Bt, n, n, uplo == "L" || uplo == "l" ? Direction::GE : Direction::LE);
  Value sym = select(b, tri, ab, transpose_last2(b, ab));
  b.assert_false(any_nan(b, sym),
                 "linalg.eigh: The algorithm failed to converge because the input matrix contained non-finite values.",
                 CheckKind::RuntimeError);
  Value amax = reduce(b, unary(b, Unary::Abs, sym), {1, 2}, "max");
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
