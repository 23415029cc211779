// Pairwise distances: _cdist_forward/_backward (torch.cdist) and _pdist_forward/_backward
// (torch.pdist), with the CPU kernels' per-p formulas:
//   p = 0: count of nonzero differences   p = 1: sum |d|   p = 2: sqrt(sum d^2)
//   p = inf: max |d|                       other p: (sum |d|^p)^(1/p)
// cdist with p = 2 uses the CPU's matrix-product form (|a|^2 - 2ab + |b|^2, clamped at 0) where
// the CPU does: compute_mode 1, or compute_mode 0 (None) with more than 25 rows on either side.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

std::vector<int64_t> iota_dims(int64_t n, int64_t from = 0) {
  std::vector<int64_t> d;
  for (int64_t i = from; i < n; ++i) d.push_back(i);
  return d;
}

// |a - b| per element, reduced over the last dim with the p-norm. `nan_ignoring_max`: the CPU's
// scalar cdist loop keeps the running max when |d| is NaN (std::max(agg, NaN) is agg); pdist's
// vectorised max propagates NaN.
Value p_norm(Builder& b, Value diff, double p, bool nan_ignoring_max) {
  Value a = unary(b, Unary::Abs, diff);
  int64_t last = a.rank() - 1;
  if (p == 0) {
    Value one = scalar_like(b, 1, a);
    return reduce(b, nan_propagating(b, Binary::Minimum, unary(b, Unary::Ceil, a), one), {last}, "add");
  }
  if (p == 1) return reduce(b, a, {last}, "add");
  if (p == 2) return unary(b, Unary::Sqrt, reduce(b, mul(b, a, a), {last}, "add"));
  if (std::isinf(p)) {
    Value is_nan = compare(b, a, a, Direction::NE);
    // |d| >= 0, so max's -inf start and the CPU's 0 agree.
    Value m = reduce(b, select(b, is_nan, zeros(b, a.type), a), {last}, "max");
    if (nan_ignoring_max) return m;
    Value any_nan = reduce(b, is_nan, {last}, "or");
    return select(b, any_nan, constant(b, std::numeric_limits<double>::quiet_NaN(), m.dtype(), m.shape()), m);
  }
  Value s = reduce(b, binary(b, Binary::Power, a, scalar_like(b, p, a)), {last}, "add");
  return binary(b, Binary::Power, s, constant(b, 1.0 / p, s.dtype(), s.shape()));
}

// d(dist)/d(a) for a - b = diff, times grad (grad and dist broadcast like diff).
Value p_norm_grad(Builder& b, Value diff, Value grad, Value dist, double p) {
  Value zero = zeros(b, diff.type);
  if (p == 0) return zero;
  Value sign = unary(b, Unary::Sign, diff);
  if (p == 1) return mul(b, grad, sign);
  Value dist_zero = compare(b, dist, zero, Direction::EQ);
  Value a = unary(b, Unary::Abs, diff);
  if (std::isinf(p)) {
    // The CPU's 1 - min(1, ceil(||d| - dist|)): 1 exactly where |d| is the max.
    Value hit = sub(b, scalar_like(b, 1, a),
                    nan_propagating(b, Binary::Minimum, scalar_like(b, 1, a),
                                    unary(b, Unary::Ceil, unary(b, Unary::Abs, sub(b, a, dist)))));
    return mul(b, mul(b, grad, sign), hit);
  }
  Value r;
  if (p == 2) {
    r = div(b, mul(b, grad, diff), dist);
  } else if (p < 2) {
    Value pm1 = scalar_like(b, p - 1, a);
    r = div(b, mul(b, mul(b, sign, binary(b, Binary::Power, a, pm1)), grad), binary(b, Binary::Power, dist, pm1));
    if (p < 1) r = select(b, compare(b, diff, zero, Direction::EQ), zero, r);
  } else {
    r = div(b, mul(b, mul(b, diff, binary(b, Binary::Power, a, scalar_like(b, p - 2, a))), grad),
            binary(b, Binary::Power, dist, scalar_like(b, p - 1, a)));
  }
  return select(b, dist_zero, zero, r);
}

