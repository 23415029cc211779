// LU-based linear algebra for real floating types: linalg_lu_factor_ex, linalg_lu, lu_unpack,
// linalg_lu_solve, linalg_inv_ex, _linalg_solve_ex.
//
// StableHLO has no LU op: the factorization is partial-pivoting Gaussian elimination written as
// one stablehlo.while over the columns (LAPACK's getf2 order: the pivot is the first row of
// largest |a| at or below the diagonal; a zero pivot sets info = k + 1 and leaves its column
// unscaled). Row swaps are gathers and the updates selects, so a NaN/inf stays in the rows and
// columns elimination combines it with. Solves use stablehlo.triangular_solve. Pivots are
// 1-based int32 as in LAPACK. Complex inputs and pivot=False go to the CPU (NotLowerable; the
// CPU itself has no unpivoted LU).
#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

void require_real(DType t, const char* op) {
  if (!is_float(t) || t == DType::BF16 || t == DType::F16) {
    throw NotLowerable(std::string(op) + " of " + mlir_name(t));
  }
}

Value s64(Builder& b, int64_t v) { return constant(b, static_cast<double>(v), DType::S64); }

// x[b, idx[b, i], ...] for x [Bt, m, ...] and idx [Bt, m'] -> [Bt, m', ...].
Value gather_batched_rows(Builder& b, Value x, Value idx) {
  int64_t Bt = idx.shape()[0], m = idx.shape()[1];
  Value coords = concatenate(b, {iota(b, Type(DType::S64, {Bt, m, 1}), 0), reshape(b, idx, {Bt, m, 1})}, 2);
  GatherDims d;
  d.collapsed_slice_dims = {0, 1};
  d.start_index_map = {0, 1};
  d.index_vector_dim = 2;
  std::vector<int64_t> sizes{1, 1}, shape{Bt, m};
  for (int64_t i = 2; i < x.rank(); ++i) {
    d.offset_dims.push_back(i);
    sizes.push_back(x.shape()[i]);
    shape.push_back(x.shape()[i]);
  }
  return gather(b, x, coords, d, sizes, shape);
}

// Row index after swapping rows k and p[b]: [Bt, m].
Value swapped_rows(Builder& b, Value k, Value p, int64_t Bt, int64_t m) {
  Value rows = iota(b, Type(DType::S64, {Bt, m}), 1);
  Value kk = broadcast_in_dim(b, k, {Bt, m}, {});
  Value pp = broadcast_in_dim(b, p, {Bt, m}, {0});
  return select(b, compare(b, rows, kk, Direction::EQ), pp, select(b, compare(b, rows, pp, Direction::EQ), kk, rows));
}

struct Lu {
  Value lu;     // [Bt, m, n]
  Value piv;    // [Bt, min(m, n)] s32, 1-based
  Value perm;   // [Bt, m] s64: A[perm] = L U
  Value info;   // [Bt] s32
};

