// Matrix products: mm, bmm, addmm, baddbmm, addmv, mv, addr, dot, vdot (real and complex).
//
// matmul, linear, outer, einsum and tensordot are CompositeImplicitAutograd: they decompose to
// these ops (and views) before reaching the backend.
//
// Products use stablehlo.dot_general with the output dtype as the result type: integer inputs
// accumulate in their own integer type (wrapping like PyTorch), bf16/f16 products are returned
// in the low-precision type while XLA accumulates in f32 internally (like PyTorch's CPU/CUDA
// kernels). float32 products request HIGHEST precision (see hlo::dot_general).
#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

Value as(Context& c, size_t i, DType t) { return convert(c.b, c.tensor(i), t); }

// beta * self + alpha * product, with PyTorch's rule that beta == 0 ignores self entirely
// (NaN/Inf in self must not propagate) and alpha == 1 / beta == 1 being exact.
// Low-precision floats are combined in float32 and rounded once (opmath).
// skip_at_zero_alpha: the CPU's BLAS path (addmm/addmv in float32/float64/complex) does not
// read the product when alpha == 0, so an inf in mat stays out; its other kernels multiply.
Value scaled_sum(Context& c, Value product, size_t self_i, size_t beta_i, size_t alpha_i, bool skip_at_zero_alpha = false) {
  Builder& b = c.b;
  const Type out(opmath(c.out().dtype), c.out().shape);
  DType t = out.dtype;
  product = convert(b, product, t);
  if (!broadcastable(c.tensor(self_i).shape(), out.shape)) {
    throw InvalidCall("self of shape " + shape_str(c.tensor(self_i).shape()) +
                      " cannot be broadcast to the product's shape " + shape_str(out.shape));
  }
  Value self = cast_to(b, c.tensor(self_i), t, out.shape);
  if (c.has(alpha_i)) {
    Value alpha = c.tensor(alpha_i);
    product = mul(b, product, cast_to(b, alpha, t, out.shape));
    DType d = c.out().dtype;
    bool blas = d == DType::F32 || d == DType::F64 || is_complex(d);
    if (skip_at_zero_alpha && blas) {
      Value zero_alpha = broadcast_in_dim(b, compare(b, alpha, zeros(b, alpha.type), Direction::EQ), out.shape, {});
      product = select(b, zero_alpha, zeros(b, out), product);
    }
  }
  if (!c.has(beta_i)) return add(b, self, product);
  Value beta = c.tensor(beta_i);
  Value beta_t = cast_to(b, beta, t, out.shape);
  Value scaled = t == DType::Pred ? binary(b, Binary::And, self, beta_t) : mul(b, self, beta_t);
  Value beta_is_zero = compare(b, beta, zeros(b, beta.type), Direction::EQ);
  scaled = select(b, broadcast_in_dim(b, beta_is_zero, out.shape, {}), zeros(b, out), scaled);
  if (t == DType::Pred) return binary(b, Binary::Or, scaled, product);
  return add(b, scaled, product);
}

// Rows of x at or below which x @ W.t() is computed as (W @ x.t()).t(): a skinny product with a
// transposed weight (every nn.Linear in decode: 1 token x hidden @ weight.t()). XLA:CPU lays the
// weight out anew for x @ W.t() on every call (2.8 ms for 1x768 @ 768x3072, 0.24 ms the other way
// round, measured); a TPU compiler picks its own layouts either way.
constexpr int64_t kSkinnyRows = 16;

Value mm_product(Context& c, size_t a, size_t m, DType t) {
  Value x = as(c, a, t), y = as(c, m, t);
  if (x.rank() != 2 || y.rank() != 2) throw std::invalid_argument("mm: expected 2-D tensors");
  const auto* weight = c.b.transposed_from(y);
  if (x.shape()[0] <= kSkinnyRows && weight != nullptr && weight->second == std::vector<int64_t>{1, 0}) {
    Value wx = dot_general(c.b, weight->first, x, {}, {}, {1}, {1}, t);  // [N, M]
    return transpose(c.b, wx, {1, 0});
  }
  return dot_general(c.b, x, y, {}, {}, {1}, {0}, t);
}

