// Element-wise arithmetic, math, comparison, logical and selection ops.
#include <cmath>
#include <numeric>

#include "lowering/complex_math.h"
#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// PyTorch computes float16/bfloat16 element-wise math in float32 and rounds once at the end.
DType out_math(Context& c) { return opmath(c.out().dtype); }

// Operand i converted to `dtype` and broadcast to the output shape.
Value operand(Context& c, size_t i, DType dtype) {
  return cast_to(c.b, c.tensor(i), dtype, c.out().shape);
}

// A low-precision result computed in float32 is rounded once to its common dtype, and only then
// cast to a wider out= tensor, as the CPU's TensorIterator does (bf16 inputs, float32 out=).
Value round_to_common(Builder& b, Value r, DType common) {
  return r.dtype() != common && opmath(common) == r.dtype() ? convert(b, r, common) : r;
}

// f(x, y) computed in the promoted type, then converted to the output type.
Rule binary_rule(std::function<Value(Builder&, Value, Value)> f, bool compute_in_out_type = false) {
  return [f, compute_in_out_type](Context& c) {
    DType common = compute_in_out_type ? c.out().dtype : c.compute_dtype;
    Value r = f(c.b, operand(c, 0, opmath(common)), operand(c, 1, opmath(common)));
    return std::vector<Value>{convert(c.b, round_to_common(c.b, r, common), c.out().dtype)};
  };
}

// Integer division by zero raises on the CPU ("ZeroDivisionError"); here the engine raises it at
// the next host sync (Builder::assert_false), like an out-of-range index. Floats give inf/NaN.
void assert_nonzero_integer_divisor(Builder& b, Value y) {
  if (!is_integer(y.dtype()) || y.type.numel() == 0) return;
  std::vector<int64_t> all(y.rank());
  for (int64_t d = 0; d < y.rank(); ++d) all[d] = d;
  b.assert_false(reduce(b, compare(b, y, scalar_like(b, 0, y), Direction::EQ), all, "or"), "ZeroDivisionError", CheckKind::RuntimeError);
}

// x op y for remainder/fmod: the divisor is checked for integer zeros. Complex operands are
// rejected as on the CPU (XLA's compiler crashes on a complex stablehlo.remainder).
Rule division_rule(const std::string& cpu_name, std::function<Value(Builder&, Value, Value)> f) {
  return [cpu_name, f](Context& c) {
    require_dtype(!is_complex(c.compute_dtype), cpu_name, c.compute_dtype);
    DType t = opmath(c.compute_dtype);
    Value x = operand(c, 0, t), y = operand(c, 1, t);
    assert_nonzero_integer_divisor(c.b, y);
    return std::vector<Value>{convert(c.b, round_to_common(c.b, f(c.b, x, y), c.compute_dtype), c.out().dtype)};
  };
}

Rule hlo_binary(Binary op, bool compute_in_out_type = false) {
  return binary_rule([op](Builder& b, Value x, Value y) { return binary(b, op, x, y); },
                     compute_in_out_type);
}

// Bitwise ops exist for integers and bool only (the CPU: "bitwise_and_cpu" not implemented).
Rule bitwise_rule(const std::string& name, Binary op) {
  return [name, op](Context& c) {
    DType t = c.compute_dtype;
    require_dtype(!is_float(t) && !is_complex(t), name, t);
    return hlo_binary(op)(c);
  };
}

// add/sub with alpha: x op alpha * y, alpha as the CPU uses it (times_alpha). Operands are in
// the common dtype first: a Python number added to bfloat16 is rounded to bfloat16 (2.47 is
// 2.46875), as TensorIterator casts it.
Value common_operand(Context& c, size_t i, DType t) {
  return convert(c.b, operand(c, i, c.compute_dtype), t);
}

Rule alpha_rule(Binary op) {
  return [op](Context& c) {
    DType t = opmath(c.compute_dtype);
    Value x = common_operand(c, 0, t), y = common_operand(c, 1, t);
    if (c.has(2)) y = times_alpha(c.b, y, c.tensor(2), c.compute_dtype);
    Value r = round_to_common(c.b, binary(c.b, op, x, y), c.compute_dtype);
    return std::vector<Value>{convert(c.b, r, c.out().dtype)};
  };
}

