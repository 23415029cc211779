// nn building blocks PyTorch implements as single kernels: _addmm_activation (Linear + ReLU /
// GELU fused), _weight_norm_interface (nn.utils.weight_norm) and its backward, and
// embedding_renorm_ (nn.Embedding(max_norm=...)).
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowering/complex_math.h"
#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// Applies the rule of `op` to `args` with this call's result types.
std::vector<Value> apply_rule(Context& c, const char* op, std::vector<Arg> args) {
  Context sub{c.b, std::move(args), c.out_types, c.compute_dtype, c.rng_key};
  return (*find_rule(op))(sub);
}

Arg tensor_arg(Value v) {
  Arg a;
  a.kind = Arg::Kind::Tensor;
  a.tensor = v;
  return a;
}

// _addmm_activation(self, mat1, mat2, *, beta=1, alpha=1, use_gelu=False): the addmm result,
// rounded to its dtype, then relu or gelu. The CPU kernel applies the exact (erf) gelu; CUDA's
// cuBLASLt epilogue uses the tanh approximation. We match the CPU.
std::vector<Value> addmm_activation(Context& c) {
  Value y = apply_rule(c, "addmm", {c.arg(0), c.arg(1), c.arg(2), c.arg(3), c.arg(4)}).at(0);
  if (!c.bool_arg(5)) return apply_rule(c, "relu", {tensor_arg(y)});
  Arg approximate;
  approximate.kind = Arg::Kind::String;
  approximate.s = "none";
  return apply_rule(c, "gelu", {tensor_arg(y), approximate});
}

// The dims weight norm reduces over: every dim but `dim` (0 or the last, as the CPU kernel
// accepts).
std::vector<int64_t> norm_dims(const Value& v, int64_t dim) {
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < v.rank(); ++i) if (i != dim) dims.push_back(i);
  return dims;
}

// The dim weight norm keeps, checked with g's size (the CPU kernel reads v.size(dim) values of
// g without checking, out of bounds for a smaller g).
int64_t weight_norm_dim(const Value& v, const Value& g, int64_t dim) {
  if (v.rank() == 0) {
    throw std::out_of_range("Dimension specified as " + std::to_string(dim) + " but tensor has no dimensions");
  }
  int64_t d = dim < 0 ? dim + v.rank() : dim;
  if (d != 0 && d != v.rank() - 1) {
    throw InvalidCall("fused kernels can only be applied for first or last dim");
  }
  if (g.type.numel() != v.shape()[d]) {
    throw InvalidCall("weight norm: g has " + std::to_string(g.type.numel()) + " elements, expected v.size(" +
                      std::to_string(d) + ") = " + std::to_string(v.shape()[d]));
  }
  return d;
}

// sum over `dims` of x, kept with size 1 there (x's rank).
Value sum_keep(Builder& b, Value x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> shape = x.shape(), kept;
  for (int64_t d : dims) shape[d] = 1;
  for (int64_t i = 0; i < x.rank(); ++i) {
    bool reduced = false;
    for (int64_t d : dims) reduced |= d == i;
    if (!reduced) kept.push_back(i);
  }
  Value s = reduce(b, x, dims, "add");
  return broadcast_in_dim(b, s, shape, kept);
}

std::vector<int64_t> all_dims(int64_t rank) {
  std::vector<int64_t> d;
  for (int64_t i = 0; i < rank; ++i) d.push_back(i);
  return d;
}

// x (size 1 along the reduced dims) broadcast to `shape`.
Value expand_to(Builder& b, Value x, const std::vector<int64_t>& shape) {
  return broadcast_in_dim(b, x, shape, all_dims(x.rank()));
}