// Batch dims of x1 (..., r1, c) and x2 (..., r2, c) broadcast together.
std::vector<int64_t> batch_shape(Value x1, Value x2) {
  std::vector<int64_t> b1(x1.shape().begin(), x1.shape().end() - 2), b2(x2.shape().begin(), x2.shape().end() - 2);
  return broadcast_shapes(b1, b2);
}

Value expand_rows(Builder& b, Value x, const std::vector<int64_t>& batch) {
  std::vector<int64_t> s = batch;
  s.push_back(x.shape()[x.rank() - 2]);
  s.push_back(x.shape()[x.rank() - 1]);
  return broadcast_to(b, x, s);
}

// x1 (B.., r1, c), x2 (B.., r2, c) -> x1[i] - x2[j] as (B.., r1, r2, c).
Value pair_diff(Builder& b, Value x1, Value x2) {
  int64_t k = x1.rank() - 2;
  std::vector<int64_t> s(x1.shape().begin(), x1.shape().end() - 1);
  s.push_back(x2.shape()[k]);
  s.push_back(x1.shape()[k + 1]);
  std::vector<int64_t> d1 = iota_dims(k), d2 = iota_dims(k);
  d1.push_back(k);
  d1.push_back(k + 2);
  d2.push_back(k + 1);
  d2.push_back(k + 2);
  return sub(b, broadcast_in_dim(b, x1, s, d1), broadcast_in_dim(b, x2, s, d2));
}

// sqrt(max(0, |a|^2 - 2 a.b + |b|^2)) as one augmented matrix product, the CPU's _euclidean_dist.
Value euclidean_by_matmul(Builder& b, Value x1, Value x2) {
  int64_t k = x1.rank() - 2;
  auto norm_col = [&](Value x) {
    Value n = reduce(b, mul(b, x, x), {k + 1}, "add");
    std::vector<int64_t> s = x.shape();
    s.back() = 1;
    return reshape(b, n, s);
  };
  Value n1 = norm_col(x1), n2 = norm_col(x2);
  Value ones1 = scalar_like(b, 1, n1), ones2 = scalar_like(b, 1, n2);
  Value a = concatenate(b, {mul(b, x1, scalar_like(b, -2, x1)), n1, ones1}, k + 1);
  Value c = concatenate(b, {x2, ones2, n2}, k + 1);
  std::vector<int64_t> batch = iota_dims(k);
  Value r = dot_general(b, a, c, batch, batch, {k + 1}, {k + 1}, x1.dtype());
  return unary(b, Unary::Sqrt, max(b, r, zeros(b, r.type)));
}

// Refuses grad or a saved result not shaped as `want`: the CPU kernels read them with that layout
// unchecked (out of bounds when smaller); autograd always passes that shape.
void require_shape(const std::string& op, const std::string& name, const Value& v, const std::vector<int64_t>& want,
                   const std::string& why) {
  if (v.shape() != want) {
    throw InvalidCall(op + ": " + name + " has shape " + shape_str(v.shape()) + ", expected " + shape_str(want) + " (" +
                      why + ")");
  }
}

void check_cdist(Value x1, Value x2, double p) {
  if (x1.rank() < 2) throw InvalidCall("cdist only supports at least 2D tensors, X1 got: " + std::to_string(x1.rank()) + "D");
  if (x2.rank() < 2) throw InvalidCall("cdist only supports at least 2D tensors, X2 got: " + std::to_string(x2.rank()) + "D");
  if (x1.shape().back() != x2.shape().back()) {
    throw InvalidCall("X1 and X2 must have the same number of columns. X1: " + std::to_string(x1.shape().back()) +
                      " X2: " + std::to_string(x2.shape().back()));
  }
  if (!is_float(x1.dtype())) throw InvalidCall(std::string("cdist only supports floating-point dtypes, X1 got: ") + torch_name(x1.dtype()));
  if (!is_float(x2.dtype())) throw InvalidCall(std::string("cdist only supports floating-point dtypes, X2 got: ") + torch_name(x2.dtype()));
  if (!(p >= 0)) throw InvalidCall("cdist only supports non-negative p values");
  if (x1.dtype() != x2.dtype()) throw NotLowerable("cdist of two dtypes");
}