Lu lu_factor(Builder& b, Value a) {
  int64_t Bt = a.shape()[0], m = a.shape()[1], n = a.shape()[2], kmax = std::min(m, n);
  DType t = a.dtype();
  Type ta = a.type, tpiv(DType::S32, {Bt, kmax}), tperm(DType::S64, {Bt, m}), tinfo(DType::S32, {Bt}), tk(DType::S64, {});
  std::vector<Type> state{tk, ta, tpiv, tperm, tinfo};
  std::string cond = b.region(state, [&](Builder& rb, const std::vector<Value>& v) {
    return std::vector<Value>{compare(rb, v[0], s64(rb, kmax), Direction::LT)};
  });
  std::string body = b.region(state, [&](Builder& rb, const std::vector<Value>& v) {
    Value k = v[0], A = v[1], piv = v[2], perm = v[3], info = v[4];
    Value zero = s64(rb, 0);
    // Pivot: the first row >= k of largest |A[:, k]|.
    Value col = reshape(rb, dynamic_slice(rb, A, {zero, zero, k}, {Bt, m, 1}), {Bt, m});
    Value rows = iota(rb, Type(DType::S64, {Bt, m}), 1);
    Value eligible = compare(rb, rows, broadcast_in_dim(rb, k, {Bt, m}, {}), Direction::GE);
    // LAPACK's i?amax: |x| > running max, so a NaN is never picked unless it is the first
    // candidate (row k), which then stays; rows above k never are.
    Value col_nan = compare(rb, col, col, Direction::NE);
    Value cand = select(rb, binary(rb, Binary::And, eligible, unary(rb, Unary::Not, col_nan)), unary(rb, Unary::Abs, col),
                        constant(rb, -1, t, {Bt, m}));
    Type sv(t, {}), si(DType::S64, {});
    std::string pick = rb.region({sv, si, sv, si}, [&](Builder& r2, const std::vector<Value>& x) {
      Value gt = compare(r2, x[0], x[2], Direction::GT);
      Value tie = binary(r2, Binary::And, compare(r2, x[0], x[2], Direction::EQ), compare(r2, x[1], x[3], Direction::LT));
      Value a_nan = compare(r2, x[0], x[0], Direction::NE), b_nan = compare(r2, x[2], x[2], Direction::NE);
      // A NaN candidate is taken only when nothing else is (LAPACK's idamax never picks it).
      Value take = binary(r2, Binary::Or, gt, tie);
      take = select(r2, a_nan, b_nan, select(r2, b_nan, constant(r2, 1, DType::Pred), take));
      take = select(r2, binary(r2, Binary::And, a_nan, b_nan), compare(r2, x[1], x[3], Direction::LT), take);
      return std::vector<Value>{select(r2, take, x[0], x[2]), select(r2, take, x[1], x[3])};
    });
    std::vector<Value> best = rb.emit("stablehlo.reduce", {cand, rows, constant(rb, -2, t), s64(rb, m)},
                                      {Type(t, {Bt}), Type(DType::S64, {Bt})}, "dimensions = " + i64_array({1}), {pick});
    Value first_nan = reshape(rb, dynamic_slice(rb, col_nan, {zero, k}, {Bt, 1}), {Bt});
    Value p = select(rb, first_nan, broadcast_in_dim(rb, k, {Bt}, {}), best[1]);
    Value order = swapped_rows(rb, k, p, Bt, m);
    A = gather_batched_rows(rb, A, order);
    perm = gather_batched_rows(rb, perm, order);
    Value cols = iota(rb, Type(DType::S32, {Bt, kmax}), 1);
    Value k32 = convert(rb, k, DType::S32);
    piv = select(rb, compare(rb, cols, broadcast_in_dim(rb, k32, {Bt, kmax}, {}), Direction::EQ),
                 broadcast_in_dim(rb, add(rb, convert(rb, p, DType::S32), constant(rb, 1, DType::S32, {Bt})), {Bt, kmax}, {0}),
                 piv);
    // Eliminate below the pivot.
    Value pivot = reshape(rb, dynamic_slice(rb, A, {zero, k, k}, {Bt, 1, 1}), {Bt});
    Value singular = compare(rb, pivot, zeros(rb, pivot.type), Direction::EQ);
    Value first = binary(rb, Binary::And, singular, compare(rb, info, zeros(rb, info.type), Direction::EQ));
    info = select(rb, first, broadcast_in_dim(rb, add(rb, k32, constant(rb, 1, DType::S32)), {Bt}, {}), info);
    Value colk = dynamic_slice(rb, A, {zero, zero, k}, {Bt, m, 1});
    Value rowk = dynamic_slice(rb, A, {zero, k, zero}, {Bt, 1, n});
    Value piv3 = broadcast_in_dim(rb, pivot, {Bt, m, 1}, {0});
    // LAPACK (?getf2) scales by the reciprocal of a pivot at least the smallest normal number and
    // divides only by smaller ones; the two round differently, which decides whether a dependent
    // row's pivot comes out exactly 0 (a singular `info`) or a rounding residue.
    double smallest_normal = t == DType::F64 ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
    Value scaled = mul(rb, colk, div(rb, constant(rb, 1, t, {Bt, m, 1}), piv3));
    Value by_recip = compare(rb, unary(rb, Unary::Abs, piv3), constant(rb, smallest_normal, t, {Bt, m, 1}), Direction::GE);
    Value l = select(rb, broadcast_in_dim(rb, singular, {Bt, m, 1}, {0}), colk,
                     select(rb, by_recip, scaled, div(rb, colk, piv3)));
    std::vector<int64_t> full{Bt, m, n};
    Value r3 = iota(rb, Type(DType::S64, full), 1), c3 = iota(rb, Type(DType::S64, full), 2);
    Value kf = broadcast_in_dim(rb, k, full, {});
    Value below = compare(rb, r3, kf, Direction::GT);
    Value lb = broadcast_in_dim(rb, reshape(rb, l, {Bt, m}), full, {0, 1});
    Value rb3 = broadcast_in_dim(rb, reshape(rb, rowk, {Bt, n}), full, {0, 2});
    // The product is rounded before the subtraction, as LAPACK's non-fused update rounds it:
    // fused into one FMA by XLA:CPU, a dependent row kept a rounding residue where LAPACK's
    // pivot is exactly 0 (and so its singular `info`, which inv/solve raise on).
    Value product = rb.emit1("stablehlo.optimization_barrier", {mul(rb, lb, rb3)}, Type(A.dtype(), full));
    Value updated = sub(rb, A, product);
    A = select(rb, binary(rb, Binary::And, below, compare(rb, c3, kf, Direction::GT)), updated, A);
    A = select(rb, binary(rb, Binary::And, below, compare(rb, c3, kf, Direction::EQ)), lb, A);
    return std::vector<Value>{add(rb, k, s64(rb, 1)), A, piv, perm, info};
  });
  std::vector<Value> init{s64(b, 0), a, constant(b, 0, DType::S32, {Bt, kmax}),
                          iota(b, tperm, 1), constant(b, 0, DType::S32, {Bt})};
  std::vector<Value> r = b.emit("stablehlo.while", init, state, "", {cond, body});
  return {r[1], r[2], r[3], r[4]};
}