// f(x) on the input converted to the output type (ints become floats for math functions); a
// floating input is the common dtype, so f computes in it even when out= is wider.
Rule unary_rule(std::function<Value(Builder&, Value)> f) {
  return [f](Context& c) {
    DType in = c.tensor(0).dtype(), out = c.out().dtype;
    // An integer input with a complex out= computes in reals as the CPU does (erf has no
    // complex form; sqrt of a negative is NaN, then converted).
    DType common = is_float(in) ? in : is_complex(out) && !is_complex(in) ? real_part(out) : out;
    return std::vector<Value>{round_to_common(c.b, f(c.b, operand(c, 0, opmath(common))), common)};
  };
}
Rule hlo_unary(Unary op) {
  return unary_rule([op](Builder& b, Value x) { return unary(b, op, x); });
}

Rule compare_rule(Direction direction) {
  return [direction](Context& c) {
    DType t = c.compute_dtype;
    Value r = compare(c.b, operand(c, 0, t), operand(c, 1, t), direction);
    return std::vector<Value>{convert(c.b, r, c.out().dtype)};
  };
}

Rule logical_rule(Binary op) {
  return [op](Context& c) {
    Value r = binary(c.b, op, operand(c, 0, DType::Pred), operand(c, 1, DType::Pred));
    return std::vector<Value>{convert(c.b, r, c.out().dtype)};
  };
}

Value trunc(Builder& b, Value x) {
  Value neg = compare(b, x, scalar_like(b, 0, x), Direction::LT);
  return select(b, neg, unary(b, Unary::Ceil, x), unary(b, Unary::Floor, x));
}

// Python-style modulo: the result takes the divisor's sign.
Value python_remainder(Builder& b, Value x, Value y) {
  Value r = binary(b, Binary::Remainder, x, y);
  Value zero = scalar_like(b, 0, r);
  Value nonzero = compare(b, r, zero, Direction::NE);
  Value signs_differ = compare(b, compare(b, r, zero, Direction::LT), compare(b, y, zero, Direction::LT), Direction::NE);
  Value fix = binary(b, Binary::And, nonzero, signs_differ);
  return select(b, fix, add(b, r, y), r);
}

std::vector<Value> div_mode(Context& c) {
  std::string mode = c.has(2) ? c.arg(2).s : "";
  if (mode.empty()) {
    DType t = out_math(c);
    return {div(c.b, operand(c, 0, t), operand(c, 1, t))};
  }
  // Floor division as the CPU computes it (from fmod: 1 // 0.1 == 9, inf // 2 is NaN).
  if (mode == "floor") return find_rule("floor_divide")->operator()(c);
  DType t = opmath(c.compute_dtype);
  Value x = operand(c, 0, t), y = operand(c, 1, t);
  assert_nonzero_integer_divisor(c.b, y);
  // A low-precision quotient is rounded to its dtype before the truncation, as on the CPU.
  Value r = is_float(t) ? trunc(c.b, convert(c.b, round_to_common(c.b, div(c.b, x, y), c.compute_dtype), t)) : div(c.b, x, y);
  return {convert(c.b, r, c.out().dtype)};
}

Value gelu(Builder& b, Value x, bool tanh_approx) {
  Value half = scalar_like(b, 0.5, x), one = scalar_like(b, 1, x);
  if (tanh_approx) {
    Value k = scalar_like(b, std::sqrt(2.0 / M_PI), x);
    Value inner = mul(b, k, add(b, x, mul(b, scalar_like(b, 0.044715, x), mul(b, x, mul(b, x, x)))));
    return mul(b, mul(b, half, x), add(b, one, unary(b, Unary::Tanh, inner)));
  }
  Value erf = unary(b, Unary::Erf, mul(b, x, scalar_like(b, M_SQRT1_2, x)));
  return mul(b, mul(b, half, x), add(b, one, erf));
}

std::vector<Value> gelu_backward(Context& c) {
  Builder& b = c.b;
  DType t = out_math(c);
  Value g = operand(c, 0, t), x = operand(c, 1, t);
  bool tanh_approx = c.has(2) && c.arg(2).s == "tanh";
  Value half = scalar_like(b, 0.5, x), one = scalar_like(b, 1, x);
  if (tanh_approx) {
    Value k = scalar_like(b, std::sqrt(2.0 / M_PI), x), k1 = scalar_like(b, 0.044715, x);
    Value x2 = mul(b, x, x);
    Value inner = mul(b, k, add(b, x, mul(b, k1, mul(b, x2, x))));
    Value th = unary(b, Unary::Tanh, inner);
    Value left = mul(b, half, add(b, one, th));
    Value dinner = mul(b, k, add(b, one, mul(b, scalar_like(b, 3 * 0.044715, x), x2)));
    Value right = mul(b, mul(b, half, x), mul(b, sub(b, one, mul(b, th, th)), dinner));
    return {mul(b, g, add(b, left, right))};
  }
  Value cdf = mul(b, half, add(b, one, unary(b, Unary::Erf, mul(b, x, scalar_like(b, M_SQRT1_2, x)))));
  Value pdf = mul(b, scalar_like(b, 1.0 / std::sqrt(2 * M_PI), x),
                  unary(b, Unary::Exponential, mul(b, scalar_like(b, -0.5, x), mul(b, x, x))));
  return {mul(b, g, add(b, cdf, mul(b, x, pdf)))};
}

