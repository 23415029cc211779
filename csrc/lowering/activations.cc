// Activation functions and their backward ops: elu, hardsigmoid, hardswish, glu, logit,
// log_sigmoid, threshold, _add_relu, _prelu_kernel.
//
// Every formula follows PyTorch's CPU kernel branch by branch, so NaN, +-inf and -0.0 land on
// the same side of each comparison as there (e.g. hardswish_backward(NaN) is the gradient,
// hardsigmoid_backward(NaN) is 0). bf16/f16 compute in f32 and round once (opmath).
#include <cmath>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

DType math_type(Context& c, size_t out = 0) { return opmath(c.out(out).dtype); }

// Argument i converted to `t` and broadcast to output 0's shape.
Value operand(Context& c, size_t i, DType t) { return cast_to(c.b, c.tensor(i), t, c.out().shape); }

Value k(Builder& b, double v, const Value& like) { return scalar_like(b, v, like); }
Value lt(Builder& b, Value x, double v) { return compare(b, x, k(b, v, x), Direction::LT); }
Value le(Builder& b, Value x, double v) { return compare(b, x, k(b, v, x), Direction::LE); }
Value gt(Builder& b, Value x, double v) { return compare(b, x, k(b, v, x), Direction::GT); }

std::vector<Value> one(Context& c, Value r) { return {convert(c.b, r, c.out().dtype)}; }

// Dtype gates: where the CPU kernel has no version for a dtype, the rule declines, so the CPU
// fallback raises PyTorch's own NotImplementedError.
void require_float(Context& c, const char* op) {
  if (!is_float(c.out().dtype)) throw NotLowerable(std::string(op) + " of a non-float type");
}
void require_real(Context& c, const char* op) {
  for (const Arg& a : c.args) {
    if (a.kind == Arg::Kind::Tensor && (is_complex(a.tensor.dtype()) || (a.tensor.dtype() == DType::Pred && !a.is_wrapped_scalar))) {
      throw NotLowerable(std::string(op) + " of a complex or bool tensor");
    }
  }
  if (is_complex(c.out().dtype)) throw NotLowerable(std::string(op) + " of a complex type");
}

// elu(self, alpha, scale, input_scale): scale * (x > 0 ? x : alpha * expm1(x * input_scale))
std::vector<Value> elu(Context& c) {
  if (is_complex(c.out().dtype)) throw NotLowerable("elu of a complex type");
  Builder& b = c.b;
  DType t = math_type(c);
  Value x = operand(c, 0, t), alpha = operand(c, 1, t), scale = operand(c, 2, t), in_scale = operand(c, 3, t);
  Value negative = mul(b, mul(b, alpha, scale), unary(b, Unary::ExponentialMinusOne, mul(b, x, in_scale)));
  return one(c, select(b, gt(b, x, 0), mul(b, x, scale), negative));
}

// elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result)
std::vector<Value> elu_backward(Context& c) {
  require_float(c, "elu_backward");
  Builder& b = c.b;
  DType t = math_type(c);
  Value g = operand(c, 0, t), alpha = operand(c, 1, t), scale = operand(c, 2, t), in_scale = operand(c, 3, t);
  Value x = operand(c, 5, t);
  Value neg_coef = mul(b, alpha, scale);
  Value negative = c.bool_arg(4)
      ? mul(b, mul(b, g, in_scale), add(b, x, neg_coef))  // x is the result
      : mul(b, mul(b, mul(b, g, in_scale), neg_coef), unary(b, Unary::Exponential, mul(b, x, in_scale)));
  return one(c, select(b, le(b, x, 0), negative, mul(b, g, scale)));
}

// min(max(x + 3, 0), 6) with NaN kept (comparisons with NaN are false).
Value relu6_shifted(Builder& b, Value x) {
  Value r = add(b, x, k(b, 3, x));
  r = select(b, lt(b, r, 0), k(b, 0, r), r);
  return select(b, gt(b, r, 6), k(b, 6, r), r);
}

