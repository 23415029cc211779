// More indexing ops: take, put (+ accumulate), index_fill (Scalar and 0-d Tensor value) and
// index_reduce (prod, mean, amax, amin; include_self).
//
// Out-of-range indices are asserted on the device, as in index.cc (IndexError at the next host
// sync). take/put/index_fill wrap negative indices like PyTorch; index_reduce does not accept
// them (PyTorch's CPU kernel raises for them too).
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

Value any_of(Builder& b, Value pred) {
  std::vector<int64_t> all(pred.rank());
  std::iota(all.begin(), all.end(), 0);
  return reduce(b, pred, all, "or");
}

// Asserts lo <= idx < hi for every entry; returns idx as s64 with negative entries wrapped.
Value checked_index(Builder& b, Value idx, int64_t size, bool allow_negative) {
  if (is_float(idx.dtype()) || idx.dtype() == DType::Pred || is_complex(idx.dtype())) {
    throw std::invalid_argument("expected an int64 or int32 index tensor");
  }
  idx = convert(b, idx, DType::S64);
  if (idx.type.numel() == 0) return idx;
  int64_t lo = allow_negative ? -size : 0;
  Value bad = binary(b, Binary::Or, compare(b, idx, scalar_like(b, static_cast<double>(lo), idx), Direction::LT),
                     compare(b, idx, scalar_like(b, static_cast<double>(size), idx), Direction::GE));
  b.assert_false(any_of(b, bad), "index out of range for a dimension of size " + std::to_string(size));
  if (!allow_negative) return idx;
  return select(b, compare(b, idx, scalar_like(b, 0, idx), Direction::LT), add(b, idx, scalar_like(b, static_cast<double>(size), idx)),
                idx);
}

ScatterDims point_scatter() {
  ScatterDims d;
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  return d;
}

void require_long(Value idx, const char* op) {
  if (idx.dtype() != DType::S64) {
    throw std::runtime_error(std::string(op) + "(): Expected a long tensor for index, but got " + mlir_name(idx.dtype()));
  }
}

// take(self, index): self.flatten()[index].
std::vector<Value> take(Context& c) {
  Builder& b = c.b;
  require_long(c.tensor(1), "take");
  Value x = c.tensor(0);
  const Type& out = c.out();
  int64_t n = x.type.numel(), k = out.numel();
  Value idx = checked_index(b, c.tensor(1), n, true);
  if (k == 0) return {zeros(b, out)};
  if (n == 0) throw std::out_of_range("take(): tried to take from an empty tensor");
  GatherDims d;
  d.collapsed_slice_dims = {0};
  d.start_index_map = {0};
  d.index_vector_dim = 1;
  Value g = gather(b, reshape(b, x, {n}), reshape(b, idx, {k, 1}), d, {1}, {k});
  return {reshape(b, convert(b, g, out.dtype), out.shape)};
}

// put(self, index, source, accumulate=False): self.flatten()[index] = (or +=) source.flatten().
std::vector<Value> put(Context& c) {
  Builder& b = c.b;
  const Type& out = c.out();
  Value x = convert(b, c.tensor(0), out.dtype);
  Value src = c.tensor(2);
  require_long(c.tensor(1), "put_");
  int64_t n = out.numel(), k = c.tensor(1).type.numel();
  if (src.type.numel() != k) {
    throw std::out_of_range("put_(): Expected source and index to have the same number of elements, but got source.numel() = " +
                             std::to_string(src.type.numel()) + ", index.numel() = " + std::to_string(k));
  }
  bool accumulate = c.has(3) && c.bool_arg(3);
  Value idx = checked_index(b, c.tensor(1), n, true);
  if (k == 0) return {x};
  Value flat = reshape(b, x, {n});
  Value r = scatter(b, flat, reshape(b, idx, {k, 1}), reshape(b, convert(b, src, out.dtype), {k}), point_scatter(),
                    accumulate ? "add" : "");
  return {reshape(b, r, out.shape)};
}

// Rows of `x` (shape `shape`) along `dim` that `idx` [k] names, as a bool tensor of `shape`.
Value rows_mask(Builder& b, Value idx, int64_t dim, const std::vector<int64_t>& shape) {
  int64_t k = idx.type.numel();
  int64_t size = shape[dim];
  Value hit = scatter(b, constant(b, 0, DType::Pred, {size}), reshape(b, idx, {k, 1}), constant(b, 1, DType::Pred, {k}),
                      point_scatter(), "");
  return broadcast_in_dim(b, hit, shape, {dim});
}