// Leading dims folded into one batch dim: [Bt, m, n].
Value as_batch(Builder& b, Value x) {
  int64_t r = x.rank();
  int64_t Bt = 1;
  for (int64_t i = 0; i + 2 < r; ++i) Bt *= x.shape()[i];
  return reshape(b, x, {Bt, x.shape()[r - 2], x.shape()[r - 1]});
}

std::vector<int64_t> with_last(const std::vector<int64_t>& batch, std::vector<int64_t> last) {
  std::vector<int64_t> s = batch;
  s.insert(s.end(), last.begin(), last.end());
  return s;
}

std::vector<int64_t> batch_of(const Value& x) { return std::vector<int64_t>(x.shape().begin(), x.shape().end() - 2); }

void check_matrix(const Value& a, const char* op) {
  if (a.rank() < 2) {
    throw std::runtime_error(std::string(op) + ": The input tensor A must have at least 2 dimensions.");
  }
}

void check_square(const Value& a, const char* op) {
  check_matrix(a, op);
  if (a.shape()[a.rank() - 1] != a.shape()[a.rank() - 2]) {
    throw std::runtime_error(std::string(op) + ": A must be batches of square matrices, but they are " +
                             std::to_string(a.shape()[a.rank() - 2]) + " by " + std::to_string(a.shape()[a.rank() - 1]) +
                             " matrices");
  }
}

bool empty(const Value& x) { return x.type.numel() == 0; }