std::vector<Value> hardsigmoid(Context& c) {
  require_float(c, "hardsigmoid");
  Value x = operand(c, 0, math_type(c));
  return one(c, div(c.b, relu6_shifted(c.b, x), k(c.b, 6, x)));
}

std::vector<Value> hardsigmoid_backward(Context& c) {  // (grad_output, self)
  require_float(c, "hardsigmoid_backward");
  Builder& b = c.b;
  DType t = math_type(c);
  Value g = operand(c, 0, t), x = operand(c, 1, t);
  Value inside = logical_and(b, gt(b, x, -3), lt(b, x, 3));
  return one(c, select(b, inside, mul(b, g, k(b, 1.0 / 6.0, g)), k(b, 0, g)));
}

std::vector<Value> hardswish(Context& c) {
  require_float(c, "hardswish");
  Value x = operand(c, 0, math_type(c));
  return one(c, div(c.b, mul(c.b, x, relu6_shifted(c.b, x)), k(c.b, 6, x)));
}

std::vector<Value> hardswish_backward(Context& c) {  // (grad_output, self)
  require_float(c, "hardswish_backward");
  Builder& b = c.b;
  DType t = math_type(c);
  Value g = operand(c, 0, t), x = operand(c, 1, t);
  Value mid = mul(b, g, add(b, div(b, x, k(b, 3, x)), k(b, 0.5, x)));
  return one(c, select(b, le(b, x, -3), k(b, 0, g), select(b, lt(b, x, 3), mid, g)));
}

// glu(self, dim) = a * sigmoid(b) for the two halves a, b of `dim` (the meta kernel has
// already checked that the dimension is even).
struct Halves {
  Value a, b;
  int64_t dim;
};
Halves halves(Builder& b, Value x, int64_t dim_arg) {
  int64_t dim = wrap_dim(dim_arg, x.rank());
  int64_t n = x.shape()[dim] / 2;
  std::vector<int64_t> start(x.rank(), 0), limit = x.shape(), strides(x.rank(), 1);
  limit[dim] = n;
  Value first = slice(b, x, start, limit, strides);
  start[dim] = n;
  limit[dim] = 2 * n;
  return {first, slice(b, x, start, limit, strides), dim};
}

std::vector<Value> glu(Context& c) {
  require_float(c, "glu");
  DType t = math_type(c);
  Halves h = halves(c.b, convert(c.b, c.tensor(0), t), c.int_arg(1));
  return one(c, mul(c.b, h.a, unary(c.b, Unary::Logistic, h.b)));
}

std::vector<Value> glu_backward(Context& c) {  // (grad_output, self, dim)
  require_float(c, "glu_backward");
  Builder& b = c.b;
  DType t = math_type(c);
  Halves h = halves(b, convert(b, c.tensor(1), t), c.int_arg(2));
  Value g = convert(b, c.tensor(0), t);
  Value s = unary(b, Unary::Logistic, h.b);
  Value ga = mul(b, g, s);
  Value gb = mul(b, mul(b, mul(b, sub(b, k(b, 1, s), s), s), h.a), g);
  return one(c, concatenate(b, {ga, gb}, h.dim));
}

// eps: `float? eps`; None or negative means no clamping.
double logit_eps(Context& c, size_t i) { return c.has(i) ? c.double_arg(i) : -1.0; }

std::vector<Value> logit(Context& c) {  // (self, eps?)
  if (is_complex(c.out().dtype)) throw NotLowerable("logit of a complex type");
  Builder& b = c.b;
  Value x = operand(c, 0, math_type(c));
  double eps = logit_eps(c, 1);
  if (eps >= 0) {  // clamp to [eps, 1 - eps], NaN kept; x < lo ? lo : x > hi ? hi : x as the
    // CPU, both tests on x (an eps above 0.5 makes lo > hi)
    x = select(b, lt(b, x, eps), k(b, eps, x), select(b, gt(b, x, 1 - eps), k(b, 1 - eps, x), x));
  }
  return one(c, unary(b, Unary::Log, div(b, x, sub(b, k(b, 1, x), x))));
}