// _cdist_forward(x1, x2, p, compute_mode?)
std::vector<Value> cdist_forward(Context& c) {
  Builder& b = c.b;
  Value x1 = c.tensor(0), x2 = c.tensor(1);
  double p = c.double_arg(2);
  check_cdist(x1, x2, p);
  int64_t mode = c.has(3) ? c.int_arg(3) : 0;
  if (mode < 0 || mode > 2) throw InvalidCall("possible modes: 0, 1, 2, but was: " + std::to_string(mode));
  const Type& out = c.out();
  if (out.numel() == 0 || x1.shape().back() == 0) return {zeros(b, out)};
  std::vector<int64_t> batch = batch_shape(x1, x2);
  int64_t r1 = x1.shape()[x1.rank() - 2], r2 = x2.shape()[x2.rank() - 2];
  x1 = expand_rows(b, x1, batch);
  x2 = expand_rows(b, x2, batch);
  if (p == 2 && (mode == 1 || (mode == 0 && (r1 > 25 || r2 > 25)))) {
    DType t = opmath(x1.dtype());
    return {convert(b, euclidean_by_matmul(b, convert(b, x1, t), convert(b, x2, t)), out.dtype)};
  }
  require_dtype(x1.dtype() == DType::F32 || x1.dtype() == DType::F64, "cdist", x1.dtype());
  return {p_norm(b, pair_diff(b, x1, x2), p, /*nan_ignoring_max=*/true)};
}

// _cdist_backward(grad, x1, x2, p, cdist) -> grad of x1, shaped like x1 broadcast to the batch.
std::vector<Value> cdist_backward(Context& c) {
  Builder& b = c.b;
  Value grad = c.tensor(0), x1 = c.tensor(1), x2 = c.tensor(2), dist = c.tensor(4);
  double p = c.double_arg(3);
  const Type& out = c.out();
  if (out.numel() == 0 || x2.type.numel() == 0) return {zeros(b, out)};
  require_dtype(x1.dtype() == DType::F32 || x1.dtype() == DType::F64, "cdist_backward", x1.dtype());
  std::vector<int64_t> batch = batch_shape(x1, x2);
  std::vector<int64_t> want = batch;  // grad and cdist are (batch, r1, r2)
  want.insert(want.end(), {x1.shape()[x1.rank() - 2], x2.shape()[x2.rank() - 2]});
  std::string why = "the cdist of x1 " + shape_str(x1.shape()) + " and x2 " + shape_str(x2.shape());
  require_shape("_cdist_backward", "grad", grad, want, why);
  require_shape("_cdist_backward", "cdist", dist, want, why);
  x1 = expand_rows(b, x1, batch);
  x2 = expand_rows(b, x2, batch);
  Value diff = pair_diff(b, x1, x2);
  int64_t k = diff.rank() - 1;
  std::vector<int64_t> gd = iota_dims(k);
  Value g = broadcast_in_dim(b, convert(b, grad, diff.dtype()), diff.shape(), gd);
  Value d = broadcast_in_dim(b, convert(b, dist, diff.dtype()), diff.shape(), gd);
  Value terms = p_norm_grad(b, diff, g, d, p);
  return {convert(b, reduce(b, terms, {k - 1}, "add"), out.dtype)};
}

// Position k of pair (i, j), i < j, in pdist's output (row-major upper triangle), as an (n, n)
// S64 matrix; `outside` where i >= j.
Value pair_position(Builder& b, int64_t n, int64_t outside) {
  Type t(DType::S64, {n, n});
  Value i = iota(b, t, 0), j = iota(b, t, 1);
  auto k = [&](double v) { return constant(b, v, DType::S64, {n, n}); };
  // k = i*n - i*(i+1)/2 + j - i - 1
  Value pos = add(b, sub(b, mul(b, i, k(static_cast<double>(n))), div(b, mul(b, i, add(b, i, k(1))), k(2))),
                  sub(b, sub(b, j, i), k(1)));
  return select(b, compare(b, i, j, Direction::LT), pos, k(static_cast<double>(outside)));
}

