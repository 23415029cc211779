// _foreach_* ops (the multi-tensor kernels of torch.optim with foreach=True and of
// clip_grad_norm_): one module updates every tensor of the list.
//
// Rules are registered under the functional names; the in-place variants (_foreach_add_.List,
// returning () with one out_type per written list element) and the out= variants map to them.
// Scalar and Scalar[] arguments are runtime values (Scalar[] arrives as a TensorList of 0-d
// values, see read_op_call in engine/call/op_call.cc), so a learning-rate schedule or Adam's
// per-step bias corrections never recompile.
//
// Element-wise math runs in the "opmath" type like PyTorch's CPU/CUDA kernels: f32 for
// bf16/f16 tensors, the output type otherwise.
#include <cmath>
#include <functional>
#include <limits>

#include "lowering/complex_math.h"
#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// Element i of argument a: a list entry, or the same tensor / runtime scalar for every i.
Value elem(Context& c, size_t a, size_t i) {
  const Arg& x = c.arg(a);
  if (x.kind == Arg::Kind::TensorList) return x.tensors.at(i);
  return c.tensor(a);
}

size_t list_size(Context& c, size_t a) {
  size_t n = c.arg(a).tensors.size();
  if (c.out_types.size() != n) {
    throw std::logic_error("foreach: " + std::to_string(c.out_types.size()) + " outputs for " +
                           std::to_string(n) + " list elements");
  }
  return n;
}

// PyTorch's promotion of two floating or complex types: the wider (bfloat16 with float16 is
// float32), complex if either is.
DType promote_floats(DType a, DType b) {
  if (a == b) return a;
  DType ra = real_part(a), rb = real_part(b);
  DType r = ra == rb ? ra : (ra == DType::F64 || rb == DType::F64) ? DType::F64 : DType::F32;
  if (!is_complex(a) && !is_complex(b)) return r;
  return r == DType::F64 ? DType::C128 : DType::C64;
}

// The floating type element i is computed in, as torch.result_type of its operands: the
// result's own type for lists of one dtype (the CPU's fused path), or a wider one where the
// element's tensors differ (the CPU's per-tensor path: bfloat16 self with float64 tensor2 in
// addcdiv_ divides in float64 and rounds into self once). A 0-d tensor among tensors with
// dims does not widen (PyTorch's promotion priority); a Python scalar never does.
DType element_type(Context& c, size_t i) {
  DType result = c.out_types.at(i).dtype;
  if (!is_float(result) && !is_complex(result)) return result;
  DType dims = result, zero_dim = result;
  bool any_dims = c.out_types.at(i).rank() > 0;
  for (const Arg& a : c.args) {
    if (a.is_wrapped_scalar) continue;
    Value v = a.kind == Arg::Kind::TensorList ? (i < a.tensors.size() ? a.tensors[i] : Value{})
              : a.kind == Arg::Kind::Tensor   ? a.tensor
                                              : Value{};
    if (!v.valid() || !(is_float(v.dtype()) || is_complex(v.dtype())) || is_float8(v.dtype())) continue;
    if (v.rank() > 0) {
      dims = promote_floats(dims, v.dtype());
      any_dims = true;
    } else {
      zero_dim = promote_floats(zero_dim, v.dtype());
    }
  }
  if (!any_dims) return zero_dim;
  // A complex 0-d tensor still makes real tensors complex (category beats priority).
  return is_complex(zero_dim) && !is_complex(dims) ? promote_floats(dims, DType::C64) : dims;
}

// Builds out_i = f(ctx, i, compute dtype, output shape), converted to out_types[i].
using ElemFn = std::function<Value(Context&, size_t, DType, const std::vector<int64_t>&)>;
Rule foreach_rule(ElemFn f, size_t list_arg = 0) {
  return [f, list_arg](Context& c) {
    size_t n = list_size(c, list_arg);
    std::vector<Value> out;
    for (size_t i = 0; i < n; ++i) {
      const Type& t = c.out_types[i];
      out.push_back(convert(c.b, f(c, i, opmath(element_type(c, i)), t.shape), t.dtype));
    }
    return out;
  };
}

