// Indexing: index_select, gather, scatter*, index.Tensor, index_put, embedding(+backward),
// masked_scatter.
//
// Negative indices wrap where PyTorch's CPU kernels wrap them (index, index_put); index_select,
// gather, scatter, index_add/index_copy and embedding reject them like the CPU. Out-of-range
// indices are asserted on the device (hlo::Builder::assert_false): the engine raises the CPU's
// exception type (IndexError or RuntimeError) at the next host sync, or at the op itself with
// TPU_LAUNCH_BLOCKING=1 - like CUDA's device-side asserts. The values computed
// meanwhile follow XLA: gather clamps the index, scatter drops the update.
//
// Data-dependent shapes are not lowered here: a bool/byte tpu mask in index.Tensor (x[mask])
// goes to the CPU fallback (a CPU mask is turned into coordinates on the host before the rule
// runs, engine/eager/op_adapters.cc); nonzero, masked_select and unique have explicit kernels
// (engine/eager/data_dependent.cc). index_put with one bool mask and a single value (x[mask] = v) has
// a static shape and is lowered as a select.
#include <algorithm>
#include <numeric>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Asserts lo <= idx < hi for every entry (reported on the host at the next sync).
void assert_in_range(Builder& b, Value idx, int64_t lo, int64_t hi, int64_t size,
                     CheckKind kind = CheckKind::IndexError) {
  if (idx.type.numel() == 0) return;
  // One unsigned comparison, (idx - lo) >= (hi - lo): the oldest CPU plugin (PJRT 0.81) folds
  // signed comparisons of constant indices against a negative bound wrongly (x[zeros(1)] in a
  // compiled graph "failed"), and this form needs no negative constant.
  Value offset = bitcast_convert(b, sub(b, idx, scalar_like(b, static_cast<double>(lo), idx)), DType::U64);
  Value bad = compare(b, offset, scalar_like(b, static_cast<double>(hi - lo), offset), Direction::GE);
  std::vector<int64_t> all(idx.rank());
  std::iota(all.begin(), all.end(), 0);
  b.assert_false(reduce(b, bad, all, "or"),
                 "index out of range for a dimension of size " + std::to_string(size), kind);
}

// Index tensor as s64, every entry asserted in [0, size) (no wrapping).
Value checked_index(Builder& b, Value idx, int64_t size, CheckKind kind) {
  idx = convert(b, idx, DType::S64);
  assert_in_range(b, idx, 0, size, size, kind);
  return idx;
}

// Index tensor as s64 with negative entries wrapped by `size` (out-of-range ones asserted).
Value wrap_index(Builder& b, Value idx, int64_t size) {
  idx = convert(b, idx, DType::S64);
  assert_in_range(b, idx, -size, size, size);
  Value zero = constant(b, 0, DType::S64, idx.shape());
  Value n = constant(b, static_cast<double>(size), DType::S64, idx.shape());
  return select(b, compare(b, idx, zero, Direction::LT), add(b, idx, n), idx);
}

// ----- index_select / gather / scatter along one dim -------------------------------------------