Value bmm_product(Context& c, size_t a, size_t m, DType t) {
  Value x = as(c, a, t), y = as(c, m, t);
  if (x.rank() != 3 || y.rank() != 3) throw std::invalid_argument("bmm: expected 3-D tensors");
  return dot_general(c.b, x, y, {0}, {0}, {2}, {1}, t);
}

Value mv_product(Context& c, size_t a, size_t v, DType t) {
  return dot_general(c.b, as(c, a, t), as(c, v, t), {}, {}, {1}, {0}, t);
}

// Products of bool matrices: PyTorch computes them as "any(a & b)"; do it in s32 and compare.
DType product_dtype(DType t) { return t == DType::Pred ? DType::S32 : t; }
Value finish(Builder& b, Value p, DType t) { return t == DType::Pred ? convert(b, p, t) : p; }

using Product = Value (*)(Context&, size_t, size_t, DType);

// mm / bmm / mv: the product of arguments 0 and 1.
Rule product_rule(Product product, const char* name) {
  return [product, name](Context& c) {
    DType t = c.out().dtype;
    return std::vector<Value>{finish(c.b, product(c, 0, 1, product_dtype(t)), t)};
  };
}

// addmm / baddbmm / addmv (self, a, b, *, beta=1, alpha=1): beta * self + alpha * (a @ b).
Rule scaled_product_rule(Product product, const char* name) {
  return [product, name](Context& c) {
    DType t = c.out().dtype;
    Value p = finish(c.b, product(c, 1, 2, product_dtype(t)), t);
    bool blas = std::string(name) == "addmm" || std::string(name) == "addmv";
    return std::vector<Value>{scaled_sum(c, p, 0, 3, 4, blas)};
  };
}

// addr(self, vec1, vec2, *, beta=1, alpha=1): beta * self + alpha * outer(vec1, vec2).
std::vector<Value> addr(Context& c) {
  DType t = opmath(c.out().dtype);
  const auto& shape = c.out().shape;
  Value u = broadcast_in_dim(c.b, as(c, 1, t), shape, {0});
  Value v = broadcast_in_dim(c.b, as(c, 2, t), shape, {1});
  Value p = t == DType::Pred ? binary(c.b, Binary::And, u, v) : mul(c.b, u, v);
  return {scaled_sum(c, p, 0, 3, 4)};
}

// dot(x, y) = sum(x * y); vdot(x, y) = sum(conj(x) * y).
std::vector<Value> dot_or_vdot(Context& c, bool conjugate_first) {
  DType t = c.out().dtype;
  Value x = as(c, 0, product_dtype(t)), y = as(c, 1, product_dtype(t));
  if (conjugate_first && is_complex(t)) {
    x = complex(c.b, real(c.b, x), neg(c.b, imag(c.b, x)));
  }
  if (x.rank() != 1 || y.rank() != 1) {
    throw std::invalid_argument("1D tensors expected, but got " + std::to_string(x.rank()) +
                                "D and " + std::to_string(y.rank()) + "D tensors");
  }
  if (x.shape()[0] != y.shape()[0]) {
    throw std::invalid_argument("inconsistent tensor size, expected tensor [" +
                                std::to_string(x.shape()[0]) + "] and src [" +
                                std::to_string(y.shape()[0]) +
                                "] to have the same number of elements, but got " +
                                std::to_string(x.shape()[0]) + " and " +
                                std::to_string(y.shape()[0]) + " elements respectively");
  }
  return {finish(c.b, dot_general(c.b, x, y, {}, {}, {0}, {0}, product_dtype(t)), t)};
}