std::vector<Value> logit_backward(Context& c) {  // (grad_output, self, eps?)
  require_float(c, "logit_backward");
  Builder& b = c.b;
  DType t = math_type(c);
  Value g = operand(c, 0, t), x = operand(c, 1, t);
  double eps = logit_eps(c, 2);
  Value grad = div(b, g, mul(b, x, sub(b, k(b, 1, x), x)));
  // At x = 0 or 1 the CPU gives grad * inf (so -0.0 does not flip the sign).
  Value edge = logical_or(b, compare(b, x, k(b, 0, x), Direction::EQ), compare(b, x, k(b, 1, x), Direction::EQ));
  grad = select(b, edge, mul(b, g, k(b, INFINITY, g)), grad);
  if (eps < 0) return one(c, select(b, logical_or(b, lt(b, x, 0), gt(b, x, 1)), k(b, NAN, g), grad));
  return one(c, select(b, logical_or(b, lt(b, x, eps), gt(b, x, 1 - eps)), k(b, 0, g), grad));
}

// log_sigmoid_forward(self) -> (output, buffer): min(x, 0) - log1p(exp(-|x|)); the CPU kernel
// stores exp(-|x|) in the buffer for the backward (other devices return an empty buffer).
std::vector<Value> log_sigmoid_forward(Context& c) {
  require_float(c, "log_sigmoid_forward");
  Builder& b = c.b;
  DType t = math_type(c);
  Value x = operand(c, 0, t);
  Value z = unary(b, Unary::Exponential, neg(b, unary(b, Unary::Abs, x)));
  Value m = select(b, lt(b, x, 0), x, k(b, 0, x));  // NaN: the log1p term is NaN anyway
  Value out = sub(b, m, unary(b, Unary::LogPlusOne, z));
  const Type& bt = c.out(1);
  Value buffer = bt.shape == x.shape() ? convert(b, z, bt.dtype) : zeros(b, bt);
  return {convert(b, out, c.out(0).dtype), buffer};
}

// log_sigmoid_backward(grad_output, self, buffer): like the CPU kernel, reads exp(-|x|) from
// the buffer when it holds one, and recomputes it otherwise.
std::vector<Value> log_sigmoid_backward(Context& c) {
  require_float(c, "log_sigmoid_backward");
  Builder& b = c.b;
  DType t = math_type(c);
  Value g = operand(c, 0, t), x = operand(c, 1, t);
  Value buf = c.tensor(2);
  // The CPU reads a non-empty buffer broadcast with the other operands (TensorIterator); an
  // empty one (what other devices' forward returns) is recomputed.
  Value z = buf.type.numel() > 0 && broadcastable(buf.shape(), c.out().shape)
      ? operand(c, 2, t)
      : unary(b, Unary::Exponential, neg(b, unary(b, Unary::Abs, x)));
  Value negative = lt(b, x, 0);
  Value max_deriv = select(b, negative, k(b, 1, x), k(b, 0, x));
  Value sign = select(b, negative, k(b, 1, x), k(b, -1, x));
  Value r = mul(b, g, sub(b, max_deriv, mul(b, sign, div(b, z, add(b, k(b, 1, z), z)))));
  return one(c, r);
}

// threshold(self, threshold, value): x <= threshold ? value : x, in self's type like the CPU:
// an integer self truncates both scalars (value -1.549 gives -1, also into a floating out=);
// a bfloat16/float16 one compares and selects in float32.
std::vector<Value> threshold(Context& c) {
  require_real(c, "threshold");
  Builder& b = c.b;
  DType self = c.tensor(0).dtype(), t = opmath(self);
  auto scalar = [&](size_t i) { return is_float(self) ? operand(c, i, t) : convert(b, operand(c, i, self), t); };
  Value x = operand(c, 0, t), th = scalar(1), v = scalar(2);
  return one(c, select(b, compare(b, x, th, Direction::LE), v, x));
}