std::vector<Value> index_select(Context& c) {
  Value x = c.tensor(0);
  if (x.rank() == 0) {  // the index selects the one element (0 or -1), once per entry
    wrap_dim(c.int_arg(1), 1);
    Value idx = c.tensor(2);
    if (idx.type.numel() > 0) assert_in_range(c.b, convert(c.b, idx, DType::S64), -1, 1, 1);
    return {broadcast_to(c.b, reshape(c.b, x, {}), c.out().shape)};
  }
  int64_t dim = wrap_dim(c.int_arg(1), x.rank());
  Value idx = c.tensor(2);
  if (idx.rank() > 1) throw std::invalid_argument("index_select(): Index is supposed to be a vector");
  if (is_float(idx.dtype()) || idx.dtype() == DType::Pred) {
    throw std::invalid_argument("index_select(): Expected dtype int32 or int64 for index");
  }
  int64_t k = numel(idx.shape());
  if (x.shape()[dim] == 0 && k > 0) {  // nothing to select from: the CPU kernel's errors
    if (x.rank() == 1) throw std::out_of_range("index out of range in self");
    throw InvalidCall("index_select(): self indexing axis dim should be positive");
  }
  if (numel(c.out().shape) == 0) return {zeros(c.b, c.out())};
  // The CPU kernel raises IndexError along dim 0 (or of a vector), RuntimeError along others.
  CheckKind kind = dim == 0 || x.rank() == 1 ? CheckKind::IndexError : CheckKind::RuntimeError;
  idx = reshape(c.b, checked_index(c.b, idx, x.shape()[dim], kind), {k, 1});
  GatherDims d;
  for (int64_t i = 0; i < x.rank(); ++i) if (i != dim) d.offset_dims.push_back(i);
  d.collapsed_slice_dims = {dim};
  d.start_index_map = {dim};
  d.index_vector_dim = 1;
  std::vector<int64_t> sizes = x.shape();
  sizes[dim] = 1;
  std::vector<int64_t> out = x.shape();
  out[dim] = k;
  return {reshape(c.b, gather(c.b, x, idx, d, sizes, out), c.out().shape)};
}

// Full coordinates for gather/scatter along `dim`: shape index.shape + [rank]. Entries outside
// [0, size) raise RuntimeError, as on the CPU.
Value dim_coordinates(Builder& b, Value idx, int64_t dim, int64_t size) {
  std::vector<int64_t> shape = idx.shape();
  std::vector<int64_t> col = shape;
  col.push_back(1);
  std::vector<Value> parts;
  Type it(DType::S64, shape);
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    Value v = d == dim ? checked_index(b, idx, size, CheckKind::RuntimeError) : iota(b, it, d);
    parts.push_back(reshape(b, v, col));
  }
  return concatenate(b, parts, static_cast<int64_t>(shape.size()));
}

void check_gather_shapes(Value x, Value idx, int64_t dim, const char* op) {
  if (is_float(idx.dtype()) || idx.dtype() == DType::Pred) {
    throw std::invalid_argument(std::string(op) + "(): Expected dtype int64 for index");
  }
  if (idx.rank() != x.rank() && !(idx.rank() <= 1 && x.rank() <= 1)) {
    throw std::invalid_argument(std::string(op) +
                                "(): Index tensor must have the same number of dimensions as input tensor");
  }
  for (int64_t d = 0; d < idx.rank(); ++d) {
    if (d != dim && idx.shape()[d] > x.shape()[d]) {
      throw std::invalid_argument(std::string(op) + "(): Size does not match at dimension " +
                                  std::to_string(d));
    }
  }
}

// gather(self, dim, index, *, sparse_grad=False): out[..i_dim..] = self[..index[...]..].
std::vector<Value> gather_dim(Context& c) {
  Value x = c.tensor(0), idx = c.tensor(2);
  int64_t rank = std::max<int64_t>(x.rank(), 1);
  int64_t dim = wrap_dim(c.int_arg(1), rank);
  if (numel(c.out().shape) == 0) return {zeros(c.b, c.out())};
  check_gather_shapes(x, idx, dim, "gather");
  x = reshape(c.b, x, x.rank() == 0 ? std::vector<int64_t>{1} : x.shape());
  idx = reshape(c.b, idx, idx.rank() == 0 ? std::vector<int64_t>{1} : idx.shape());
  Value coords = dim_coordinates(c.b, idx, dim, x.shape()[dim]);
  GatherDims d;
  std::vector<int64_t> all(rank);
  std::iota(all.begin(), all.end(), 0);
  d.collapsed_slice_dims = all;
  d.start_index_map = all;
  d.index_vector_dim = rank;
  std::vector<int64_t> sizes(rank, 1);
  return {reshape(c.b, gather(c.b, x, coords, d, sizes, idx.shape()), c.out().shape)};
}