// Each operand is first rounded to the element's type, as the CPU (one add/mul/... per tensor,
// TensorIterator casting inputs to the common dtype) does: a scalar -1.543 is -1.546875 for a
// bfloat16 list. Then the math runs in `t`.
Value operand(Context& c, size_t a, size_t i, DType t, const std::vector<int64_t>& shape) {
  Value x = elem(c, a, i);
  DType common = element_type(c, i);
  if (is_float(common) || is_complex(common)) x = convert(c.b, x, common);
  return cast_to(c.b, x, t, shape);
}

// (self, other, [alpha]): self op alpha * other
Rule binary(Binary op, bool with_alpha = false) {
  return foreach_rule([op, with_alpha](Context& c, size_t i, DType t, const std::vector<int64_t>& s) {
    Value x = operand(c, 0, i, t, s), y = operand(c, 1, i, t, s);
    if (with_alpha && c.has(2)) y = times_alpha(c.b, y, elem(c, 2, i), element_type(c, i));
    // The CPU adds other * alpha (alpha = 1 by default), a complex multiply: -inf + 0i becomes
    // -inf + NaN i.
    if (!(with_alpha && c.has(2)) && is_complex(t) && (op == Binary::Add || op == Binary::Subtract)) {
      y = times_complex_one(c.b, y);
    }
    return hlo::binary(c.b, op, x, y);
  });
}

Rule unary(std::function<Value(Builder&, Value)> f) {
  return foreach_rule([f](Context& c, size_t i, DType t, const std::vector<int64_t>& s) {
    return f(c.b, operand(c, 0, i, t, s));
  });
}
Rule hlo_unary(Unary op) {
  return unary([op](Builder& b, Value x) { return hlo::unary(b, op, x); });
}

// |x| of each tensor as it is: a complex tensor's modulus (a real result), unsigned tensors
// unchanged (stablehlo.abs takes none); bool is rejected as on the CPU.
std::vector<Value> foreach_abs(Context& c) {
  size_t n = list_size(c, 0);
  std::vector<Value> out;
  for (size_t i = 0; i < n; ++i) {
    Value x = elem(c, 0, i);
    require_dtype(x.dtype() != DType::Pred, "abs_cpu", x.dtype());
    Value r = is_unsigned(x.dtype()) ? x : is_complex(x.dtype()) ? complex_abs(c.b, x) : hlo::unary(c.b, Unary::Abs, x);
    out.push_back(cast_to(c.b, r, c.out_types[i].dtype, c.out_types[i].shape));
  }
  return out;
}

// maximum/minimum (and clamp_min/clamp_max) with a NaN on either side giving NaN, as on the CPU.
Rule extreme(Binary op) {
  return foreach_rule([op](Context& c, size_t i, DType t, const std::vector<int64_t>& s) {
    return nan_propagating(c.b, op, operand(c, 0, i, t, s), operand(c, 1, i, t, s));
  });
}

// (self, tensor1, tensor2, value | scalars): self + value * tensor1 op tensor2, in the CPU's
// order (value * tensor1 first: with complex infinities the order decides inf vs NaN).
Rule addc(bool divide) {
  return foreach_rule([divide](Context& c, size_t i, DType t, const std::vector<int64_t>& s) {
    Value x = operand(c, 0, i, t, s), a = operand(c, 1, i, t, s), d = operand(c, 2, i, t, s);
    if (c.has(3)) a = mul(c.b, operand(c, 3, i, t, s), a);
    return add(c.b, x, divide ? div(c.b, a, d) : mul(c.b, a, d));
  });
}

// (self, end, weight | weights): PyTorch's two-sided lerp formula (exact at weight 0 and 1).
Rule lerp() {
  return foreach_rule([](Context& c, size_t i, DType t, const std::vector<int64_t>& s) {
    Builder& b = c.b;
    Value x = operand(c, 0, i, t, s), e = operand(c, 1, i, t, s);
    // A Python-number weight stays in the opmath type (the CPU's lerp kernel takes it as
    // opmath_t): -3.846 is not rounded to bfloat16's -3.84375 first.
    Value w = c.arg(2).is_wrapped_scalar ? cast_to(b, elem(c, 2, i), t, s) : operand(c, 2, i, t, s);
    Value diff = sub(b, e, x);
    Type real(real_part(t), s);  // |w| of a complex weight is real
    Value small = compare(b, unary(b, Unary::Abs, w), constant(b, 0.5, real.dtype, s), Direction::LT);
    Value lo = add(b, x, mul(b, w, diff));
    Value hi = sub(b, e, mul(b, diff, sub(b, constant(b, 1, t, s), w)));
    return select(b, small, lo, hi);
  });
}