// linalg_lu_factor_ex(A, *, pivot=True, check_errors=False) -> (LU, pivots, info)
std::vector<Value> lu_factor_ex(Context& c) {
  Builder& b = c.b;
  Value a = c.tensor(0);
  check_matrix(a, "linalg.lu_factor");
  require_real(a.dtype(), "linalg_lu_factor_ex");
  if (c.has(1) && !c.bool_arg(1)) throw NotLowerable("LU without pivoting");
  if (empty(a)) return {zeros(b, c.out(0)), zeros(b, c.out(1)), zeros(b, c.out(2))};
  Lu f = lu_factor(b, as_batch(b, a));
  return {reshape(b, f.lu, c.out(0).shape), reshape(b, f.piv, c.out(1).shape), reshape(b, f.info, c.out(2).shape)};
}

// linalg_lu(A, *, pivot=True) -> (P, L, U)
std::vector<Value> lu(Context& c) {
  Builder& b = c.b;
  Value a = c.tensor(0);
  check_matrix(a, "linalg.lu");
  require_real(a.dtype(), "linalg_lu");
  if (c.has(1) && !c.bool_arg(1)) throw NotLowerable("LU without pivoting");
  if (empty(a)) {  // P is still the m x m identity (an m x 0 matrix has no rows to swap)
    const Type& pt = c.out(0);
    int64_t r = static_cast<int64_t>(pt.shape.size());
    Value eye = compare(b, iota(b, Type(DType::S64, pt.shape), r - 2), iota(b, Type(DType::S64, pt.shape), r - 1), Direction::EQ);
    return {convert(b, eye, pt.dtype), zeros(b, c.out(1)), zeros(b, c.out(2))};
  }
  Value ab = as_batch(b, a);
  int64_t Bt = ab.shape()[0], m = ab.shape()[1], n = ab.shape()[2], k = std::min(m, n);
  Lu f = lu_factor(b, ab);
  DType t = a.dtype();
  // P[r, i] = (perm[i] == r): A = P L U.
  Value rr = iota(b, Type(DType::S64, {Bt, m, m}), 1);
  Value P = convert(b, compare(b, rr, broadcast_in_dim(b, f.perm, {Bt, m, m}, {0, 2}), Direction::EQ), t);
  Value Lfull = slice(b, f.lu, {0, 0, 0}, {Bt, m, k}, {1, 1, 1});
  Value lr = iota(b, Type(DType::S64, {Bt, m, k}), 1), lc = iota(b, Type(DType::S64, {Bt, m, k}), 2);
  Value L = select(b, compare(b, lr, lc, Direction::GT), Lfull,
                   select(b, compare(b, lr, lc, Direction::EQ), constant(b, 1, t, {Bt, m, k}), zeros(b, Lfull.type)));
  Value Ufull = slice(b, f.lu, {0, 0, 0}, {Bt, k, n}, {1, 1, 1});
  Value ur = iota(b, Type(DType::S64, {Bt, k, n}), 1), uc = iota(b, Type(DType::S64, {Bt, k, n}), 2);
  Value U = select(b, compare(b, ur, uc, Direction::LE), Ufull, zeros(b, Ufull.type));
  return {reshape(b, P, c.out(0).shape), reshape(b, L, c.out(1).shape), reshape(b, U, c.out(2).shape)};
}

// The row permutation [Bt, rows] that LAPACK pivots [Bt, k] (1-based, k <= rows; default
// rows = k) apply: B[perm] = P^T B.
Value perm_of_pivots(Builder& b, Value piv, int64_t rows = -1) {
  int64_t Bt = piv.shape()[0], k = piv.shape()[1], n = rows < 0 ? k : rows;
  Type tperm(DType::S64, {Bt, n}), tk(DType::S64, {});
  std::vector<Type> state{tk, piv.type, tperm};
  std::string cond = b.region(state, [&](Builder& rb, const std::vector<Value>& v) {
    return std::vector<Value>{compare(rb, v[0], s64(rb, k), Direction::LT)};
  });
  std::string body = b.region(state, [&](Builder& rb, const std::vector<Value>& v) {
    Value k = v[0];
    Value p = reshape(rb, dynamic_slice(rb, v[1], {s64(rb, 0), k}, {Bt, 1}), {Bt});
    p = sub(rb, convert(rb, p, DType::S64), constant(rb, 1, DType::S64, {Bt}));
    p = clamp(rb, constant(rb, 0, DType::S64, {Bt}), p, constant(rb, static_cast<double>(n - 1), DType::S64, {Bt}));
    Value perm = gather_batched_rows(rb, v[2], swapped_rows(rb, k, p, Bt, n));
    return std::vector<Value>{add(rb, k, s64(rb, 1)), v[1], perm};
  });
  std::vector<Value> r = b.emit("stablehlo.while", {s64(b, 0), piv, iota(b, tperm, 1)}, state, "", {cond, body});
  return r[2];
}