// scatter family: (self, dim, index, src|value[, reduce]) -> self with updates combined.
Value scatter_dim(Context& c, Value updates, const std::string& kind, Value base) {
  Value x = c.tensor(0), idx = c.tensor(2);
  int64_t rank = std::max<int64_t>(x.rank(), 1);
  int64_t dim = wrap_dim(c.int_arg(1), rank);
  // PyTorch's scatter dtype and shape checks pass an empty index whatever its dtype and shape.
  if (numel(idx.shape()) == 0) return base;
  check_gather_shapes(x, idx, dim, "scatter");
  std::vector<int64_t> xs = x.rank() == 0 ? std::vector<int64_t>{1} : x.shape();
  base = reshape(c.b, base, xs);
  idx = reshape(c.b, idx, idx.rank() == 0 ? std::vector<int64_t>{1} : idx.shape());
  // src may be larger than index: only its leading index.shape() window is used.
  updates = reshape(c.b, updates, updates.rank() == 0 ? std::vector<int64_t>{1} : updates.shape());
  if (updates.shape() != idx.shape()) {
    for (int64_t d = 0; d < rank; ++d) {
      if (updates.shape()[d] < idx.shape()[d]) {
        throw std::invalid_argument("scatter(): Expected index to be smaller than src apart from dimension");
      }
    }
    updates = slice(c.b, updates, std::vector<int64_t>(rank, 0), idx.shape(), std::vector<int64_t>(rank, 1));
  }
  Value coords = dim_coordinates(c.b, idx, dim, xs[dim]);
  ScatterDims d;
  std::vector<int64_t> all(rank);
  std::iota(all.begin(), all.end(), 0);
  d.inserted_window_dims = all;
  d.scatter_dims_to_operand_dims = all;
  d.index_vector_dim = rank;
  return reshape(c.b, scatter(c.b, base, coords, updates, d, kind), c.out().shape);
}

std::string reduce_kind(const std::string& r) {
  if (r == "add" || r == "sum") return "add";
  if (r == "multiply" || r == "prod") return "mul";
  if (r == "amax") return "max";
  if (r == "amin") return "min";
  if (r == "mean") return "mean";
  throw std::invalid_argument("reduce argument must be either add or multiply, got " + r);
}

Rule scatter_rule(bool value_arg, bool reduce_arg, const std::string& fixed_kind = "") {
  return [=](Context& c) {
    DType t = c.out().dtype;
    Value self = convert(c.b, c.tensor(0), t);
    Value idx = c.tensor(2);
    Value updates = value_arg ? cast_to(c.b, c.tensor(3), t, idx.shape()) : convert(c.b, c.tensor(3), t);
    std::string kind = fixed_kind;
    if (reduce_arg) kind = reduce_kind(c.arg(4).s);
    return std::vector<Value>{scatter_dim(c, updates, kind, self)};
  };
}

// scatter_reduce.two(self, dim, index, src, reduce, *, include_self=True)
std::vector<Value> scatter_reduce(Context& c) {
  Builder& b = c.b;
  DType t = c.out().dtype;
  std::string kind = reduce_kind(c.arg(4).s);
  bool include_self = !c.has(5) || c.bool_arg(5);
  Value self = convert(b, c.tensor(0), t), src = convert(b, c.tensor(3), t);
  if (kind == "mean" && !is_float(t)) throw NotLowerable("integer scatter_reduce mean");
  std::string combine = kind == "mean" ? "add" : kind;
  Value base = include_self ? self
                            : broadcast_in_dim(b, reduction_init(b, combine == "add" ? "add" : combine, t),
                                               self.shape(), {});
  Value r = scatter_dim(c, src, combine, base);
  Value counts;
  if (!include_self || kind == "mean") {
    Value ones = constant(b, 1, DType::S64, c.tensor(2).shape());
    counts = scatter_dim(c, ones, "add", constant(b, 0, DType::S64, self.shape()));
  }
  if (kind == "mean") {
    Value n = counts;
    if (include_self) n = add(b, n, constant(b, 1, DType::S64, n.shape()));
    Value denom = convert(b, max(b, n, constant(b, 1, DType::S64, n.shape())), t);
    r = div(b, r, denom);
  }
  if (!include_self) {
    Value touched = compare(b, counts, constant(b, 0, DType::S64, counts.shape()), Direction::GT);
    r = select(b, touched, r, self);
  }
  return {r};
}