// _add_relu(self, other, alpha) = clamp(self + alpha * other, 0, largest finite value), as the
// CPU kernel computes it (so inf becomes the largest float). NaN stays NaN like the CPU's
// vectorized loop (its scalar tail loop gives 0 instead).
double max_finite(DType t) {
  switch (t) {
    case DType::F16: return 65504.0;
    case DType::BF16: return 3.38953138925153547590470800371487866880e+38;
    case DType::F32: return 3.40282346638528859811704183484516925440e+38;
    default: return 1.79769313486231570814527423731704356798e+308;
  }
}

std::vector<Value> add_relu(Context& c) {
  Builder& b = c.b;
  // The CPU kernel has no bf16/f16/bool/complex version: let it raise its error.
  DType out = c.out().dtype;
  if (out == DType::BF16 || out == DType::F16 || out == DType::Pred || is_complex(out)) {
    throw NotLowerable("_add_relu of this dtype");
  }
  // Integer tensors compute in their type with alpha truncated to it, as the CPU's kernel does
  // (a float alpha counts in compute_dtype, which would make the sum a float one).
  DType t = is_integer(out) ? out : opmath(c.compute_dtype);
  Value x = operand(c, 0, t), y = operand(c, 1, t);
  if (c.has(2)) y = mul(b, y, operand(c, 2, t));
  Value s = add(b, x, y);
  // A NaN sum stays NaN, as in the CPU's vectorized loop (and relu); only its scalar tail loop,
  // the last numel % vector-width elements, gives 0 (docs/limits.md).
  s = select(b, lt(b, s, 0), k(b, 0, s), s);
  if (is_float(t)) {
    Value top = convert(b, constant(b, max_finite(c.out().dtype), DType::F64, s.shape()), t);
    s = select(b, compare(b, s, top, Direction::GT), top, s);
  }
  return one(c, s);
}

std::vector<Value> prelu_kernel(Context& c) {  // (self, weight)
  require_float(c, "_prelu_kernel");
  Builder& b = c.b;
  DType t = math_type(c);
  Value x = operand(c, 0, t), w = operand(c, 1, t);
  return one(c, select(b, gt(b, x, 0), x, mul(b, w, x)));
}

// _prelu_kernel_backward(grad_output, self, weight) -> (grad_self, grad_weight), both of the
// broadcast shape (prelu's autograd reduces grad_weight to the weight's shape).
std::vector<Value> prelu_kernel_backward(Context& c) {
  require_float(c, "_prelu_kernel_backward");
  Builder& b = c.b;
  if (c.out(0).shape != c.out(1).shape) throw NotLowerable("_prelu_kernel_backward: grad_weight shape");
  DType t = math_type(c);
  Value g = operand(c, 0, t), x = operand(c, 1, t), w = operand(c, 2, t);
  Value pos = gt(b, x, 0);
  Value gx = select(b, pos, g, mul(b, w, g));
  Value gw = select(b, pos, k(b, 0, g), mul(b, x, g));
  return {convert(b, gx, c.out(0).dtype), convert(b, gw, c.out(1).dtype)};
}

const Registrar registrar({
    {"elu", elu},
    {"elu_backward", elu_backward},
    {"elu_backward.grad_input", elu_backward},
    {"hardsigmoid", hardsigmoid},
    {"hardsigmoid_backward", hardsigmoid_backward},
    {"hardsigmoid_backward.grad_input", hardsigmoid_backward},
    {"hardswish", hardswish},
    {"hardswish_backward", hardswish_backward},
    {"glu", glu},
    {"glu_backward", glu_backward},
    {"glu_backward.grad_input", glu_backward},
    {"logit", logit},
    {"logit_backward", logit_backward},
    {"logit_backward.grad_input", logit_backward},
    {"log_sigmoid_forward", log_sigmoid_forward},
    {"log_sigmoid_forward.output", log_sigmoid_forward},
    {"log_sigmoid_backward", log_sigmoid_backward},
    {"log_sigmoid_backward.grad_input", log_sigmoid_backward},
    {"threshold", threshold},
    {"_add_relu.Tensor", add_relu},
    {"_add_relu.Scalar", add_relu},
    {"_prelu_kernel", prelu_kernel},
    {"_prelu_kernel_backward", prelu_kernel_backward},
});

}  // namespace
}  // namespace tpu::lowering
