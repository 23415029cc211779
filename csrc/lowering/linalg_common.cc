// Shared pieces of the QR / SVD / eigh lowerings (see linalg_common.h), including Householder
// QR (geqrf) and the reflector product (orgqr), which the SVD reuses to complete U.
#include "lowering/linalg_common.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "lowering/math_helpers.h"

namespace tpu::lowering::linalg {

using namespace hlo;

Value s64(Builder& b, int64_t v) { return constant(b, static_cast<double>(v), DType::S64); }

namespace {

// Column j of v [Bt, m, c] as the reflector vector [Bt, m]: 0 above row j, 1 at row j.
Value reflector(Builder& b, Value v, Value j) {
  int64_t Bt = v.shape()[0], m = v.shape()[1];
  Value zero = s64(b, 0);
  Value col = reshape(b, dynamic_slice(b, v, {zero, zero, j}, {Bt, m, 1}), {Bt, m});
  Value rows = iota(b, Type(DType::S64, {Bt, m}), 1), jj = broadcast_in_dim(b, j, {Bt, m}, {});
  Value one = constant(b, 1, v.dtype(), {Bt, m});
  return select(b, compare(b, rows, jj, Direction::LT), zeros(b, col.type),
                select(b, compare(b, rows, jj, Direction::EQ), one, col));
}

// (I - tau v v^T) c for v [Bt, m], tau [Bt], c [Bt, m, n].
Value apply_reflector(Builder& b, Value v, Value tau, Value c) {
  int64_t Bt = c.shape()[0], m = c.shape()[1], n = c.shape()[2];
  Value w = dot_general(b, v, c, {0}, {0}, {1}, {1}, c.dtype());  // v^T c: [Bt, n]
  Value tv = mul(b, broadcast_in_dim(b, tau, {Bt, m}, {0}), v);
  return sub(b, c, mul(b, broadcast_in_dim(b, tv, {Bt, m, n}, {0, 1}), broadcast_in_dim(b, w, {Bt, m, n}, {0, 2})));
}

}  // namespace

void require_f32_f64(DType t, const std::string& kernel) {
  if (is_complex(t)) throw NotLowerable(kernel + " of " + mlir_name(t));
  require_dtype(t == DType::F32 || t == DType::F64, kernel, t);
}

Value as_batch(Builder& b, Value x) {
  int64_t r = x.rank(), Bt = 1;
  for (int64_t i = 0; i + 2 < r; ++i) Bt *= x.shape()[i];
  return reshape(b, x, {Bt, x.shape()[r - 2], x.shape()[r - 1]});
}

Value transpose_last2(Builder& b, Value x) {
  std::vector<int64_t> perm(x.rank());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[x.rank() - 1], perm[x.rank() - 2]);
  return transpose(b, x, perm);
}

Value diag_mask(Builder& b, int64_t Bt, int64_t m, int64_t n, hlo::Direction direction, int64_t offset) {
  Type t(DType::S64, {Bt, m, n});
  Value d = sub(b, iota(b, t, 1), iota(b, t, 2));
  return compare(b, d, constant(b, static_cast<double>(offset), DType::S64, {Bt, m, n}), direction);
}

Value eye(Builder& b, DType t, int64_t Bt, int64_t m, int64_t n) {
  return convert(b, diag_mask(b, Bt, m, n, Direction::EQ), t);
}

Value diagonal(Builder& b, Value x) {
  int64_t Bt = x.shape()[0], m = x.shape()[1], n = x.shape()[2], k = std::min(m, n);
  Value sq = slice(b, x, {0, 0, 0}, {Bt, k, k}, {1, 1, 1});
  return reduce(b, select(b, diag_mask(b, Bt, k, k, Direction::EQ), sq, zeros(b, sq.type)), {2}, "add");
}

Value gather_columns(Builder& b, Value x, Value idx) {
  int64_t Bt = x.shape()[0], r = x.shape()[1], c = idx.shape()[1];
  Value coords = concatenate(b, {iota(b, Type(DType::S64, {Bt, c, 1}), 0), reshape(b, idx, {Bt, c, 1})}, 2);
  GatherDims d;  // gathers rows of x^T
  d.offset_dims = {2};
  d.collapsed_slice_dims = {0, 1};
  d.start_index_map = {0, 1};
  d.index_vector_dim = 2;
  Value rows = gather(b, transpose_last2(b, x), coords, d, {1, 1, r}, {Bt, c, r});
  return transpose_last2(b, rows);
}