// _foreach_norm.Scalar(self, ord=2, dtype=None): ord is a runtime scalar, so every supported
// norm is computed and the right one selected (inf, -inf, 0, 1, 2, general p).
std::vector<Value> norm(Context& c) {
  Builder& b = c.b;
  size_t n = list_size(c, 0);
  std::vector<Value> out;
  for (size_t i = 0; i < n; ++i) {
    const Type& ot = c.out_types[i];
    DType t = opmath(ot.dtype);
    Value x = elem(c, 0, i);
    if (is_complex(x.dtype())) throw NotLowerable("_foreach_norm of complex tensors");
    x = convert(b, x, t);
    std::vector<int64_t> all(x.rank());
    for (int64_t d = 0; d < x.rank(); ++d) all[d] = d;
    Value ax = hlo::unary(b, Unary::Abs, x);
    Value p = convert(b, c.has(1) ? c.tensor(1) : constant(b, 2, t), t);
    Value ps = broadcast_in_dim(b, p, x.shape(), {});
    auto is = [&](double v) { return compare(b, p, constant(b, v, t), Direction::EQ); };
    Value sum_sq = reduce(b, mul(b, ax, ax), all, "add");
    Value l2 = hlo::unary(b, Unary::Sqrt, sum_sq);
    Value l1 = reduce(b, ax, all, "add");
    // The inf norms of a tensor holding NaN are NaN, as on the CPU (XLA's max/min skip it).
    Value has_nan = reduce(b, compare(b, ax, ax, Direction::NE), all, "or");
    Value nan_value = constant(b, std::numeric_limits<double>::quiet_NaN(), t);
    Value linf = select(b, has_nan, nan_value, reduce(b, ax, all, "max"));
    Value lminf = select(b, has_nan, nan_value, reduce(b, ax, all, "min"));
    Value l0 = reduce(b, convert(b, compare(b, ax, zeros(b, ax.type), Direction::NE), t), all, "add");
    Value lp = hlo::binary(b, Binary::Power, reduce(b, hlo::binary(b, Binary::Power, ax, ps), all, "add"),
                           div(b, constant(b, 1, t), p));
    double inf = std::numeric_limits<double>::infinity();
    Value r = select(b, is(2), l2,
              select(b, is(1), l1,
              select(b, is(inf), linf,
              select(b, is(-inf), lminf,
              select(b, is(0), l0, lp)))));
    out.push_back(convert(b, r, ot.dtype));
  }
  return out;
}

Value reciprocal(Builder& b, Value x) { return div(b, scalar_like(b, 1, x), x); }

// Helpers of the unary ops below, matching elementwise.cc's rules for the single-tensor ops.
Value foreach_trunc(Builder& b, Value x) {
  if (!is_float(x.dtype())) return x;
  Value neg = compare(b, x, scalar_like(b, 0, x), Direction::LT);
  return select(b, neg, hlo::unary(b, Unary::Ceil, x), hlo::unary(b, Unary::Floor, x));
}
Rule float_only(Unary op) {  // floor/ceil/round: integers are unchanged
  return unary([op](Builder& b, Value x) { return is_float(x.dtype()) ? hlo::unary(b, op, x) : x; });
}
// log(x) / ln(base). A complex log is divided part by part by the real ln(base), as the CPU's
// std::log2/log10 do: a complex division would turn log(inf + yi)'s 0 imaginary part into NaN.
Rule log_base(double ln_base) {
  return unary([ln_base](Builder& b, Value x) {
    Value l = hlo::unary(b, Unary::Log, x);
    if (!is_complex(x.dtype())) return div(b, l, scalar_like(b, ln_base, x));
    Type rt(x.dtype() == DType::C64 ? DType::F32 : DType::F64, x.shape());
    Value re = real(b, l), im = imag(b, l);
    Value k = constant(b, ln_base, rt.dtype, rt.shape);
    return complex(b, div(b, re, k), div(b, im, k));
  });
}
// sign as the CPU's (0 < x) - (x < 0): NaN gives 0, unsigned values 0 or 1.
Value foreach_sign(Builder& b, Value x) {
  if (x.dtype() == DType::Pred) return x;
  Value zero = scalar_like(b, 0, x);
  Value positive = convert(b, compare(b, zero, x, Direction::LT), x.dtype()), negative = convert(b, compare(b, x, zero, Direction::LT), x.dtype());
  return sub(b, positive, negative);
}

