// Cholesky for float32/float64: linalg_cholesky_ex, _cholesky_solve_helper (cholesky_solve),
// cholesky_inverse.
//
// The factorization is right-looking Cholesky as one stablehlo.while over the columns (no
// LAPACK on a TPU). Only the triangle LAPACK reads (lower, or upper when upper=True) is used.
// The first non-positive (or NaN) pivot sets info = k + 1 and freezes that matrix, as potrf
// stops there; the factor of such a matrix is not meaningful (the CPU's is LAPACK's partial
// state). Solves are stablehlo.triangular_solve. Complex inputs run on the CPU fallback.
#include <string>
#include <vector>

#include "lowering/linalg_common.h"
#include "lowering/math_helpers.h"

namespace tpu::lowering {
namespace {

using namespace hlo;
using namespace linalg;

struct Chol {
  Value l;     // [Bt, n, n] lower
  Value info;  // [Bt] s32
};

Chol cholesky(Builder& b, Value a) {
  int64_t Bt = a.shape()[0], n = a.shape()[1];
  DType t = a.dtype();
  std::vector<int64_t> full{Bt, n, n};
  Type tk(DType::S64, {}), tinfo(DType::S32, {Bt});
  std::vector<Type> state{tk, a.type, tinfo};
  std::string cond = b.region(state, [&](Builder& rb, const std::vector<Value>& v) {
    return std::vector<Value>{compare(rb, v[0], s64(rb, n), Direction::LT)};
  });
  std::string body = b.region(state, [&](Builder& rb, const std::vector<Value>& v) {
    Value k = v[0], A = v[1], info = v[2];
    Value zero = s64(rb, 0);
    Value d = reshape(rb, dynamic_slice(rb, A, {zero, k, k}, {Bt, 1, 1}), {Bt});
    Value ok = compare(rb, d, zeros(rb, d.type), Direction::GT);  // false for NaN too
    Value izero = zeros(rb, info.type);
    Value k32 = broadcast_in_dim(rb, add(rb, convert(rb, k, DType::S32), constant(rb, 1, DType::S32)), {Bt}, {});
    info = select(rb, binary(rb, Binary::And, unary(rb, Unary::Not, ok), compare(rb, info, izero, Direction::EQ)), k32, info);
    Value active = compare(rb, info, izero, Direction::EQ);
    Value lkk = unary(rb, Unary::Sqrt, select(rb, ok, d, constant(rb, 1, t, {Bt})));
    Value col = reshape(rb, dynamic_slice(rb, A, {zero, zero, k}, {Bt, n, 1}), {Bt, n});
    Value rows = iota(rb, Type(DType::S64, {Bt, n}), 1), kk = broadcast_in_dim(rb, k, {Bt, n}, {});
    Value l = select(rb, compare(rb, rows, kk, Direction::GT), div(rb, col, broadcast_in_dim(rb, lkk, {Bt, n}, {0})), zeros(rb, col.type));
    Value r3 = iota(rb, Type(DType::S64, full), 1), c3 = iota(rb, Type(DType::S64, full), 2);
    Value kf = broadcast_in_dim(rb, k, full, {});
    Value trailing = binary(rb, Binary::And, compare(rb, r3, kf, Direction::GT), compare(rb, c3, kf, Direction::GT));
    Value outer = mul(rb, broadcast_in_dim(rb, l, full, {0, 1}), broadcast_in_dim(rb, l, full, {0, 2}));
    Value next = select(rb, trailing, sub(rb, A, outer), A);
    Value colk = select(rb, compare(rb, r3, kf, Direction::EQ), broadcast_in_dim(rb, lkk, full, {0}), broadcast_in_dim(rb, l, full, {0, 1}));
    next = select(rb, binary(rb, Binary::And, compare(rb, c3, kf, Direction::EQ), compare(rb, r3, kf, Direction::GE)), colk, next);
    A = select(rb, broadcast_in_dim(rb, active, full, {0}), next, A);
    return std::vector<Value>{add(rb, k, s64(rb, 1)), A, info};
  });
  std::vector<Value> r = b.emit("stablehlo.while", {s64(b, 0), a, zeros(b, tinfo)}, state, "", {cond, body});
  Value L = select(b, diag_mask(b, Bt, n, n, Direction::GE), r[1], zeros(b, a.type));
  return {L, r[2]};
}

void check_square(const Value& a, const std::string& op) {
  if (a.rank() < 2) throw InvalidCall(op + ": The input tensor A must have at least 2 dimensions.");
  int64_t m = a.shape()[a.rank() - 2], n = a.shape().back();
  if (m != n) {
    throw InvalidCall(op + ": A must be batches of square matrices, but they are " + std::to_string(m) + " by " +
                      std::to_string(n) + " matrices");
  }
}

// linalg_cholesky_ex(A, *, upper=False, check_errors=False) -> (L, info)
std::vector<Value> cholesky_ex(Context& c) {
  Builder& b = c.b;
  Value a = c.tensor(0);
  check_square(a, "linalg.cholesky");
  require_f32_f64(a.dtype(), "linalg_cholesky_ex");
  bool upper = c.has(1) && c.bool_arg(1);
  if (c.out(0).numel() == 0) return {zeros(b, c.out(0)), zeros(b, c.out(1))};
  Value ab = as_batch(b, a);
  int64_t Bt = ab.shape()[0], n = ab.shape()[1];
  // The lower factor of the matrix whose lower triangle is A's read triangle.
  Value sym = upper ? transpose_last2(b, ab) : ab;
  Chol f = cholesky(b, select(b, diag_mask(b, Bt, n, n, Direction::GE), sym, transpose_last2(b, sym)));
  Value L = upper ? transpose_last2(b, f.l) : f.l;
  return {reshape(b, L, c.out(0).shape), reshape(b, f.info, c.out(1).shape)};
}

Value tri_solve(Builder& b, Value a, Value rhs, bool lower, bool transpose_a) {
  std::string attrs = std::string("left_side = true, lower = ") + (lower ? "true" : "false") +
                      ", unit_diagonal = false, transpose_a = #stablehlo<transpose " +
                      (transpose_a ? "TRANSPOSE" : "NO_TRANSPOSE") + ">";
  return b.emit1("stablehlo.triangular_solve", {a, rhs}, rhs.type, attrs);
}

// (L L^T)^-1 rhs, or (U^T U)^-1 rhs, for a factor [Bt, n, n] and rhs [Bt, n, k].
Value solve_with_factor(Builder& b, Value f, Value rhs, bool upper) {
  if (upper) return tri_solve(b, f, tri_solve(b, f, rhs, false, true), false, false);
  return tri_solve(b, f, tri_solve(b, f, rhs, true, false), true, true);
}

// _cholesky_solve_helper(self=B, A=factor, upper) -> X; cholesky_solve broadcasts first.
std::vector<Value> cholesky_solve(Context& c) {
  Builder& b = c.b;
  Value rhs = c.tensor(0), f = c.tensor(1);
  bool upper = c.bool_arg(2);
  for (const auto& [name, v] : {std::pair<const char*, Value>{"self", rhs}, {"A", f}}) {
    if (v.rank() < 2) {
      throw InvalidCall(std::string("cholesky_solve: ") + name + " must have at least 2 dimensions, got " + shape_str(v.shape()));
    }
  }
  if (f.shape()[f.rank() - 1] != f.shape()[f.rank() - 2]) {
    throw InvalidCall("cholesky_solve: A must be batches of square matrices, got " + shape_str(f.shape()));
  }
  // cholesky_solve's own check: the helper's CPU kernel makes none and returns b unchanged.
  if (rhs.shape()[rhs.rank() - 2] != f.shape().back()) {
    throw InvalidCall("Incompatible matrix sizes for cholesky_solve: each A matrix is " + std::to_string(f.shape().back()) +
                      " by " + std::to_string(f.shape().back()) + " but each b matrix is " +
                      std::to_string(rhs.shape()[rhs.rank() - 2]) + " by " + std::to_string(rhs.shape().back()));
  }
  require_f32_f64(c.out().dtype, "cholesky_solve_cpu");
  if (c.out().numel() == 0 || f.type.numel() == 0) return {zeros(b, c.out())};
  std::vector<int64_t> batch(c.out().shape.begin(), c.out().shape.end() - 2);
  int64_t n = f.shape().back();
  std::vector<int64_t> fs = batch;
  fs.push_back(n), fs.push_back(n);
  Value fb = as_batch(b, broadcast_to(b, convert(b, f, c.out().dtype), fs));
  Value rb = as_batch(b, broadcast_to(b, convert(b, rhs, c.out().dtype), c.out().shape));
  return {reshape(b, solve_with_factor(b, fb, rb, upper), c.out().shape)};
}

// cholesky_inverse(L, upper=False) -> (L L^T)^-1 (or (U^T U)^-1)
std::vector<Value> cholesky_inverse(Context& c) {
  Builder& b = c.b;
  Value f = c.tensor(0);
  check_square(f, "cholesky_inverse");
  require_f32_f64(f.dtype(), "cholesky_inverse_out_cpu");
  bool upper = c.has(1) && c.bool_arg(1);
  if (c.out().numel() == 0) return {zeros(b, c.out())};
  Value fb = as_batch(b, f);
  int64_t Bt = fb.shape()[0], n = fb.shape()[1];
  return {reshape(b, solve_with_factor(b, fb, eye(b, f.dtype(), Bt, n, n), upper), c.out().shape)};
}

const Registrar registrar({
    {"linalg_cholesky_ex", cholesky_ex},
    {"_cholesky_solve_helper", cholesky_solve},
    {"cholesky_inverse", cholesky_inverse},
});

}  // namespace
}  // namespace tpu::lowering