Value any_nan(Builder& b, Value x) {
  std::vector<int64_t> all(x.rank());
  std::iota(all.begin(), all.end(), 0);
  return reduce(b, compare(b, x, x, Direction::NE), all, "or");
}

double epsilon(DType t) {
  return t == DType::F64 ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
}

Value tournament(Builder& b, Value x, int64_t dim) {
  int64_t h = x.shape()[dim] / 2;
  if (h < 2) return x;
  auto part = [&](int64_t lo, int64_t hi) {
    std::vector<int64_t> start(x.rank(), 0), limit = x.shape(), step(x.rank(), 1);
    start[dim] = lo, limit[dim] = hi;
    return slice(b, x, start, limit, step);
  };
  // top' = [t0, b0, t1 .. t(h-2)], bottom' = [b1 .. b(h-1), t(h-1)]
  std::vector<Value> parts{part(0, 1), part(h, h + 1)};
  if (h > 2) parts.push_back(part(1, h - 1));
  parts.push_back(part(h + 1, 2 * h));
  parts.push_back(part(h - 1, h));
  return concatenate(b, parts, dim);
}

Value sign_or_one(Builder& b, Value x) {
  return select(b, compare(b, x, zeros(b, x.type), Direction::LT), constant(b, -1, x.dtype(), x.shape()),
                constant(b, 1, x.dtype(), x.shape()));
}

// LAPACK's geqr2 order: for k = 0 .. min(m, n) - 1, the reflector H_k = I - tau v v^T maps
// A[k:, k] to beta e_k with beta = -sign(alpha) ||A[k:, k]|| (dlarfg), then is applied to the
// columns right of k. A column already zero below the diagonal gets tau = 0 (H = I). Norms
// are taken of the column scaled by its largest entry, so squares neither overflow nor
// underflow.
Qr householder_qr(Builder& b, Value a) {
  int64_t Bt = a.shape()[0], m = a.shape()[1], n = a.shape()[2], kmax = std::min(m, n);
  DType t = a.dtype();
  Type tk(DType::S64, {}), ttau(t, {Bt, kmax});
  std::vector<Type> state{tk, a.type, ttau};
  std::string cond = b.region(state, [&](Builder& rb, const std::vector<Value>& v) {
    return std::vector<Value>{compare(rb, v[0], s64(rb, kmax), Direction::LT)};
  });
  std::string body = b.region(state, [&](Builder& rb, const std::vector<Value>& v) {
    Value k = v[0], A = v[1], tau = v[2];
    Value zero = s64(rb, 0);
    Value col = reshape(rb, dynamic_slice(rb, A, {zero, zero, k}, {Bt, m, 1}), {Bt, m});
    Value alpha = reshape(rb, dynamic_slice(rb, A, {zero, k, k}, {Bt, 1, 1}), {Bt});
    Value rows = iota(rb, Type(DType::S64, {Bt, m}), 1), kk = broadcast_in_dim(rb, k, {Bt, m}, {});
    Value below = compare(rb, rows, kk, Direction::GT);
    Value x = select(rb, below, col, zeros(rb, col.type));
    Value vzero = zeros(rb, Type(t, {Bt}));
    Value xmax = reduce(rb, unary(rb, Unary::Abs, x), {1}, "max");
    Value scale = max(rb, xmax, unary(rb, Unary::Abs, alpha));
    Value safe = select(rb, compare(rb, scale, vzero, Direction::EQ), constant(rb, 1, t, {Bt}), scale);
    Value xs = div(rb, x, broadcast_in_dim(rb, safe, {Bt, m}, {0}));
    Value xnorm2 = reduce(rb, mul(rb, xs, xs), {1}, "add");  // ||x / scale||^2
    Value as = div(rb, alpha, safe);
    Value norm = mul(rb, unary(rb, Unary::Sqrt, add(rb, mul(rb, as, as), xnorm2)), safe);
    Value beta = select(rb, compare(rb, alpha, vzero, Direction::GE), neg(rb, norm), norm);
    // xnorm == 0 (no NaN): H = I, beta = alpha. A NaN makes every quantity NaN, as LAPACK's.
    Value identity = compare(rb, xmax, vzero, Direction::EQ);
    beta = select(rb, identity, alpha, beta);
    Value tk_ = select(rb, identity, vzero, div(rb, sub(rb, beta, alpha), beta));
    Value denom = select(rb, identity, constant(rb, 1, t, {Bt}), sub(rb, alpha, beta));
    Value vt = div(rb, x, broadcast_in_dim(rb, denom, {Bt, m}, {0}));
    Value vfull = select(rb, compare(rb, rows, kk, Direction::EQ), constant(rb, 1, t, {Bt, m}), vt);
    std::vector<int64_t> full{Bt, m, n};
    Value updated = apply_reflector(rb, vfull, tk_, A);
    Value c3 = iota(rb, Type(DType::S64, full), 2), r3 = iota(rb, Type(DType::S64, full), 1);
    Value kf = broadcast_in_dim(rb, k, full, {});
    Value at_k = compare(rb, c3, kf, Direction::EQ);
    Value colk = select(rb, compare(rb, r3, kf, Direction::EQ), broadcast_in_dim(rb, beta, full, {0}),
                        broadcast_in_dim(rb, vt, full, {0, 1}));
    // H_k touches rows k.. of the trailing columns only (LAPACK's dlarf on A(k:m, k+1:n)): a
    // NaN reflector must not reach the finished rows of R through 0 * NaN.
    Value trailing = binary(rb, Binary::And, compare(rb, c3, kf, Direction::GT), compare(rb, r3, kf, Direction::GE));
    A = select(rb, trailing, updated,
               select(rb, binary(rb, Binary::And, at_k, compare(rb, r3, kf, Direction::GE)), colk, A));
    Value tcols = iota(rb, Type(DType::S64, {Bt, kmax}), 1);
    tau = select(rb, compare(rb, tcols, broadcast_in_dim(rb, k, {Bt, kmax}, {}), Direction::EQ),
                 broadcast_in_dim(rb, tk_, {Bt, kmax}, {0}), tau);
    return std::vector<Value>{add(rb, k, s64(rb, 1)), A, tau};
  });
  std::vector<Value> r = b.emit("stablehlo.while", {s64(b, 0), a, zeros(b, ttau)}, state, "", {cond, body});
  return {r[1], r[2]};
}

