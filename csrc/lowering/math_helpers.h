// Small math helpers shared by the rule files: the type an op computes in, and constants
// shaped like a value. Torch-free, like the rest of the lowering layer.
#pragma once

#include <cmath>
#include <string>

#include "hlo/builder.h"
#include "hlo/ops.h"

namespace tpu::lowering {

// PyTorch's "opmath" type: bf16/f16/float8 are computed in f32 and rounded once at the end;
// every other type is computed as itself.
inline hlo::DType opmath(hlo::DType t) {
  return (t == hlo::DType::BF16 || t == hlo::DType::F16 || hlo::is_float8(t)) ? hlo::DType::F32 : t;
}

// The float type that random draws and float factories compute in: f64 for f64, else f32
// (also for integer and low-precision results).
// Batch norm's training invstd as PyTorch's InvStd: 0 where var and eps are both 0 (a channel
// of one value with eps = 0), else 1 / sqrt(var + eps).
inline hlo::Value batch_norm_invstd(hlo::Builder& b, hlo::Value var, double eps) {
  hlo::Value r = hlo::unary(b, hlo::Unary::Rsqrt, hlo::add(b, var, hlo::constant(b, eps, var.dtype(), var.shape())));
  if (eps != 0) return r;
  hlo::Value zero = hlo::zeros(b, var.type);
  return hlo::select(b, hlo::compare(b, var, zero, hlo::Direction::EQ), zero, r);
}

inline hlo::DType float_opmath(hlo::DType t) { return t == hlo::DType::F64 ? hlo::DType::F64 : hlo::DType::F32; }

// The constant `v` with x's dtype and shape.
inline hlo::Value scalar_like(hlo::Builder& b, double v, const hlo::Value& x) {
  return hlo::constant(b, v, x.dtype(), x.shape());
}

// maximum/minimum with PyTorch's NaN rule: a NaN in either operand gives NaN
// (stablehlo.maximum on XLA:CPU keeps only the first operand's NaN). `op` is
// hlo::Binary::Maximum or hlo::Binary::Minimum; same-typed operands.
// alpha * y as PyTorch's CPU add/sub/rsub compute it on contiguous tensors (its vectorized
// path): alpha cast to the tensors' dtype `common` first (1.997 is 2.0 in bfloat16), then the
// product and the sum in y's (float) type, rounded once. (Its scalar loop over non-contiguous
// bfloat16/float16 tensors also rounds the product: docs/limits.md.)
inline hlo::Value times_alpha(hlo::Builder& b, hlo::Value y, hlo::Value alpha, hlo::DType common) {
  hlo::Value a = hlo::broadcast_in_dim(b, hlo::convert(b, hlo::convert(b, alpha, common), y.dtype()), y.shape(), {});
  return hlo::mul(b, y, a);
}

inline hlo::Value nan_propagating(hlo::Builder& b, hlo::Binary op, hlo::Value x, hlo::Value y) {
  hlo::Value r = hlo::binary(b, op, x, y);
  if (!hlo::is_float(x.dtype())) return r;
  hlo::Value any_nan = hlo::binary(b, hlo::Binary::Or, hlo::compare(b, x, x, hlo::Direction::NE), hlo::compare(b, y, y, hlo::Direction::NE));
  return hlo::select(b, any_nan, hlo::add(b, x, y), r);
}

// fmax/fmin: a NaN operand is ignored unless both are NaN.
inline hlo::Value nan_ignoring(hlo::Builder& b, hlo::Binary op, hlo::Value x, hlo::Value y) {
  hlo::Value r = hlo::binary(b, op, x, y);
  if (!hlo::is_float(x.dtype())) return r;
  r = hlo::select(b, hlo::compare(b, x, x, hlo::Direction::NE), y, r);
  return hlo::select(b, hlo::compare(b, y, y, hlo::Direction::NE), x, r);
}

// sigmoid. Complex: the CPU's vectorized 1 / (1 + exp(-z)) with the reciprocal as
// (re - i im) / (re^2 + im^2), so where exp(-z) overflows the result is NaN there too
// (stablehlo.logistic gives 0).
inline hlo::Value torch_sigmoid(hlo::Builder& b, hlo::Value x) {
  if (!hlo::is_complex(x.dtype())) return hlo::unary(b, hlo::Unary::Logistic, x);
  hlo::Value d = hlo::add(b, scalar_like(b, 1, x), hlo::unary(b, hlo::Unary::Exponential, hlo::neg(b, x)));
  hlo::Type rt(x.dtype() == hlo::DType::C64 ? hlo::DType::F32 : hlo::DType::F64, x.shape());
  hlo::Value re = hlo::real(b, d), im = hlo::imag(b, d);
  hlo::Value abs2 = hlo::add(b, hlo::mul(b, re, re), hlo::mul(b, im, im));
  return hlo::complex(b, hlo::div(b, re, abs2), hlo::div(b, hlo::neg(b, im), abs2));
}

// sqrt. Complex: the imaginary part of sqrt(re ± 0i) takes the zero's sign (C99 csqrt, the
// CPU's std::sqrt); XLA gives +0 / a positive imaginary part for -0.
inline hlo::Value torch_sqrt(hlo::Builder& b, hlo::Value x) {
  hlo::Value r = hlo::unary(b, hlo::Unary::Sqrt, x);
  if (!hlo::is_complex(x.dtype())) return r;
  hlo::Type rt(x.dtype() == hlo::DType::C64 ? hlo::DType::F32 : hlo::DType::F64, x.shape());
  hlo::Value im_x = hlo::imag(b, x);
  hlo::Value re_r = hlo::real(b, r), im_r = hlo::imag(b, r);
  hlo::Value zero = hlo::constant(b, 0, rt.dtype, rt.shape), one = hlo::constant(b, 1, rt.dtype, rt.shape);
  // A zero's sign shows in 1/zero = ±inf.
  hlo::Value negative_zero = hlo::binary(b, hlo::Binary::And, hlo::compare(b, im_x, zero, hlo::Direction::EQ),
                                         hlo::compare(b, hlo::div(b, one, im_x), zero, hlo::Direction::LT));
  hlo::Value positive_zero = hlo::binary(b, hlo::Binary::And, hlo::compare(b, im_x, zero, hlo::Direction::EQ),
                                         hlo::compare(b, hlo::div(b, one, im_x), zero, hlo::Direction::GT));
  hlo::Value magnitude = hlo::unary(b, hlo::Unary::Abs, im_r);
  hlo::Value signed_im = hlo::select(b, negative_zero, hlo::neg(b, magnitude),
                                     hlo::select(b, positive_zero, magnitude, im_r));
  // C99's infinities, which XLA's formula turns into NaN: sqrt(x ± i inf) = inf ± i inf for
  // every x (NaN too); sqrt(-inf + i NaN) = NaN + i inf; sqrt(inf + i NaN) = inf + i NaN.
  hlo::Value re_x = hlo::real(b, x);
  hlo::Value inf = hlo::constant(b, INFINITY, rt.dtype, rt.shape), nan = hlo::constant(b, NAN, rt.dtype, rt.shape);
  hlo::Value im_inf = hlo::compare(b, hlo::unary(b, hlo::Unary::Abs, im_x), inf, hlo::Direction::EQ);
  hlo::Value im_nan = hlo::compare(b, im_x, im_x, hlo::Direction::NE);
  hlo::Value re_pos_inf = hlo::binary(b, hlo::Binary::And, im_nan, hlo::compare(b, re_x, inf, hlo::Direction::EQ));
  hlo::Value re_neg_inf = hlo::binary(b, hlo::Binary::And, im_nan, hlo::compare(b, re_x, hlo::neg(b, inf), hlo::Direction::EQ));
  hlo::Value re = hlo::select(b, hlo::binary(b, hlo::Binary::Or, im_inf, re_pos_inf), inf,
                              hlo::select(b, re_neg_inf, nan, re_r));
  hlo::Value im = hlo::select(b, im_inf, im_x, hlo::select(b, re_neg_inf, inf, hlo::select(b, re_pos_inf, nan, signed_im)));
  return hlo::complex(b, re, im);
}

// Reduces `x` over `dim` and broadcasts the result back to x's shape (softmax-style rules).
inline hlo::Value reduce_keep(hlo::Builder& b, hlo::Value x, int64_t dim, const std::string& kind) {
  hlo::Value r = hlo::reduce(b, x, {dim}, kind);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.rank(); ++i) if (i != dim) dims.push_back(i);
  return hlo::broadcast_in_dim(b, r, x.shape(), dims);
}

}  // namespace tpu::lowering