std::vector<Value> where(Context& c) {
  DType t = out_math(c);
  return {select(c.b, operand(c, 0, DType::Pred), operand(c, 1, t), operand(c, 2, t))};
}

std::vector<Value> masked_fill(Context& c) {
  DType t = out_math(c);
  return {select(c.b, operand(c, 1, DType::Pred), operand(c, 2, t), operand(c, 0, t))};
}

// clamp(self, min?, max?): NaN in self propagates like PyTorch.
std::vector<Value> clamp(Context& c) {
  DType t = out_math(c);
  Value x = operand(c, 0, t);
  // NaN in x or in a bound gives NaN, as on the CPU.
  if (c.has(1)) x = nan_propagating(c.b, Binary::Maximum, x, operand(c, 1, t));
  if (c.has(2)) x = nan_propagating(c.b, Binary::Minimum, x, operand(c, 2, t));
  return {x};
}

// clamp_min(self, min): its out= variant passes `out` as argument 2, so not the clamp rule.
std::vector<Value> clamp_min(Context& c) {
  DType t = out_math(c);
  return {nan_propagating(c.b, Binary::Maximum, operand(c, 0, t), operand(c, 1, t))};
}

std::vector<Value> clamp_max(Context& c) {
  DType t = out_math(c);
  return {nan_propagating(c.b, Binary::Minimum, operand(c, 0, t), operand(c, 1, t))};
}

// round(x, decimals) as the CPU computes it: nearbyint(x * 10^d) / 10^d, or for d < 0
// nearbyint(x / 10^-d) * 10^-d.
std::vector<Value> round_decimals(Context& c) {
  Builder& b = c.b;
  Value x = operand(c, 0, out_math(c));
  if (!is_float(x.dtype())) return {x};
  int64_t d = c.int_arg(1);
  Value scale = scalar_like(b, std::pow(10.0, static_cast<double>(d < 0 ? -d : d)), x);
  Value scaled = d < 0 ? div(b, x, scale) : mul(b, x, scale);
  Value r = unary(b, Unary::RoundNearestEven, scaled);
  return {d < 0 ? mul(b, r, scale) : div(b, r, scale)};
}

Value relu(Builder& b, Value x) { return max(b, x, scalar_like(b, 0, x)); }
Value sigmoid(Builder& b, Value x) { return torch_sigmoid(b, x); }

std::vector<Value> silu_backward(Context& c) {
  Builder& b = c.b;
  DType t = out_math(c);
  Value g = operand(c, 0, t), x = operand(c, 1, t);
  Value s = sigmoid(b, x), one = scalar_like(b, 1, x);
  // (dy * sigmoid) * (1 + x (1 - sigmoid)), grouped as the CPU kernel: for complex values the
  // grouping decides between inf and NaN.
  return {mul(b, mul(b, g, s), add(b, one, mul(b, x, sub(b, one, s))))};
}

// softplus(x, beta, threshold) = log1p(exp(beta x)) / beta, and x itself where beta x > threshold.
std::vector<Value> softplus(Context& c) {
  Builder& b = c.b;
  DType t = out_math(c);
  Value x = operand(c, 0, t), beta = operand(c, 1, t), threshold = operand(c, 2, t);
  Value bx = mul(b, x, beta);
  Value soft = div(b, unary(b, Unary::LogPlusOne, unary(b, Unary::Exponential, bx)), beta);
  return {select(b, compare(b, bx, threshold, Direction::GT), x, soft)};
}