// torch.pdist checks rank, dtype and p before it calls _pdist_forward; the op itself only has the
// CPU kernel's dtype dispatch (and reads any other rank as 2-D, which we refuse).
void check_pdist_rank(Value x) {
  if (x.rank() != 2) throw InvalidCall("pdist only supports 2D tensors, got: " + std::to_string(x.rank()) + "D");
}

// The CPU kernels dispatch on dtype only when there are pairs to compute: fewer than two rows or
// no columns give the zero result for any dtype, complex included.
void check_pdist_dtype(Value x, const char* op) {
  require_dtype(x.dtype() == DType::F32 || x.dtype() == DType::F64, op, x.dtype());
}

// _pdist_forward(self, p): the upper triangle of self's cdist, row by row.
std::vector<Value> pdist_forward(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  double p = c.double_arg(1);
  check_pdist_rank(x);
  const Type& out = c.out();
  int64_t n = x.shape()[0], count = out.numel();
  if (count == 0 || x.shape()[1] == 0) return {zeros(b, out)};
  check_pdist_dtype(x, "pdist");
  Value all = p_norm(b, pair_diff(b, x, x), p, /*nan_ignoring_max=*/false);
  // Scatter each (i < j) entry to its position; the others go out of range and are dropped.
  Value pos = reshape(b, pair_position(b, n, count), {n * n, 1});
  ScatterDims dims;
  dims.inserted_window_dims = {0};
  dims.scatter_dims_to_operand_dims = {0};
  dims.index_vector_dim = 1;
  return {scatter(b, zeros(b, out), pos, reshape(b, all, {n * n}), dims, "")};
}

// _pdist_backward(grad, self, p, pdist): each pair adds its term to row i and subtracts it from
// row j.
std::vector<Value> pdist_backward(Context& c) {
  Builder& b = c.b;
  Value grad = c.tensor(0), x = c.tensor(1), dist = c.tensor(3);
  double p = c.double_arg(2);
  check_pdist_rank(x);
  const Type& out = c.out();
  int64_t n = x.shape()[0], m = x.shape()[1];
  std::vector<int64_t> pairs{n * (n - 1) / 2};  // grad and pdist: one value per pair of rows
  std::string why = "one value per pair of the " + std::to_string(n) + " rows";
  require_shape("_pdist_backward", "grad", grad, pairs, why);
  require_shape("_pdist_backward", "pdist", dist, pairs, why);
  if (n <= 1 || m == 0) return {zeros(b, out)};
  check_pdist_dtype(x, "pdist_backward");
  Value pos = pair_position(b, n, 0);
  Value upper = compare(b, iota(b, Type(DType::S64, {n, n}), 0), iota(b, Type(DType::S64, {n, n}), 1), Direction::LT);
  GatherDims gd;
  gd.collapsed_slice_dims = {0};
  gd.start_index_map = {0};
  gd.index_vector_dim = 2;
  Value pos3 = reshape(b, pos, {n, n, 1});
  Value g = gather(b, convert(b, grad, x.dtype()), pos3, gd, {1}, {n, n});
  Value d = gather(b, convert(b, dist, x.dtype()), pos3, gd, {1}, {n, n});
  Value diff = pair_diff(b, x, x);
  Value terms = p_norm_grad(b, diff, broadcast_in_dim(b, g, diff.shape(), {0, 1}),
                            broadcast_in_dim(b, d, diff.shape(), {0, 1}), p);
  terms = select(b, broadcast_in_dim(b, upper, diff.shape(), {0, 1}), terms, zeros(b, terms.type));
  Value r = sub(b, reduce(b, terms, {1}, "add"), reduce(b, terms, {0}, "add"));
  return {convert(b, r, out.dtype)};
}

const Registrar registrar({
    {"_cdist_forward", cdist_forward},
    {"_cdist_backward", cdist_backward},
    {"_pdist_forward", pdist_forward},
    {"_pdist_backward", pdist_backward},
});

}  // namespace
}  // namespace tpu::lowering