// _weight_norm_interface(v, g, dim=0) -> (v * g / ||v||, ||v||): norms over all dims but `dim`,
// in float32 for low-precision v (the norms result is float32 then, as PyTorch's kernel gives).
std::vector<Value> weight_norm(Context& c) {
  Builder& b = c.b;
  Value v = c.tensor(0), g = c.tensor(1);
  int64_t dim = weight_norm_dim(v, g, c.int_arg(2));
  // PyTorch's meta kernel gives a 1-D v norms of shape (1,), its CPU kernel (n,): the CPU runs
  // it, except an empty one (its kernel divides by v.size(0) = 0: SIGFPE).
  if (v.rank() == 1 && v.type.numel() == 0) return {zeros(b, c.out(0)), zeros(b, c.out(1))};
  if (v.rank() == 1) throw NotLowerable("_weight_norm_interface of a 1-D v");
  DType acc = opmath(v.dtype());
  Value vf = convert(b, v, acc);
  Value norms = unary(b, Unary::Sqrt, sum_keep(b, mul(b, vf, vf), norm_dims(v, dim)));
  Value gf = reshape(b, convert(b, g, acc), norms.shape());
  Value w = mul(b, vf, expand_to(b, div(b, gf, norms), v.shape()));
  return {convert(b, w, c.out(0).dtype), convert(b, reshape(b, norms, c.out(1).shape), c.out(1).dtype)};
}

// _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim) -> (grad_v, grad_g):
// grad_g = sum(grad_w * v) / norm, grad_v = g / norm * (grad_w - v * grad_g / norm).
std::vector<Value> weight_norm_backward(Context& c) {
  Builder& b = c.b;
  Value gw = c.tensor(0), v = c.tensor(1), g = c.tensor(2), norms = c.tensor(3);
  int64_t dim = weight_norm_dim(v, g, c.int_arg(4));
  if (v.rank() == 1 && v.type.numel() == 0) return {zeros(b, c.out(0)), zeros(b, c.out(1))};  // as above
  if (v.rank() == 1) throw NotLowerable("_weight_norm_interface_backward of a 1-D v");
  DType acc = opmath(v.dtype());
  Value vf = convert(b, v, acc), gwf = convert(b, gw, acc);
  Value dot = sum_keep(b, mul(b, gwf, vf), norm_dims(v, dim));
  // The CPU kernel reads saved_norms as its first v.size(dim) values, whatever its shape.
  int64_t count = v.shape()[dim], have = norms.type.numel();
  if (have < count) {
    throw InvalidCall("weight norm backward: saved_norms has " + std::to_string(have) + " elements, expected v.size(" +
                      std::to_string(dim) + ") = " + std::to_string(count));
  }
  Value flat = reshape(b, convert(b, norms, acc), {have});
  Value n = reshape(b, have == count ? flat : slice(b, flat, {0}, {count}, {1}), dot.shape());
  Value gf = reshape(b, convert(b, g, acc), dot.shape());
  Value grad_g = div(b, dot, n);
  Value grad_v = mul(b, expand_to(b, div(b, gf, n), v.shape()),
                     sub(b, gwf, mul(b, vf, expand_to(b, div(b, grad_g, n), v.shape()))));
  return {convert(b, grad_v, c.out(0).dtype), convert(b, reshape(b, grad_g, c.out(1).shape), c.out(1).dtype)};
}

// The norm_type-norm of each row of w ([V, D] -> [V]), as Tensor.norm computes it.
Value row_norms(Builder& b, Value w, double p) {
  Value a = is_complex(w.dtype()) ? complex_abs(b, w) : unary(b, Unary::Abs, w);
  int64_t V = w.shape()[0];
  double inf = std::numeric_limits<double>::infinity();
  if (p == inf) return reduce(b, a, {1}, "max");
  if (p == -inf) return reduce(b, a, {1}, "min");
  if (p == 0) return reduce(b, convert(b, compare(b, a, scalar_like(b, 0, a), Direction::NE), a.dtype()), {1}, "add");
  if (p == 1) return reduce(b, a, {1}, "add");
  if (p == 2) return unary(b, Unary::Sqrt, reduce(b, mul(b, a, a), {1}, "add"));
  Value s = reduce(b, binary(b, Binary::Power, a, scalar_like(b, p, a)), {1}, "add");
  return binary(b, Binary::Power, s, constant(b, 1.0 / p, a.dtype(), {V}));
}