// index_fill.int_Scalar / .int_Tensor(self, dim, index, value)
std::vector<Value> index_fill(Context& c) {
  Builder& b = c.b;
  const Type& out = c.out();
  Value x = convert(b, c.tensor(0), out.dtype);
  std::vector<int64_t> shape = out.shape.empty() ? std::vector<int64_t>{1} : out.shape;
  int64_t dim = wrap_dim(c.int_arg(1), static_cast<int64_t>(out.shape.size()));
  Value idx = c.tensor(2);
  if (idx.rank() > 1) throw std::out_of_range("index_fill_(): Index is supposed to be a vector");
  Value value = c.tensor(3);
  if (value.rank() != 0) {
    throw std::runtime_error("index_fill_ only supports a 0-dimensional value tensor, but got tensor with " +
                             std::to_string(value.rank()) + " dimension(s).");
  }
  idx = checked_index(b, idx, shape[dim], true);
  if (idx.type.numel() == 0 || out.numel() == 0) return {x};
  Value m = rows_mask(b, idx, dim, shape);
  Value v = broadcast_in_dim(b, convert(b, value, out.dtype), shape, {});
  return {reshape(b, select(b, m, v, reshape(b, x, shape)), out.shape)};
}

// index_reduce(self, dim, index, source, reduce, *, include_self=True)
std::vector<Value> index_reduce(Context& c) {
  Builder& b = c.b;
  const Type& out = c.out();
  DType t = out.dtype;
  std::string reduce_name = c.arg(4).s;
  if (reduce_name != "prod" && reduce_name != "mean" && reduce_name != "amax" && reduce_name != "amin") {
    throw std::runtime_error("index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got " +
                             reduce_name + ".");
  }
  if (t == DType::Pred || is_complex(t)) throw NotLowerable("index_reduce of bool or complex");
  bool include_self = !c.has(5) || c.bool_arg(5);
  std::vector<int64_t> shape = out.shape.empty() ? std::vector<int64_t>{1} : out.shape;
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t dim = wrap_dim(c.int_arg(1), static_cast<int64_t>(out.shape.size()));
  Value self = reshape(b, convert(b, c.tensor(0), t), shape);
  Value idx = c.tensor(2);
  if (idx.rank() > 1) throw std::out_of_range("index_reduce_(): Index is supposed to be a vector");
  int64_t k = idx.type.numel();
  Value src = c.tensor(3);
  std::vector<int64_t> src_shape = shape;
  src_shape[dim] = k;
  if (src.type.numel() != Type(t, src_shape).numel()) {
    throw std::runtime_error("index_reduce_(): Source/destination tensor must have same slice shapes.");
  }
  idx = checked_index(b, idx, shape[dim], false);
  if (k == 0 || out.numel() == 0) return {reshape(b, self, out.shape)};
  src = reshape(b, convert(b, src, t), src_shape);
  idx = reshape(b, idx, {k, 1});
  ScatterDims d;
  for (int64_t i = 0; i < rank; ++i) if (i != dim) d.update_window_dims.push_back(i);
  d.inserted_window_dims = {dim};
  d.scatter_dims_to_operand_dims = {dim};
  d.index_vector_dim = 1;
  auto scatter_into = [&](Value base, Value upd, const std::string& combine) {
    return scatter(b, base, idx, upd, d, combine);
  };
  DType acc = reduce_name == "mean" ? opmath(t) : t;
  std::string combine = reduce_name == "prod" ? "mul" : reduce_name == "mean" ? "add"
                        : reduce_name == "amax" ? "max" : "min";
  Value s = convert(b, src, acc);
  Value base = include_self ? convert(b, self, acc)
                            : broadcast_in_dim(b, reduction_init(b, combine, acc), shape, {});
  Value r = scatter_into(base, s, combine);
  Value counts = scatter_into(constant(b, 0, DType::S64, shape), constant(b, 1, DType::S64, src_shape), "add");
  if (reduce_name == "mean") {
    Value n = counts;
    if (include_self) n = add(b, n, constant(b, 1, DType::S64, shape));
    n = max(b, n, constant(b, 1, DType::S64, shape));
    if (is_float(acc)) {
      r = div(b, r, convert(b, n, acc));
    } else {  // PyTorch divides integers with rounding mode "floor"
      Value nn = convert(b, n, acc);
      Value q = div(b, r, nn);
      Value rem = sub(b, r, mul(b, q, nn));
      Value adjust = binary(b, Binary::And, compare(b, rem, zeros(b, rem.type), Direction::NE),
                            compare(b, r, zeros(b, r.type), Direction::LT));
      r = select(b, adjust, sub(b, q, constant(b, 1, acc, shape)), q);
    }
  }
  if ((reduce_name == "amax" || reduce_name == "amin") && is_float(t)) {
    // NaN wins, as on PyTorch's CPU (stablehlo max/min need not propagate it).
    Value nan_src = compare(b, src, src, Direction::NE);
    Value nan_hit = scatter_into(constant(b, 0, DType::Pred, shape), nan_src, "max");
    if (include_self) nan_hit = binary(b, Binary::Or, nan_hit, compare(b, self, self, Direction::NE));
    r = select(b, nan_hit, constant(b, std::nan(""), t, shape), r);
  }
  r = convert(b, r, t);
  Value touched = compare(b, counts, constant(b, 0, DType::S64, shape), Direction::GT);
  r = select(b, touched, r, self);
  return {reshape(b, r, out.shape)};
}

const Registrar registrar({
    {"take", take},
    {"put", put},
    {"index_fill.int_Scalar", index_fill},
    {"index_fill.int_Tensor", index_fill},
    {"index_reduce", index_reduce},
});

}  // namespace
}  // namespace tpu::lowering