std::vector<Value> softplus_backward(Context& c) {  // (grad, self, beta, threshold)
  Builder& b = c.b;
  DType t = out_math(c);
  Value g = operand(c, 0, t), x = operand(c, 1, t), beta = operand(c, 2, t), threshold = operand(c, 3, t);
  Value bx = mul(b, x, beta);
  // The CPU's z / (z + 1) with z = exp(beta * x), not sigmoid: inf / inf is NaN there.
  Value z = unary(b, Unary::Exponential, bx);
  return {select(b, compare(b, bx, threshold, Direction::GT), g, mul(b, g, div(b, z, add(b, z, scalar_like(b, 1, z)))))};
}

std::vector<Value> threshold_backward(Context& c) {
  DType t = out_math(c);
  Value g = operand(c, 0, t), x = operand(c, 1, t), th = operand(c, 2, t);
  return {select(c.b, compare(c.b, x, th, Direction::LE), scalar_like(c.b, 0, g), g)};
}

std::vector<Value> leaky_relu(Context& c) {
  DType t = out_math(c);
  Value x = operand(c, 0, t), slope = c.has(1) ? operand(c, 1, t) : scalar_like(c.b, 0.01, x);
  return {select(c.b, compare(c.b, x, scalar_like(c.b, 0, x), Direction::GT), x, mul(c.b, x, slope))};
}

std::vector<Value> hardtanh(Context& c) {
  DType t = out_math(c);
  Value x = operand(c, 0, t);
  Value lo = c.has(1) ? operand(c, 1, t) : scalar_like(c.b, -1, x);
  Value hi = c.has(2) ? operand(c, 2, t) : scalar_like(c.b, 1, x);
  Value y = min(c.b, max(c.b, x, lo), hi);
  if (!is_float(t)) return {y};
  // A NaN bound gives NaN, as the CPU's vectorized clamp (XLA's max/min here return x).
  Value nan_bound = binary(c.b, Binary::Or, compare(c.b, lo, lo, Direction::NE), compare(c.b, hi, hi, Direction::NE));
  return {select(c.b, nan_bound, add(c.b, lo, hi), y)};
}

std::vector<Value> leaky_relu_backward(Context& c) {  // (grad, self, slope, self_is_result)
  DType t = out_math(c);
  Value g = operand(c, 0, t), x = operand(c, 1, t), slope = operand(c, 2, t);
  return {select(c.b, compare(c.b, x, scalar_like(c.b, 0, x), Direction::GT), g, mul(c.b, g, slope))};
}

std::vector<Value> hardtanh_backward(Context& c) {  // (grad, self, min, max)
  DType t = out_math(c);
  Value g = operand(c, 0, t), x = operand(c, 1, t), lo = operand(c, 2, t), hi = operand(c, 3, t);
  // The CPU's (x <= min || x >= max) ? 0 : grad: a NaN x or bound passes the gradient.
  Value outside = binary(c.b, Binary::Or, compare(c.b, x, lo, Direction::LE), compare(c.b, x, hi, Direction::GE));
  return {select(c.b, outside, scalar_like(c.b, 0, g), g)};
}

// lerp(self, end, weight) with the CPU kernel's two-sided form (exact at weight 0 and 1, and
// the same NaN for infinite endpoints): |w| < 0.5 ? self + w * (end - self)
//                                                  : end - (end - self) * (1 - w).
std::vector<Value> lerp(Context& c) {
  DType t = out_math(c);
  Value x = operand(c, 0, t), e = operand(c, 1, t), w = operand(c, 2, t);
  Builder& b = c.b;
  Value diff = sub(b, e, x);
  Value abs_w = unary(b, Unary::Abs, w);
  Value small = compare(b, abs_w, scalar_like(b, 0.5, abs_w), Direction::LT);
  Value low = add(b, x, mul(b, w, diff));
  Value high = sub(b, e, mul(b, diff, sub(b, scalar_like(b, 1, w), w)));
  return {select(b, small, low, high)};
}

// addcmul/addcdiv: self + value * (t1 op t2)
// self + value * t1 * t2 (or value * t1 / t2), in that order as on the CPU (overflow to inf
// depends on it), in the inputs' promoted type: an integer addcmul wraps around in int before
// it is converted to a floating out= tensor.
// The integer type integer tensors compute in when a float `value` made compute_dtype a float
// one: the CPU converts value to the tensors' type (truncating 0.545 to 0).
DType integer_tensors_type(Context& c, DType compute) {
  if (!is_float(compute)) return compute;
  DType widest = DType::Pred;
  for (size_t i = 0; i < 3; ++i) {
    DType d = c.tensor(i).dtype();
    if (is_float(d) || is_complex(d)) return compute;
    if (d != DType::Pred && (widest == DType::Pred || bit_width(d) > bit_width(widest))) widest = d;
  }
  return widest == DType::Pred ? compute : widest;
}