// embedding_renorm(self, indices, max_norm, norm_type): every row that `indices` names and whose
// norm exceeds max_norm is scaled by max_norm / (norm + 1e-7); embedding_renorm_ writes it back.
std::vector<Value> embedding_renorm(Context& c) {
  Builder& b = c.b;
  Value w = c.tensor(0), idx = c.tensor(1);
  double max_norm = c.double_arg(2), p = c.double_arg(3);
  if (w.rank() != 2) throw InvalidCall("embedding_renorm_: self must be 2-D, got " + std::to_string(w.rank()) + "-D");
  require_dtype(is_integer(idx.dtype()), "embedding_renorm_", idx.dtype());
  int64_t V = w.shape()[0], D = w.shape()[1], n = idx.type.numel();
  if (n == 0 || V * D == 0) return {w};
  DType acc = opmath(w.dtype());
  Value wf = convert(b, w, acc);
  Value ind = reshape(b, convert(b, idx, DType::S64), {n, 1});
  // The CPU kernel takes row self[i]: a negative index counts from the end, as in Python.
  Value negative = compare(b, ind, constant(b, 0, DType::S64, {n, 1}), Direction::LT);
  ind = select(b, negative, add(b, ind, constant(b, static_cast<double>(V), DType::S64, {n, 1})), ind);
  Value bad = binary(b, Binary::Or, compare(b, ind, constant(b, 0, DType::S64, {n, 1}), Direction::LT),
                     compare(b, ind, constant(b, static_cast<double>(V), DType::S64, {n, 1}), Direction::GE));
  b.assert_false(reduce(b, bad, {0, 1}, "or"), "embedding_renorm_: index out of range for a weight of " +
                                                  std::to_string(V) + " rows",
                 CheckKind::IndexError);
  ScatterDims sd;
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  // Rows named by a negative and by a non-negative index: the CPU walks the distinct raw index
  // values, so a row named both ways (-1 and V-1) is renormalized twice.
  auto rows_hit = [&](Value which) {
    Value ones = convert(b, reshape(b, which, {n}), DType::S32);
    Value count = scatter(b, zeros(b, Type(DType::S32, {V})), ind, ones, sd, "add");
    return compare(b, count, zeros(b, count.type), Direction::GT);
  };
  Value by_negative = rows_hit(negative);
  Value by_positive = rows_hit(unary(b, Unary::Not, negative));
  auto renorm_rows = [&](Value x, Value rows) {
    Value norms = row_norms(b, x, p);  // real, also for a complex weight
    DType rt = norms.dtype();
    Value big = compare(b, norms, constant(b, max_norm, rt, {V}), Direction::GT);
    Value renorm = binary(b, Binary::And, rows, big);
    Value scale = div(b, constant(b, max_norm, rt, {V}), add(b, norms, constant(b, 1e-7, rt, {V})));
    Value scaled = mul(b, x, broadcast_in_dim(b, convert(b, scale, acc), {V, D}, {0}));
    // Rows left alone keep their exact values.
    return select(b, broadcast_in_dim(b, renorm, {V, D}, {0}), scaled, x);
  };
  Value r = renorm_rows(wf, binary(b, Binary::Or, by_negative, by_positive));
  r = renorm_rows(r, binary(b, Binary::And, by_negative, by_positive));
  return {convert(b, r, c.out().dtype)};
}

const Registrar registrar({
    {"_addmm_activation", addmm_activation},
    {"_weight_norm_interface", weight_norm},
    {"_weight_norm_interface_backward", weight_norm_backward},
    {"embedding_renorm", embedding_renorm},
});

}  // namespace
}  // namespace tpu::lowering