// ----- advanced indexing ------------------------------------------------------------------------

struct Advanced {
  std::vector<int64_t> dims;        // indexed dims of self, in order
  std::vector<Value> index;         // broadcast, wrapped s64 indices
  std::vector<int64_t> bshape;      // broadcast index shape
  bool consecutive = true;
  std::vector<int64_t> perm;        // self transposed: indexed dims first
  std::vector<int64_t> rest;        // remaining dims (in order)
};

bool is_mask(DType t) { return t == DType::Pred || t == DType::U8; }

Advanced analyze(Builder& b, Value x, const std::vector<Value>& indices) {
  if (indices.size() > static_cast<size_t>(x.rank())) {
    throw std::out_of_range("too many indices for tensor of dimension " + std::to_string(x.rank()) +
                            " (got " + std::to_string(indices.size()) + ")");
  }
  Advanced a;
  std::vector<Value> raw;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i].valid()) continue;
    if (is_mask(indices[i].dtype())) throw NotLowerable("boolean mask index (data-dependent shape)");
    if (is_float(indices[i].dtype())) {
      throw std::invalid_argument("tensors used as indices must be long, int, byte or bool tensors");
    }
    a.dims.push_back(static_cast<int64_t>(i));
    raw.push_back(indices[i]);
    a.bshape = a.bshape.empty() && a.dims.size() == 1 ? indices[i].shape()
                                                      : broadcast_shapes(a.bshape, indices[i].shape());
  }
  if (a.dims.empty()) throw NotLowerable("index without index tensors");
  // Indices that broadcast to no element select nothing: the CPU checks none of their values.
  bool selects_nothing = numel(a.bshape) == 0;
  for (size_t k = 0; k < raw.size(); ++k) {
    Value v = selects_nothing ? convert(b, raw[k], DType::S64) : wrap_index(b, raw[k], x.shape()[a.dims[k]]);
    a.index.push_back(broadcast_to(b, v, a.bshape));
  }
  for (size_t k = 1; k < a.dims.size(); ++k) a.consecutive &= a.dims[k] == a.dims[k - 1] + 1;
  a.perm = a.dims;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (std::find(a.dims.begin(), a.dims.end(), d) == a.dims.end()) {
      a.perm.push_back(d);
      a.rest.push_back(d);
    }
  }
  return a;
}

// Stacked indices: shape bshape + [m].
Value stacked(Builder& b, const Advanced& a) {
  std::vector<int64_t> col = a.bshape;
  col.push_back(1);
  std::vector<Value> parts;
  for (const Value& v : a.index) parts.push_back(reshape(b, v, col));
  return concatenate(b, parts, static_cast<int64_t>(a.bshape.size()));
}

// Permutation from the gather layout (bshape + rest) to PyTorch's layout: when the indexed
// dims are consecutive the broadcast dims replace them in place, else they come first.
std::vector<int64_t> result_perm(const Advanced& a) {
  int64_t nb = static_cast<int64_t>(a.bshape.size());
  int64_t nr = static_cast<int64_t>(a.rest.size());
  std::vector<int64_t> perm;
  if (!a.consecutive || a.dims[0] == 0) {
    perm.resize(nb + nr);
    std::iota(perm.begin(), perm.end(), 0);
    return perm;
  }
  int64_t before = a.dims[0];  // rest dims that precede the indexed block
  for (int64_t i = 0; i < before; ++i) perm.push_back(nb + i);
  for (int64_t i = 0; i < nb; ++i) perm.push_back(i);
  for (int64_t i = before; i < nr; ++i) perm.push_back(nb + i);
  return perm;
}