Rule addc_rule(bool divide) {
  return [divide](Context& c) {
    DType common = integer_tensors_type(c, c.compute_dtype);
    DType t = opmath(common);
    // v * operand i; a bool operand as a select, so that inf * False is NaN as on the CPU
    // (XLA folds a multiplication by a converted bool into a select of 0).
    auto times = [&](Value v, size_t i) {
      if (c.tensor(i).dtype() != DType::Pred) return mul(c.b, v, operand(c, i, t));
      Value if_true = is_complex(v.dtype()) ? times_complex_one(c.b, v) : v;
      return select(c.b, operand(c, i, DType::Pred), if_true, mul(c.b, v, scalar_like(c.b, 0, v)));
    };
    Value x = operand(c, 0, t), d = operand(c, 2, t);
    Value a = c.has(3) ? times(operand(c, 3, t), 1) : operand(c, 1, t);
    Value r = add(c.b, x, divide ? div(c.b, a, d) : times(a, 2));
    return std::vector<Value>{convert(c.b, round_to_common(c.b, r, common), c.out().dtype)};
  };
}

Value sign(Builder& b, Value x) {
  if (x.dtype() == DType::Pred) return x;
  if (is_unsigned(x.dtype())) {
    return convert(b, compare(b, x, scalar_like(b, 0, x), Direction::NE), x.dtype());
  }
  Value s = unary(b, Unary::Sign, x);
  if (!is_float(x.dtype())) return s;
  // sign(NaN) is 0 on the CPU ((0 < x) - (x < 0)); stablehlo.sign keeps the NaN.
  return select(b, compare(b, x, x, Direction::NE), scalar_like(b, 0, x), s);
}

Value reciprocal(Builder& b, Value x) { return div(b, scalar_like(b, 1, x), x); }

// x * k for a real k; a complex x scaled part by part, as the CPU's complex-times-real: a
// complex multiplication turns (-inf + yi) * (k + 0i) into (-inf, NaN).
Value scale_by_real(Builder& b, Value x, double k) {
  if (!is_complex(x.dtype())) return mul(b, x, scalar_like(b, k, x));
  Type rt(real_part(x.dtype()), x.shape());
  Value re = real(b, x), im = imag(b, x);
  Value kv = constant(b, k, rt.dtype, rt.shape);
  return complex(b, mul(b, re, kv), mul(b, im, kv));
}

// log(x) / ln(base); a complex log divided part by part by the real ln(base) as the CPU's
// std::log2/log10 do (a complex division turns log(inf + yi)'s 0 imaginary part into NaN).
Value log_base(Builder& b, Value x, double ln_base) {
  Value l = unary(b, Unary::Log, x);
  if (!is_complex(x.dtype())) return div(b, l, scalar_like(b, ln_base, x));
  Type rt(real_part(x.dtype()), x.shape());
  Value re = real(b, l), im = imag(b, l);
  Value k = constant(b, ln_base, rt.dtype, rt.shape);
  return complex(b, div(b, re, k), div(b, im, k));
}

// Float predicates (isinf, isfinite...): integers and bools are always finite. A complex value
// is finite when both parts are (`value_for_integers` true: the parts' results are and-ed), and
// infinite when either part is (or-ed).
Rule float_predicate(std::function<Value(Builder&, Value)> f, bool value_for_integers) {
  return [f, value_for_integers](Context& c) {
    Value x = c.tensor(0);
    if (is_complex(x.dtype())) {
      Type rt(real_part(x.dtype()), x.shape());
      Value re = f(c.b, real(c.b, x)), im = f(c.b, imag(c.b, x));
      return std::vector<Value>{binary(c.b, value_for_integers ? Binary::And : Binary::Or, re, im)};
    }
    if (!is_float(x.dtype())) {
      return std::vector<Value>{constant(c.b, value_for_integers, DType::Pred, c.out().shape)};
    }
    return std::vector<Value>{f(c.b, x)};
  };
}

Value equals_constant(Builder& b, Value x, double v) { return compare(b, x, scalar_like(b, v, x), Direction::EQ); }