// _grouped_mm(self, mat2, offs?, bias?, out_dtype?): the grouped GEMM of MoE layers.
//   2-D x 3-D with offs: rows [offs[g-1], offs[g]) of self times mat2[g] -> [M, N]
//   2-D x 2-D with offs: columns/rows [offs[g-1], offs[g]) of the contraction -> [G, M, N]
//   3-D x 3-D: a batched matmul -> [G, M, N]
// Groups are selected with masks over every group's product (G times the flops of the exact
// grouped product): exact results, shapes independent of the offsets' values.
std::vector<Value> grouped_mm(Context& c) {
  Builder& b = c.b;
  const Type& out = c.out();
  DType acc = opmath(out.dtype);
  if (c.has(3)) throw NotLowerable("_grouped_mm with bias");
  Value x = convert(b, c.tensor(0), acc), w = convert(b, c.tensor(1), acc);
  int64_t xr = x.rank(), wr = w.rank();
  auto group_mask = [&](Value offs, int64_t groups, int64_t length) {  // [G, length]: in group g
    Value ends = convert(b, reshape(b, offs, {groups}), DType::S64);
    Value starts = concatenate(b, {constant(b, 0, DType::S64, {1}), slice(b, ends, {0}, {groups - 1}, {1})}, 0);
    Value pos = iota(b, Type(DType::S64, {groups, length}), 1);
    Value lo = compare(b, pos, broadcast_in_dim(b, starts, {groups, length}, {0}), Direction::GE);
    Value hi = compare(b, pos, broadcast_in_dim(b, ends, {groups, length}, {0}), Direction::LT);
    return binary(b, Binary::And, lo, hi);
  };
  Value r;
  if (xr == 2 && wr == 3 && c.has(2)) {
    int64_t groups = w.shape()[0], m = x.shape()[0], n = w.shape()[2];
    Value all = dot_general(b, w, x, {}, {}, {1}, {1}, acc);   // [G, N, M]
    all = transpose(b, all, {0, 2, 1});                        // [G, M, N]
    Value mask = broadcast_in_dim(b, group_mask(c.tensor(2), groups, m), {groups, m, n}, {0, 1});
    r = reduce(b, select(b, mask, all, zeros(b, all.type)), {0}, "add");
  } else if (xr == 2 && wr == 2 && c.has(2)) {
    int64_t groups = c.tensor(2).type.numel(), m = x.shape()[0], k = x.shape()[1];
    Value mask = broadcast_in_dim(b, group_mask(c.tensor(2), groups, k), {groups, m, k}, {0, 2});
    Value xg = select(b, mask, broadcast_in_dim(b, x, {groups, m, k}, {1, 2}), zeros(b, Type(acc, {groups, m, k})));
    r = dot_general(b, xg, w, {}, {}, {2}, {0}, acc);  // [G, M, N]
  } else if (xr == 3 && wr == 3 && !c.has(2)) {
    r = dot_general(b, x, w, {0}, {0}, {2}, {1}, acc);
  } else {
    throw NotLowerable("_grouped_mm: this combination of ranks and offsets");
  }
  return {convert(b, r, out.dtype)};
}

std::vector<int64_t> all_dims_but(int64_t rank, int64_t skipped) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d) if (d != skipped) dims.push_back(d);
  return dims;
}

Value transpose_last2(Builder& b, Value x) {
  std::vector<int64_t> perm(x.rank());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return transpose(b, x, perm);
}