Value tri_solve(Builder& b, Value a, Value rhs, bool lower, bool unit, bool transpose_a) {
  std::string attrs = std::string("left_side = true, lower = ") + (lower ? "true" : "false") +
                      ", unit_diagonal = " + (unit ? "true" : "false") + ", transpose_a = #stablehlo<transpose " +
                      (transpose_a ? "TRANSPOSE" : "NO_TRANSPOSE") + ">";
  return b.emit1("stablehlo.triangular_solve", {a, rhs}, rhs.type, attrs);
}

Value transpose_last2(Builder& b, Value x) {
  std::vector<int64_t> perm(x.rank());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[x.rank() - 1], perm[x.rank() - 2]);
  return transpose(b, x, perm);
}

// Solves A X = rhs (adjoint: A^T X = rhs) from A's LU and row permutation, all [Bt, ...].
Value lu_solve_batched(Builder& b, Value lu, Value perm, Value rhs, bool adjoint) {
  if (!adjoint) {
    Value y = gather_batched_rows(b, rhs, perm);  // P^T B
    y = tri_solve(b, lu, y, true, true, false);
    return tri_solve(b, lu, y, false, false, false);
  }
  // A^T = U^T L^T P^T: solve U^T, then L^T, then undo the permutation (X[perm[i]] = W[i]).
  Value w = tri_solve(b, lu, rhs, false, false, true);
  w = tri_solve(b, lu, w, true, true, true);
  int64_t Bt = perm.shape()[0], n = perm.shape()[1];
  ScatterDims d;
  d.inserted_window_dims = {0, 1};
  d.scatter_dims_to_operand_dims = {0, 1};
  d.index_vector_dim = 2;
  Value inv = scatter(b, constant(b, 0, DType::S64, {Bt, n}),
                      concatenate(b, {iota(b, Type(DType::S64, {Bt, n, 1}), 0), reshape(b, perm, {Bt, n, 1})}, 2),
                      iota(b, Type(DType::S64, {Bt, n}), 1), d, "");
  return gather_batched_rows(b, w, inv);
}

// Broadcasts x [batch..., r, c] to `batch` and folds it: [Bt, r, c].
Value fold_to(Builder& b, Value x, const std::vector<int64_t>& batch) {
  std::vector<int64_t> last(x.shape().end() - 2, x.shape().end());
  return as_batch(b, broadcast_to(b, x, with_last(batch, last)));
}

// Solve with a factored A ([batch..., n, n] LU and [batch..., n] perm) against B
// [batch'..., n, k] (or with left=False, X A = B for B [.., k, n]); out_shape is PyTorch's.
Value solve_factored(Builder& b, Value lu, Value perm, Value rhs, bool left, bool adjoint,
                     const std::vector<int64_t>& out_shape) {
  std::vector<int64_t> batch(out_shape.begin(), out_shape.end() - 2);
  if (!left) {  // X A = B  <=>  A^T X^T = B^T
    rhs = transpose_last2(b, rhs);
    adjoint = !adjoint;
  }
  int64_t n = lu.shape().back();
  Value luf = fold_to(b, lu, batch);
  Value pf = reshape(b, broadcast_to(b, reshape(b, perm, with_last(batch_of(lu), {n, 1})), with_last(batch, {n, 1})),
                     {luf.shape()[0], n});
  Value x = lu_solve_batched(b, luf, pf, fold_to(b, rhs, batch), adjoint);
  std::vector<int64_t> xs = with_last(batch, {x.shape()[1], x.shape()[2]});
  x = reshape(b, x, xs);
  return left ? x : transpose_last2(b, x);
}

// linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False)
std::vector<Value> lu_solve(Context& c) {
  Builder& b = c.b;
  Value lu = c.tensor(0), piv = c.tensor(1), rhs = c.tensor(2);
  check_square(lu, "linalg.lu_solve");
  require_real(lu.dtype(), "linalg_lu_solve");
  const Type& out = c.out();
  if (out.numel() == 0 || empty(lu)) return {zeros(b, out)};
  bool left = !c.has(3) || c.bool_arg(3), adjoint = c.has(4) && c.bool_arg(4);
  int64_t n = lu.shape().back();
  std::vector<int64_t> pb(piv.shape().begin(), piv.shape().end() - 1);
  int64_t Bp = 1;
  for (int64_t d : pb) Bp *= d;
  Value perm = reshape(b, perm_of_pivots(b, reshape(b, convert(b, piv, DType::S32), {Bp, n})), with_last(pb, {n}));
  Value luc = convert(b, lu, out.dtype);
  return {solve_factored(b, luc, perm, convert(b, rhs, out.dtype), left, adjoint, out.shape)};
}

// linalg_inv_ex(A, *, check_errors=False) -> (inverse, info)
std::vector<Value> inv_ex(Context& c) {
  Builder& b = c.b;
  Value a = c.tensor(0);
  check_square(a, "linalg.inv");
  require_real(a.dtype(), "linalg_inv_ex");
  if (empty(a)) return {zeros(b, c.out(0)), zeros(b, c.out(1))};
  Value ab = as_batch(b, a);
  int64_t Bt = ab.shape()[0], n = ab.shape()[1];
  Lu f = lu_factor(b, ab);
  Value eye = convert(b, compare(b, iota(b, Type(DType::S64, {Bt, n, n}), 1), iota(b, Type(DType::S64, {Bt, n, n}), 2), Direction::EQ),
                      a.dtype());
  Value x = lu_solve_batched(b, f.lu, f.perm, eye, false);
  return {reshape(b, x, c.out(0).shape), reshape(b, f.info, c.out(1).shape)};
}

// _linalg_solve_ex(A, B, *, left=True, check_errors=False) -> (result, LU, pivots, info)
std::vector<Value> solve_ex(Context& c) {
  Builder& b = c.b;
  Value a = c.tensor(0), rhs = c.tensor(1);
  check_square(a, "linalg.solve");
  DType t = c.out(0).dtype;
  require_real(t, "_linalg_solve_ex");
  bool left = !c.has(2) || c.bool_arg(2);
  // PyTorch's vector case: B is [n], or A's batch shape + [n].
  std::vector<int64_t> a_lead(a.shape().begin(), a.shape().end() - 1);
  bool vector = rhs.rank() == 1 || (rhs.rank() == a.rank() - 1 && rhs.shape() == a_lead);
  if (vector && !left) throw NotLowerable("linalg.solve of a vector with left=False");
  if (empty(a) || c.out(0).numel() == 0) {
    return {zeros(b, c.out(0)), zeros(b, c.out(1)), zeros(b, c.out(2)), zeros(b, c.out(3))};
  }
  a = convert(b, a, t);
  rhs = convert(b, rhs, t);
  Value ab = as_batch(b, a);
  int64_t n = ab.shape()[1];
  Lu f = lu_factor(b, ab);
  Value lu = reshape(b, f.lu, a.shape());
  Value perm = reshape(b, f.perm, with_last(batch_of(a), {n}));
  std::vector<int64_t> out_shape = c.out(0).shape;
  if (vector) {
    std::vector<int64_t> rs = rhs.shape();
    rs.push_back(1);
    rhs = reshape(b, rhs, rs);
    out_shape.push_back(1);
  }
  Value x = solve_factored(b, lu, perm, rhs, left, false, out_shape);
  return {reshape(b, x, c.out(0).shape), reshape(b, f.lu, c.out(1).shape), reshape(b, f.piv, c.out(2).shape),
          reshape(b, f.info, c.out(3).shape)};
}