// atan through atan2's half-angle form (XLA:CPU's vectorized atan is wrong for some sizes;
// see elementwise.cc).
Value foreach_atan(Builder& b, Value x) {
  Value one = scalar_like(b, 1, x);
  Value r = hlo::unary(b, Unary::Sqrt, add(b, one, mul(b, x, x)));
  Value a = mul(b, scalar_like(b, 2, x), hlo::binary(b, Binary::Atan2, x, add(b, one, r)));
  Value huge = compare(b, hlo::unary(b, Unary::Abs, x), scalar_like(b, 1e18, x), Direction::GT);
  return select(b, huge, mul(b, hlo::unary(b, Unary::Sign, x), scalar_like(b, M_PI / 2, x)), a);
}

// _foreach_max(self): the NaN-propagating maximum of each tensor, as a 0-d tensor.
std::vector<Value> foreach_max(Context& c) {
  Builder& b = c.b;
  size_t n = list_size(c, 0);
  std::vector<Value> out;
  for (size_t i = 0; i < n; ++i) {
    const Type& ot = c.out_types[i];
    Value x = elem(c, 0, i);
    if (is_complex(x.dtype()) || x.type.numel() == 0) throw NotLowerable("_foreach_max of complex or empty tensors");
    x = convert(b, x, ot.dtype);
    std::vector<int64_t> all(x.rank());
    for (int64_t d = 0; d < x.rank(); ++d) all[d] = d;
    Value r = x.rank() == 0 ? x : reduce(b, x, all, "max");
    if (is_float(x.dtype()) && x.rank() > 0) {
      Value any_nan = reduce(b, compare(b, x, x, Direction::NE), all, "or");
      r = select(b, any_nan, constant(b, NAN, x.dtype()), r);
    }
    out.push_back(reshape(b, r, ot.shape));
  }
  return out;
}