// isin(elements, test_elements, assume_unique, invert): compares every pair (fine for the
// small test sets it is used with, e.g. stop tokens in generate()).
std::vector<Value> isin(Context& c) {
  Builder& b = c.b;
  DType t = c.compute_dtype;
  Value e = convert(b, c.tensor(0), t), test = convert(b, c.tensor(1), t);
  int64_t m = test.type.numel();
  bool invert = c.has(3) && c.bool_arg(3);
  std::vector<int64_t> shape = e.shape();
  if (m == 0) return {constant(b, invert, DType::Pred, shape)};
  std::vector<int64_t> pair_shape = shape;
  pair_shape.push_back(m);
  std::vector<int64_t> dims(shape.size());
  std::iota(dims.begin(), dims.end(), 0);
  Value lhs = broadcast_in_dim(b, e, pair_shape, dims);
  Value rhs = broadcast_in_dim(b, reshape(b, test, {m}), pair_shape, {static_cast<int64_t>(shape.size())});
  Value found = reduce(b, compare(b, lhs, rhs, Direction::EQ), {static_cast<int64_t>(shape.size())}, "or");
  return {invert ? unary(b, Unary::Not, found) : found};
}

// XLA:CPU's vectorized atan (chlo.atan, and atan2(x, 1) which it simplifies to atan) returns
// wrong values for arrays of a few hundred elements. The half-angle form avoids that path:
// atan(x) = 2 atan2(x, 1 + sqrt(1 + x^2)); huge |x| (x^2 overflows) gives +-pi/2 directly.
Value atan(Builder& b, Value x) {
  Value one = scalar_like(b, 1, x);
  Value r = unary(b, Unary::Sqrt, add(b, one, mul(b, x, x)));
  Value half = binary(b, Binary::Atan2, x, add(b, one, r));
  Value a = mul(b, scalar_like(b, 2, x), half);
  Value huge = compare(b, unary(b, Unary::Abs, x), scalar_like(b, 1e18, x), Direction::GT);
  return select(b, huge, mul(b, unary(b, Unary::Sign, x), scalar_like(b, M_PI / 2, x)), a);
}