std::vector<int64_t> inverse(const std::vector<int64_t>& p) {
  std::vector<int64_t> inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = static_cast<int64_t>(i);
  return inv;
}

std::vector<Value> index_tensor(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  Advanced a = analyze(b, x, c.arg(1).tensors);
  if (numel(c.out().shape) == 0) return {zeros(b, c.out())};
  Value xt = transpose(b, x, a.perm);
  int64_t m = static_cast<int64_t>(a.dims.size());
  int64_t nb = static_cast<int64_t>(a.bshape.size());
  GatherDims d;
  std::vector<int64_t> sizes, shape = a.bshape;
  for (int64_t i = 0; i < m; ++i) {
    d.collapsed_slice_dims.push_back(i);
    d.start_index_map.push_back(i);
    sizes.push_back(1);
  }
  for (size_t i = 0; i < a.rest.size(); ++i) {
    d.offset_dims.push_back(nb + static_cast<int64_t>(i));
    sizes.push_back(x.shape()[a.rest[i]]);
    shape.push_back(x.shape()[a.rest[i]]);
  }
  d.index_vector_dim = nb;
  Value g = gather(b, xt, stacked(b, a), d, sizes, shape);
  return {transpose(b, g, result_perm(a))};
}

// x[mask] = v with one bool mask (other entries None) and a single value: a select.
Value masked_put(Context& c, Value x, const std::vector<Value>& indices, Value values, bool accumulate) {
  Builder& b = c.b;
  int64_t pos = -1, count = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i].valid()) continue;
    ++count;
    if (is_mask(indices[i].dtype())) pos = static_cast<int64_t>(i);
  }
  if (count != 1 || pos < 0 || numel(values.shape()) != 1) {
    throw NotLowerable("index_put with a boolean mask and non-scalar values (data-dependent shape)");
  }
  Value mask = convert(b, indices[pos], DType::Pred);
  if (pos + mask.rank() > x.rank()) throw std::out_of_range("too many indices for tensor");
  for (int64_t d = 0; d < mask.rank(); ++d) {
    if (mask.shape()[d] != x.shape()[pos + d]) {
      throw std::out_of_range("The shape of the mask at index " + std::to_string(d) +
                              " does not match the shape of the indexed tensor");
    }
  }
  std::vector<int64_t> dims(mask.rank());
  std::iota(dims.begin(), dims.end(), pos);
  Value m = broadcast_in_dim(b, mask, x.shape(), dims);
  Value v = broadcast_in_dim(b, reshape(b, convert(b, values, x.dtype()), {}), x.shape(), {});
  if (accumulate) return select(b, m, add(b, x, v), x);
  return select(b, m, v, x);
}

// index_put(self, indices, values, accumulate=False) (+ _index_put_impl: ..., unsafe).
std::vector<Value> index_put(Context& c) {
  Builder& b = c.b;
  DType t = c.out().dtype;
  Value x = convert(b, c.tensor(0), t);
  const auto& indices = c.arg(1).tensors;
  Value values = convert(b, c.tensor(2), t);
  bool accumulate = c.has(3) && c.bool_arg(3);
  for (const Value& v : indices) {
    if (v.valid() && is_mask(v.dtype())) return {masked_put(c, x, indices, values, accumulate)};
  }
  Advanced a = analyze(b, x, indices);
  int64_t m = static_cast<int64_t>(a.dims.size());
  int64_t nb = static_cast<int64_t>(a.bshape.size());
  // Values broadcast to the shape self[indices] has, then moved to the scatter layout.
  std::vector<int64_t> gshape = a.bshape;
  for (int64_t d : a.rest) gshape.push_back(x.shape()[d]);
  std::vector<int64_t> rperm = result_perm(a);
  std::vector<int64_t> rshape;
  for (int64_t p : rperm) rshape.push_back(gshape[p]);
  if (!broadcastable(values.shape(), rshape)) {
    throw InvalidCall("shape mismatch: value tensor of shape " + shape_str(values.shape()) +
                      " cannot be broadcast to indexing result of shape " + shape_str(rshape));
  }
  if (numel(rshape) == 0) return {x};
  Value upd = broadcast_to(b, values, rshape);
  upd = transpose(b, upd, inverse(rperm));
  Value xt = transpose(b, x, a.perm);
  ScatterDims d;
  for (int64_t i = 0; i < m; ++i) {
    d.inserted_window_dims.push_back(i);
    d.scatter_dims_to_operand_dims.push_back(i);
  }
  for (size_t i = 0; i < a.rest.size(); ++i) d.update_window_dims.push_back(nb + static_cast<int64_t>(i));
  d.index_vector_dim = nb;
  Value r = scatter(b, xt, stacked(b, a), upd, d, accumulate ? "add" : "");
  return {transpose(b, r, inverse(a.perm))};
}