const Registrar registrar({
    {"_foreach_add.Scalar", binary(Binary::Add)},
    {"_foreach_add.List", binary(Binary::Add, true)},
    {"_foreach_add.ScalarList", binary(Binary::Add)},
    {"_foreach_add.Tensor", binary(Binary::Add, true)},
    {"_foreach_sub.Scalar", binary(Binary::Subtract)},
    {"_foreach_sub.List", binary(Binary::Subtract, true)},
    {"_foreach_sub.ScalarList", binary(Binary::Subtract)},
    {"_foreach_mul.Scalar", binary(Binary::Multiply)},
    {"_foreach_mul.List", binary(Binary::Multiply)},
    {"_foreach_mul.ScalarList", binary(Binary::Multiply)},
    {"_foreach_mul.Tensor", binary(Binary::Multiply)},
    {"_foreach_div.Scalar", binary(Binary::Divide)},
    {"_foreach_div.List", binary(Binary::Divide)},
    {"_foreach_div.ScalarList", binary(Binary::Divide)},
    {"_foreach_div.Tensor", binary(Binary::Divide)},
    {"_foreach_maximum.Scalar", extreme(Binary::Maximum)},
    {"_foreach_maximum.List", extreme(Binary::Maximum)},
    {"_foreach_maximum.ScalarList", extreme(Binary::Maximum)},
    {"_foreach_minimum.Scalar", extreme(Binary::Minimum)},
    {"_foreach_minimum.List", extreme(Binary::Minimum)},
    {"_foreach_minimum.ScalarList", extreme(Binary::Minimum)},
    {"_foreach_clamp_min.Scalar", extreme(Binary::Maximum)},
    {"_foreach_clamp_min.List", extreme(Binary::Maximum)},
    {"_foreach_clamp_min.ScalarList", extreme(Binary::Maximum)},
    {"_foreach_clamp_max.Scalar", extreme(Binary::Minimum)},
    {"_foreach_clamp_max.List", extreme(Binary::Minimum)},
    {"_foreach_clamp_max.ScalarList", extreme(Binary::Minimum)},
    {"_foreach_pow.List", binary(Binary::Power)},
    {"_foreach_pow.Scalar", binary(Binary::Power)},
    {"_foreach_pow.ScalarList", binary(Binary::Power)},
    {"_foreach_pow.ScalarAndTensor",
     foreach_rule([](Context& c, size_t i, DType t, const std::vector<int64_t>& s) {
       return hlo::binary(c.b, Binary::Power, operand(c, 0, i, t, s), operand(c, 1, i, t, s));
     }, 1)},
    {"_foreach_addcmul.Scalar", addc(false)},
    {"_foreach_addcmul.ScalarList", addc(false)},
    {"_foreach_addcdiv.Scalar", addc(true)},
    {"_foreach_addcdiv.ScalarList", addc(true)},
    {"_foreach_lerp.Scalar", lerp()},
    {"_foreach_lerp.List", lerp()},
    {"_foreach_lerp.ScalarList", lerp()},
    {"_foreach_sqrt", unary(torch_sqrt)},
    {"_foreach_rsqrt", hlo_unary(Unary::Rsqrt)},
    {"_foreach_neg", hlo_unary(Unary::Negate)},
    {"_foreach_abs", foreach_abs},
    {"_foreach_exp", hlo_unary(Unary::Exponential)},
    {"_foreach_log", hlo_unary(Unary::Log)},
    {"_foreach_sign", unary(foreach_sign)},
    {"_foreach_reciprocal", unary(reciprocal)},
    {"_foreach_zero", foreach_rule([](Context& c, size_t, DType t, const std::vector<int64_t>& s) {
       return constant(c.b, 0, t, s);
     })},
    {"_foreach_copy", foreach_rule([](Context& c, size_t i, DType t, const std::vector<int64_t>& s) {
       return operand(c, 1, i, t, s);
     })},
    {"_foreach_norm.Scalar", norm},
    {"_foreach_max", foreach_max},
    {"_foreach_acos", unary([](Builder& b, Value x) { return complex_branch_cut_aware(b, Unary::Acos, x); })},
    {"_foreach_asin", unary([](Builder& b, Value x) { return complex_branch_cut_aware(b, Unary::Asin, x); })},
    {"_foreach_atan", [](Context& c) {
       for (const Value& x : c.arg(0).tensors) {
         if (is_complex(x.dtype())) throw NotLowerable("complex atan");  // as atan (elementwise.cc)
       }
       return unary(foreach_atan)(c);
     }},
    {"_foreach_ceil", float_only(Unary::Ceil)},
    {"_foreach_cos", hlo_unary(Unary::Cosine)},
    {"_foreach_cosh", hlo_unary(Unary::Cosh)},
    {"_foreach_erf", hlo_unary(Unary::Erf)},
    {"_foreach_erfc", hlo_unary(Unary::Erfc)},
    {"_foreach_expm1", hlo_unary(Unary::ExponentialMinusOne)},
    {"_foreach_floor", float_only(Unary::Floor)},
    {"_foreach_frac", unary([](Builder& b, Value x) { return sub(b, x, foreach_trunc(b, x)); })},
    {"_foreach_lgamma", hlo_unary(Unary::Lgamma)},
    {"_foreach_log10", log_base(M_LN10)},
    {"_foreach_log1p", hlo_unary(Unary::LogPlusOne)},
    {"_foreach_log2", log_base(M_LN2)},
    {"_foreach_round", float_only(Unary::RoundNearestEven)},
    {"_foreach_sigmoid", unary(torch_sigmoid)},
    {"_foreach_sin", hlo_unary(Unary::Sine)},
    {"_foreach_sinh", hlo_unary(Unary::Sinh)},
    {"_foreach_tan", hlo_unary(Unary::Tan)},
    {"_foreach_tanh", hlo_unary(Unary::Tanh)},
    {"_foreach_trunc", unary(foreach_trunc)},
});

}  // namespace
}  // namespace tpu::lowering