// lu_unpack(LU, pivots, unpack_data=True, unpack_pivots=True) -> (P, L, U); the parts not
// asked for are empty tensors (PyTorch's shapes, from the meta kernel). Any dtype, complex
// included: it only selects entries.
std::vector<Value> lu_unpack(Context& c) {
  Builder& b = c.b;
  Value lu = c.tensor(0), piv = c.tensor(1);
  if (lu.rank() < 2) {
    throw InvalidCall("torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: " + shape_str(lu.shape()) +
                      " instead");
  }
  int64_t m = lu.shape()[lu.rank() - 2], n = lu.shape().back(), k = std::min(m, n);
  std::vector<int64_t> lb = batch_of(lu), pb(piv.shape().begin(), piv.shape().end() - (piv.rank() > 0 ? 1 : 0));
  if (piv.rank() < 1 || pb != lb || piv.shape().back() != k) throw NotLowerable("lu_unpack: pivots of another shape");
  std::vector<Value> outs;
  bool unpack_data = !c.has(2) || c.bool_arg(2), unpack_pivots = !c.has(3) || c.bool_arg(3);
  if (unpack_pivots && c.out(0).numel() > 0) {
    int64_t Bt = c.out(0).numel() / (m * m);
    Value perm = perm_of_pivots(b, reshape(b, convert(b, piv, DType::S32), {Bt, k}), m);
    Value rr = iota(b, Type(DType::S64, {Bt, m, m}), 1);
    Value P = convert(b, compare(b, rr, broadcast_in_dim(b, perm, {Bt, m, m}, {0, 2}), Direction::EQ), c.out(0).dtype);
    outs.push_back(reshape(b, P, c.out(0).shape));
  } else {
    outs.push_back(zeros(b, c.out(0)));
  }
  if (!unpack_data || c.out(1).numel() == 0 || c.out(2).numel() == 0) {
    outs.push_back(zeros(b, c.out(1)));
    outs.push_back(zeros(b, c.out(2)));
    return outs;
  }
  Value a = as_batch(b, lu);
  int64_t Bt = a.shape()[0];
  DType t = a.dtype();
  Value Lfull = slice(b, a, {0, 0, 0}, {Bt, m, k}, {1, 1, 1});
  Value lr = iota(b, Type(DType::S64, {Bt, m, k}), 1), lc = iota(b, Type(DType::S64, {Bt, m, k}), 2);
  Value L = select(b, compare(b, lr, lc, Direction::GT), Lfull,
                   select(b, compare(b, lr, lc, Direction::EQ), constant(b, 1, t, {Bt, m, k}), zeros(b, Lfull.type)));
  Value Ufull = slice(b, a, {0, 0, 0}, {Bt, k, n}, {1, 1, 1});
  Value ur = iota(b, Type(DType::S64, {Bt, k, n}), 1), uc = iota(b, Type(DType::S64, {Bt, k, n}), 2);
  Value U = select(b, compare(b, ur, uc, Direction::LE), Ufull, zeros(b, Ufull.type));
  outs.push_back(reshape(b, convert(b, L, c.out(1).dtype), c.out(1).shape));
  outs.push_back(reshape(b, convert(b, U, c.out(2).dtype), c.out(2).shape));
  return outs;
}

const Registrar registrar({
    {"lu_unpack", lu_unpack},
    {"linalg_lu_factor_ex", lu_factor_ex},
    {"linalg_lu", lu},
    {"linalg_lu_solve", lu_solve},
    {"linalg_inv_ex", inv_ex},
    {"_linalg_solve_ex", solve_ex},
});

}  // namespace
}  // namespace tpu::lowering