// ----- embedding ----------------------------------------------------------------------------------

// embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False)
std::vector<Value> embedding(Context& c) {
  Builder& b = c.b;
  Value w = c.tensor(0), idx = convert(b, c.tensor(1), DType::S64);
  if (w.rank() != 2) throw std::invalid_argument("'weight' must be 2-D");
  assert_in_range(b, idx, 0, w.shape()[0], w.shape()[0]);
  if (numel(c.out().shape) == 0) return {zeros(b, c.out())};
  int64_t r = idx.rank();
  std::vector<int64_t> col = idx.shape();
  col.push_back(1);
  GatherDims d;
  d.offset_dims = {r};
  d.collapsed_slice_dims = {0};
  d.start_index_map = {0};
  d.index_vector_dim = r;
  std::vector<int64_t> shape = idx.shape();
  shape.push_back(w.shape()[1]);
  return {gather(b, w, reshape(b, idx, col), d, {1, w.shape()[1]}, shape)};
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
std::vector<Value> embedding_dense_backward(Context& c) {
  Builder& b = c.b;
  const Type& out = c.out();
  DType t = out.dtype;
  DType acc = opmath(t);
  Value idx = convert(b, c.tensor(1), DType::S64);
  int64_t n = numel(idx.shape());
  int64_t dim = out.shape[1];
  int64_t num_weights = c.int_arg(2), padding_idx = c.int_arg(3);
  bool scale = c.bool_arg(4);
  // Nothing to scatter into (num_weights == 0: a gather from the empty counts is invalid HLO).
  if (n == 0 || out.numel() == 0) return {zeros(b, out)};
  Value g = reshape(b, convert(b, c.tensor(0), acc), {n, dim});
  Value flat = reshape(b, idx, {n});
  Value keep = compare(b, flat, constant(b, static_cast<double>(padding_idx), DType::S64, {n}), Direction::NE);
  g = select(b, broadcast_in_dim(b, keep, {n, dim}, {0}), g, zeros(b, g.type));
  Value coords = reshape(b, flat, {n, 1});
  if (scale) {
    ScatterDims cd;
    cd.inserted_window_dims = {0};
    cd.scatter_dims_to_operand_dims = {0};
    cd.index_vector_dim = 1;
    Value counts = scatter(b, constant(b, 0, acc, {num_weights}), coords, constant(b, 1, acc, {n}), cd, "add");
    GatherDims gd;
    gd.collapsed_slice_dims = {0};
    gd.start_index_map = {0};
    gd.index_vector_dim = 1;
    Value per = gather(b, counts, coords, gd, {1}, {n});
    g = div(b, g, broadcast_in_dim(b, per, {n, dim}, {0}));
  }
  ScatterDims d;
  d.update_window_dims = {1};
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  Value r = scatter(b, constant(b, 0, acc, {num_weights, dim}), coords, g, d, "add");
  return {convert(b, r, t)};
}

// ----- masked_scatter -----------------------------------------------------------------------------

// masked_scatter(self, mask, source): the k-th true position (row-major) takes source.flat[k].
std::vector<Value> masked_scatter(Context& c) {
  Builder& b = c.b;
  const Type& out = c.out();
  Value x = cast_to(b, c.tensor(0), out.dtype, out.shape);
  Value mask = cast_to(b, c.tensor(1), DType::Pred, out.shape);
  Value src = convert(b, c.tensor(2), out.dtype);
  int64_t n = numel(out.shape), ns = numel(src.shape());
  if (n == 0) return {x};
  Value m = convert(b, reshape(b, mask, {n}), DType::S64);
  // More set mask bits than source elements: the CPU raises RuntimeError.
  Value count = reduce(b, m, {0}, "add");
  b.assert_false(compare(b, count, constant(b, static_cast<double>(ns), DType::S64, {}), Direction::GT),
                 "Number of elements of source < number of ones in mask", CheckKind::RuntimeError);
  if (ns == 0) return {x};
  // Inclusive prefix sum via a reduce_window, minus one: the source position of each element.
  Value csum = reduce_window(b, m, "add", {n}, {1}, {{n - 1, 0}});
  Value pos = sub(b, csum, constant(b, 1, DType::S64, {n}));
  pos = clamp(b, constant(b, 0, DType::S64, {n}), pos, constant(b, static_cast<double>(ns - 1), DType::S64, {n}));
  GatherDims d;
  d.collapsed_slice_dims = {0};
  d.start_index_map = {0};
  d.index_vector_dim = 1;
  Value taken = gather(b, reshape(b, src, {ns}), reshape(b, pos, {n, 1}), d, {1}, {n});
  return {select(b, mask, reshape(b, taken, out.shape), x)};
}

// index_copy(self, dim, index, source) and index_add(self, dim, index, source, alpha): rows
// index[i] of self along dim are replaced by (or accumulate) rows i of source. Indices must be in
// [0, size) as on the CPU (asserted on the device).
Rule index_along_dim(const std::string& combine) {
  return [combine](Context& c) {
    Builder& b = c.b;
    const Type& out = c.out();
    Value x = convert(b, c.tensor(0), out.dtype);
    bool scalar = out.shape.empty();
    if (scalar) x = reshape(b, x, {1});
    int64_t rank = static_cast<int64_t>(x.shape().size());
    int64_t dim = wrap_dim(c.int_arg(1), rank);
    Value idx = convert(b, c.tensor(2), DType::S64);
    int64_t n = idx.type.numel();
    std::vector<int64_t> src_shape = x.shape();
    src_shape[dim] = n;
    Value src = reshape(b, convert(b, c.tensor(3), out.dtype), src_shape);
    if (combine == "add" && c.has(4)) src = mul(b, src, cast_to(b, c.tensor(4), out.dtype, src_shape));
    idx = reshape(b, idx, {n});
    // The CPU raises RuntimeError for index_add, IndexError for index_copy.
    assert_in_range(b, idx, 0, x.shape()[dim], x.shape()[dim],
                    combine == "add" ? CheckKind::RuntimeError : CheckKind::IndexError);
    // The source keeps its layout: its dim `dim` is the scatter dim, the others are the window
    // (no transposes of a KV cache around the write).
    ScatterDims d;
    for (int64_t i = 0; i < rank; ++i) if (i != dim) d.update_window_dims.push_back(i);
    d.inserted_window_dims = {dim};
    d.scatter_dims_to_operand_dims = {dim};
    d.index_vector_dim = 1;
    Value r = scatter(b, x, reshape(b, idx, {n, 1}), src, d, combine);
    return std::vector<Value>{reshape(b, r, out.shape)};
  };
}

// slice_scatter(self, src, dim, start?, end?, step) / select_scatter(self, src, dim, index):
// self with that slice (or row) replaced by src - the backward of slicing, and what
// functionalization makes of writes through a slice.
std::vector<Value> slice_scatter(Context& c, bool select) {
  Builder& b = c.b;
  const Type& out = c.out();
  Value x = convert(b, c.tensor(0), out.dtype);
  int64_t rank = static_cast<int64_t>(out.shape.size());
  if (rank == 0) {  // the CPU: "slice() cannot be applied to a 0-dim tensor" (IndexError)
    throw std::out_of_range(std::string(select ? "select" : "slice") + "_scatter() cannot be applied to a 0-dim tensor");
  }
  int64_t dim = wrap_dim(c.int_arg(2), rank);
  int64_t size = out.shape[dim];
  auto clamp_index = [&](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  int64_t start = select ? (c.int_arg(3) < 0 ? c.int_arg(3) + size : c.int_arg(3)) : (c.has(3) ? clamp_index(c.int_arg(3)) : 0);
  int64_t step = select ? 1 : (c.has(5) ? c.int_arg(5) : 1);
  std::vector<int64_t> src_shape = out.shape;
  int64_t count = select ? 1 : c.tensor(1).shape().at(dim);
  src_shape[dim] = count;
  Value src = reshape(b, convert(b, c.tensor(1), out.dtype), src_shape);
  if (count == 0) return {x};
  if (step == 1) {
    std::vector<Value> starts;
    for (int64_t d = 0; d < rank; ++d) starts.push_back(constant(b, d == dim ? static_cast<double>(start) : 0, DType::S64));
    return {dynamic_update_slice(b, x, src, starts)};
  }
  Value idx = add(b, constant(b, static_cast<double>(start), DType::S64, {count}),
                  mul(b, iota(b, Type(DType::S64, {count}), 0), constant(b, static_cast<double>(step), DType::S64, {count})));
  ScatterDims d;
  for (int64_t i = 0; i < rank; ++i) if (i != dim) d.update_window_dims.push_back(i);
  d.inserted_window_dims = {dim};
  d.scatter_dims_to_operand_dims = {dim};
  d.index_vector_dim = 1;
  return {scatter(b, x, reshape(b, idx, {count, 1}), src, d, "")};
}

const Registrar registrar({
    {"slice_scatter", [](Context& c) { return slice_scatter(c, false); }},
    {"select_scatter", [](Context& c) { return slice_scatter(c, true); }},
    {"index_copy", index_along_dim("")},
    {"index_add", index_along_dim("add")},
    {"index_select", index_select},
    {"gather", gather_dim},
    {"scatter.src", scatter_rule(false, false)},
    {"scatter.value", scatter_rule(true, false)},
    {"scatter.reduce", scatter_rule(false, true)},
    {"scatter.value_reduce", scatter_rule(true, true)},
    {"scatter_add", scatter_rule(false, false, "add")},
    {"scatter_reduce.two", scatter_reduce},
    {"index.Tensor", index_tensor},
    {"index_put", index_put},
    {"_index_put_impl", index_put},
    {"embedding", embedding},
    {"embedding_dense_backward", embedding_dense_backward},
    {"masked_scatter", masked_scatter},
});

// Gathers of padded indices from exact rows (an index past the length must raise, not read a
// spare row; torch.gather of BERT's token types at its position ids), and index_copy of padded
// rows into an exact destination. The embedding's gradient scatters padded rows at padded indices
// into an exact table: the padder drops the updates past the length (the reshape to [B * L] rows
// keeps each batch's true rows), whatever the spare rows and indices hold; exact rows with padded
// indices take the exact path (they would not compile).
const PaddedOperandsRegistrar padded_operands({
    {"embedding", PaddedOperands::IndicesOnly},
    {"embedding_dense_backward", PaddedOperands::RowsWithIndices},
    {"gather", PaddedOperands::IndicesOnly},
    {"index_select", PaddedOperands::IndicesOnly},
    {"index_copy", PaddedOperands::Scatter},
});

}  // namespace
}  // namespace tpu::lowering