// linalg_solve_triangular(A, B, *, upper, left=True, unitriangular=False): batch dimensions
// broadcast as in PyTorch; the solve itself is StableHLO's triangular_solve (XLA's blocked
// algorithm, as on a TPU). X A = B is solved as A^T X^T = B^T.
//
// The blocked solve multiplies whole blocks, so a NaN/inf in B would also reach the rows that
// substitution never combines it with (0 * inf = NaN). Rows that do not depend on a non-finite
// entry of their column are therefore taken from a solve with those entries zeroed (both
// right-hand sides go through one solve).
std::vector<Value> solve_triangular(Context& c) {
  Builder& b = c.b;
  DType t = c.out().dtype;
  if (!is_float(t)) throw NotLowerable(std::string("linalg_solve_triangular on ") + mlir_name(t));
  bool upper = c.bool_arg(2), left = !c.has(3) || c.bool_arg(3), unit = c.has(4) && c.bool_arg(4);
  std::vector<int64_t> out = c.out().shape;
  std::vector<int64_t> batch(out.begin(), out.end() - 2);
  auto with_batch = [&](Value v) {
    std::vector<int64_t> shape = batch;
    shape.insert(shape.end(), v.shape().end() - 2, v.shape().end());
    return broadcast_to(b, v, shape);
  };
  Value a = with_batch(convert(b, c.tensor(0), t)), rhs = with_batch(convert(b, c.tensor(1), t));
  if (!left) a = transpose_last2(b, a), rhs = transpose_last2(b, rhs), upper = !upper;
  const std::vector<int64_t>& shape = rhs.shape();  // [..., m, k]
  int64_t rank = rhs.rank(), m = shape[rank - 2], k = shape[rank - 1];

  Value nonfinite = unary(b, Unary::Not, unary(b, Unary::IsFinite, rhs));
  Value row = iota(b, Type(DType::S64, shape), rank - 2);
  Value dependent;  // rows whose substitution reads a non-finite entry of their column
  if (upper) {      // back substitution: row i reads rows >= i
    Value last = reduce(b, select(b, nonfinite, row, scalar_like(b, -1, row)), {rank - 2}, "max");
    dependent = compare(b, row, broadcast_in_dim(b, last, shape, all_dims_but(rank, rank - 2)), Direction::LE);
  } else {          // forward substitution: row i reads rows <= i
    Value first = reduce(b, select(b, nonfinite, row, scalar_like(b, m, row)), {rank - 2}, "min");
    dependent = compare(b, row, broadcast_in_dim(b, first, shape, all_dims_but(rank, rank - 2)), Direction::GE);
  }
  Value zeroed = select(b, nonfinite, zeros(b, rhs.type), rhs);
  std::vector<int64_t> both_shape = shape;
  both_shape[rank - 1] = 2 * k;
  std::string attrs = std::string("left_side = true, lower = ") + (upper ? "false" : "true") +
                      ", unit_diagonal = " + (unit ? "true" : "false") +
                      ", transpose_a = #stablehlo<transpose NO_TRANSPOSE>";
  Value both = b.emit1("stablehlo.triangular_solve", {a, concatenate(b, {zeroed, rhs}, rank - 1)},
                       Type(t, both_shape), attrs);
  std::vector<int64_t> lo(rank, 0), hi = both_shape, step(rank, 1);
  hi[rank - 1] = k;
  Value clean = slice(b, both, lo, hi, step);
  lo[rank - 1] = k, hi[rank - 1] = 2 * k;
  Value x = select(b, dependent, slice(b, both, lo, hi, step), clean);
  return {left ? x : transpose_last2(b, x)};
}

const Registrar registrar({
    {"linalg_solve_triangular", solve_triangular},
    {"_grouped_mm", grouped_mm},
    {"mm", product_rule(mm_product, "mm")},
    {"bmm", product_rule(bmm_product, "bmm")},
    {"mv", product_rule(mv_product, "mv")},
    {"addmm", scaled_product_rule(mm_product, "addmm")},
    {"baddbmm", scaled_product_rule(bmm_product, "baddbmm")},
    {"addmv", scaled_product_rule(mv_product, "addmv")},
    {"addr", addr},
    {"dot", [](Context& c) { return dot_or_vdot(c, false); }},
    {"vdot", [](Context& c) { return dot_or_vdot(c, true); }},
});

// Contractions over a padded dim are masked by the padder.
const PaddedOperandsRegistrar padded_operands({
    {"mm", PaddedOperands::Exact},
    {"bmm", PaddedOperands::Exact},
    {"addmm", PaddedOperands::Exact},
    {"baddbmm", PaddedOperands::Exact},
    {"mv", PaddedOperands::Exact},
    // Qwen3.5's chunked delta rule solves one system per chunk, the chunks a padded prefix.
    {"linalg_solve_triangular", PaddedOperands::BatchDims},
});

}  // namespace
}  // namespace tpu::lowering