const Registrar registrar({
    {"add.Tensor", alpha_rule(Binary::Add)},
    {"sub.Tensor", [](Context& c) {
       if (c.tensor(0).dtype() == DType::Pred && c.tensor(1).dtype() == DType::Pred) {
         throw InvalidCall("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.");
       }
       return alpha_rule(Binary::Subtract)(c);
     }},
    {"mul.Tensor", hlo_binary(Binary::Multiply)},
    {"div.Tensor", hlo_binary(Binary::Divide, true)},
    {"div.Tensor_mode", div_mode},
    {"remainder.Tensor", division_rule("remainder_cpu", python_remainder)},
    {"fmod.Tensor", division_rule("fmod_cpu", [](Builder& b, Value x, Value y) { return binary(b, Binary::Remainder, x, y); })},
    {"pow.Tensor_Tensor", hlo_binary(Binary::Power)},
    {"pow.Tensor_Scalar", hlo_binary(Binary::Power)},
    {"pow.Scalar", hlo_binary(Binary::Power)},
    {"maximum", binary_rule([](Builder& b, Value x, Value y) { return nan_propagating(b, Binary::Maximum, x, y); })},
    {"minimum", binary_rule([](Builder& b, Value x, Value y) { return nan_propagating(b, Binary::Minimum, x, y); })},
    {"fmax", binary_rule([](Builder& b, Value x, Value y) { return nan_ignoring(b, Binary::Maximum, x, y); })},
    {"fmin", binary_rule([](Builder& b, Value x, Value y) { return nan_ignoring(b, Binary::Minimum, x, y); })},
    {"atan2", hlo_binary(Binary::Atan2, true)},
    {"bitwise_and.Tensor", bitwise_rule("bitwise_and", Binary::And)},
    {"bitwise_or.Tensor", bitwise_rule("bitwise_or", Binary::Or)},
    {"bitwise_xor.Tensor", bitwise_rule("bitwise_xor", Binary::Xor)},
    {"eq.Tensor", compare_rule(Direction::EQ)}, {"eq.Scalar", compare_rule(Direction::EQ)},
    {"ne.Tensor", compare_rule(Direction::NE)}, {"ne.Scalar", compare_rule(Direction::NE)},
    {"lt.Tensor", compare_rule(Direction::LT)}, {"lt.Scalar", compare_rule(Direction::LT)},
    {"le.Tensor", compare_rule(Direction::LE)}, {"le.Scalar", compare_rule(Direction::LE)},
    {"gt.Tensor", compare_rule(Direction::GT)}, {"gt.Scalar", compare_rule(Direction::GT)},
    {"ge.Tensor", compare_rule(Direction::GE)}, {"ge.Scalar", compare_rule(Direction::GE)},
    {"logical_and", logical_rule(Binary::And)},
    {"logical_or", logical_rule(Binary::Or)},
    {"logical_xor", logical_rule(Binary::Xor)},
    {"logical_not", [](Context& c) {
       Value r = unary(c.b, Unary::Not, cast_to(c.b, c.tensor(0), DType::Pred, c.out().shape));
       return std::vector<Value>{convert(c.b, r, c.out().dtype)};
     }},
    {"bitwise_not", [](Context& c) {
       require_dtype(!is_float(c.tensor(0).dtype()) && !is_complex(c.tensor(0).dtype()), "bitwise_not", c.tensor(0).dtype());
       return hlo_unary(Unary::Not)(c);
     }},
    {"where.self", where},
    {"masked_fill.Scalar", masked_fill},
    {"masked_fill.Tensor", masked_fill},
    {"clamp", clamp}, {"clamp.Tensor", clamp},
    {"clamp_min", clamp_min}, {"clamp_min.Tensor", clamp_min},
    {"clamp_max", clamp_max}, {"clamp_max.Tensor", clamp_max},
    {"abs", [](Context& c) {
       Value z = c.tensor(0);
       if (is_complex(z.dtype())) {  // |z| = hypot(re, im): the modulus, not |re|
         return std::vector<Value>{convert(c.b, complex_abs(c.b, z), c.out().dtype)};
       }
       require_dtype(z.dtype() != DType::Pred, "abs_cpu", z.dtype());
       Value x = operand(c, 0, out_math(c));
       return std::vector<Value>{is_unsigned(x.dtype()) ? x : unary(c.b, Unary::Abs, x)};
     }},
    {"neg", hlo_unary(Unary::Negate)},
    {"sign", unary_rule(sign)},
    {"sgn", unary_rule(sign)},
    {"exp", hlo_unary(Unary::Exponential)},
    {"exp2", unary_rule([](Builder& b, Value x) {
       return unary(b, Unary::Exponential, scale_by_real(b, x, M_LN2));
     })},
    {"expm1", hlo_unary(Unary::ExponentialMinusOne)},
    {"log", hlo_unary(Unary::Log)},
    {"log1p", hlo_unary(Unary::LogPlusOne)},
    {"log2", unary_rule([](Builder& b, Value x) { return log_base(b, x, M_LN2); })},
    {"log10", unary_rule([](Builder& b, Value x) { return log_base(b, x, M_LN10); })},
    {"sqrt", unary_rule(torch_sqrt)},
    {"rsqrt", hlo_unary(Unary::Rsqrt)},
    {"reciprocal", unary_rule(reciprocal)},
    {"sin", hlo_unary(Unary::Sine)},
    {"cos", hlo_unary(Unary::Cosine)},
    {"tan", hlo_unary(Unary::Tan)},
    {"tanh", hlo_unary(Unary::Tanh)},
    {"asin", unary_rule([](Builder& b, Value x) { return complex_branch_cut_aware(b, Unary::Asin, x); })},
    {"acos", unary_rule([](Builder& b, Value x) { return complex_branch_cut_aware(b, Unary::Acos, x); })},
    {"atan", [](Context& c) {
       if (is_complex(c.tensor(0).dtype())) throw NotLowerable("complex atan");
       return unary_rule(atan)(c);
     }},
    {"sinh", hlo_unary(Unary::Sinh)},
    {"cosh", hlo_unary(Unary::Cosh)},
    {"asinh", unary_rule([](Builder& b, Value x) { return complex_branch_cut_aware(b, Unary::Asinh, x); })},
    {"acosh", unary_rule([](Builder& b, Value x) { return complex_branch_cut_aware(b, Unary::Acosh, x); })},
    {"atanh", hlo_unary(Unary::Atanh)},
    {"erf", hlo_unary(Unary::Erf)},
    {"erfc", hlo_unary(Unary::Erfc)},
    {"erfinv", hlo_unary(Unary::ErfInv)},
    {"lgamma", hlo_unary(Unary::Lgamma)},
    // digamma(+-0) = -+inf like PyTorch (older XLA returns NaN there).
    {"digamma", unary_rule([](Builder& b, Value x) {
       Value zero = compare(b, x, scalar_like(b, 0, x), Direction::EQ);
       return select(b, zero, neg(b, reciprocal(b, x)), unary(b, Unary::Digamma, x));
     })},
    {"floor", unary_rule([](Builder& b, Value x) { return is_float(x.dtype()) ? unary(b, Unary::Floor, x) : x; })},
    {"ceil", unary_rule([](Builder& b, Value x) { return is_float(x.dtype()) ? unary(b, Unary::Ceil, x) : x; })},
    {"trunc", unary_rule([](Builder& b, Value x) { return is_float(x.dtype()) ? trunc(b, x) : x; })},
    {"round.decimals", round_decimals},
    {"round", unary_rule([](Builder& b, Value x) { return is_float(x.dtype()) ? unary(b, Unary::RoundNearestEven, x) : x; })},
    {"frac", unary_rule([](Builder& b, Value x) { return sub(b, x, trunc(b, x)); })},
    {"isinf", float_predicate([](Builder& b, Value x) {
       return equals_constant(b, unary(b, Unary::Abs, x), INFINITY);
     }, false)},
    {"isposinf", [](Context& c) {
       if (is_complex(c.tensor(0).dtype())) throw InvalidCall("isposinf does not support complex inputs.");
       return float_predicate([](Builder& b, Value x) { return equals_constant(b, x, INFINITY); }, false)(c);
     }},
    {"isneginf", [](Context& c) {
       if (is_complex(c.tensor(0).dtype())) throw InvalidCall("isneginf does not support complex inputs.");
       return float_predicate([](Builder& b, Value x) { return equals_constant(b, x, -INFINITY); }, false)(c);
     }},
    {"isfinite", float_predicate([](Builder& b, Value x) {
       return unary(b, Unary::IsFinite, x);
     }, true)},
    {"isin.Tensor_Tensor", isin},
    {"isin.Tensor_Scalar", isin},
    {"isin.Scalar_Tensor", isin},
    {"isnan", [](Context& c) {
       Value x = c.tensor(0);
       if (!is_float(x.dtype()) && !is_complex(x.dtype())) {
         return std::vector<Value>{constant(c.b, 0, DType::Pred, c.out().shape)};
       }
       return std::vector<Value>{compare(c.b, x, x, Direction::NE)};  // complex: NaN in either part
     }},
    {"relu", unary_rule(relu)},
    {"sigmoid", unary_rule(sigmoid)},
    {"silu", unary_rule([](Builder& b, Value x) { return mul(b, x, sigmoid(b, x)); })},
    {"gelu", [](Context& c) {
       bool tanh_approx = c.has(1) && c.arg(1).s == "tanh";
       return std::vector<Value>{gelu(c.b, operand(c, 0, out_math(c)), tanh_approx)};
     }},
    {"gelu_backward", gelu_backward},
    {"silu_backward", silu_backward},
    // The CPU's order, g * (1 - y) * y, so products overflow to the same inf; complex grads
    // take the conjugate derivative, g * conj((1 - y) * y).
    {"sigmoid_backward", [](Context& c) {
       DType t = out_math(c);
       Value g = operand(c, 0, t), y = operand(c, 1, t);
       Value one_minus_y = sub(c.b, scalar_like(c.b, 1, y), y);
       if (is_complex(t)) return std::vector<Value>{mul(c.b, g, conjugate(c.b, mul(c.b, one_minus_y, y)))};
       return std::vector<Value>{mul(c.b, mul(c.b, g, one_minus_y), y)};
     }},
    {"tanh_backward", [](Context& c) {  // g * (1 - y * y), conjugated for complex as above
       DType t = out_math(c);
       Value g = operand(c, 0, t), y = operand(c, 1, t);
       Value d = sub(c.b, scalar_like(c.b, 1, y), mul(c.b, y, y));
       return std::vector<Value>{mul(c.b, g, is_complex(t) ? conjugate(c.b, d) : d)};
     }},
    {"threshold_backward", threshold_backward},
    {"softplus", softplus},
    {"softplus_backward", softplus_backward},
    {"leaky_relu", leaky_relu},
    {"hardtanh", hardtanh},
    {"leaky_relu_backward", leaky_relu_backward},
    {"hardtanh_backward", hardtanh_backward},
    {"lerp.Scalar", lerp}, {"lerp.Tensor", lerp},
    {"addcmul", addc_rule(false)},
    {"addcdiv", addc_rule(true)},
});

// An integer divisor of zero raises (assert_nonzero_integer_divisor): checked on the divisor's values.
const ValueChecksRegistrar value_checks({"div.Tensor_mode", "remainder.Tensor", "fmod.Tensor"});

}  // namespace
}  // namespace tpu::lowering