Value apply_q(Builder& b, Value v, Value tau, Value c, bool transpose, bool trailing_columns_only) {
  int64_t Bt = v.shape()[0], k = tau.shape()[1];
  if (k == 0) return c;
  // Q c = H_0 (H_1 (... (H_{k-1} c))): the last reflector first (orgqr, ormqr 'N');
  // Q^T c = H_{k-1} (... (H_0 c)): the first reflector first.
  Type tk(DType::S64, {});
  std::vector<Type> state{tk, c.type};
  std::string cond = b.region(state, [&](Builder& rb, const std::vector<Value>& s) {
    return std::vector<Value>{compare(rb, s[0], s64(rb, k), Direction::LT)};
  });
  std::string body = b.region(state, [&](Builder& rb, const std::vector<Value>& s) {
    Value j = transpose ? s[0] : sub(rb, s64(rb, k - 1), s[0]);
    Value tj = reshape(rb, dynamic_slice(rb, tau, {s64(rb, 0), j}, {Bt, 1}), {Bt});
    Value next = apply_reflector(rb, reflector(rb, v, j), tj, s[1]);
    // H_j changes rows j.. only (a NaN reflector must not reach the others through 0 * NaN);
    // orgqr also applies it to columns j.. only: Q[:, i] depends on reflectors 0..i alone, so a
    // NaN in a later column of the input stays out of earlier columns of Q (as LAPACK's).
    const std::vector<int64_t>& shape = s[1].type.shape;
    Value jj = broadcast_in_dim(rb, j, shape, {});
    Value touched = compare(rb, iota(rb, Type(DType::S64, shape), 1), jj, Direction::GE);
    if (trailing_columns_only) {
      touched = binary(rb, Binary::And, touched, compare(rb, iota(rb, Type(DType::S64, shape), 2), jj, Direction::GE));
    }
    next = select(rb, touched, next, s[1]);
    return std::vector<Value>{add(rb, s[0], s64(rb, 1)), next};
  });
  return b.emit("stablehlo.while", {s64(b, 0), c}, state, "", {cond, body})[1];
}

Value householder_product(Builder& b, Value v, Value tau, int64_t ncols) {
  return apply_q(b, v, tau, eye(b, v.dtype(), v.shape()[0], v.shape()[1], ncols), false, true);
}

}  // namespace tpu::lowering::linalg
