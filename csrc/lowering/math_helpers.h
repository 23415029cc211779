// Small math helpers shared by the rule files: the type an op computes in, and constants
// shaped like a value. Torch-free, like the rest of the lowering layer.
#pragma once

#include <string>

#include "hlo/builder.h"
#include "hlo/ops.h"

namespace tpu::lowering {

// PyTorch's "opmath" type: bf16/f16 are computed in f32 and rounded once at the end; every
// other type is computed as itself.
inline hlo::DType opmath(hlo::DType t) {
  return (t == hlo::DType::BF16 || t == hlo::DType::F16) ? hlo::DType::F32 : t;
}

// The float type that random draws and float factories compute in: f64 for f64, else f32
// (also for integer and low-precision results).
inline hlo::DType float_opmath(hlo::DType t) { return t == hlo::DType::F64 ? hlo::DType::F64 : hlo::DType::F32; }

// The constant `v` with x's dtype and shape.
inline hlo::Value scalar_like(hlo::Builder& b, double v, const hlo::Value& x) {
  return hlo::constant(b, v, x.dtype(), x.shape());
}

// maximum/minimum with PyTorch's NaN rule: a NaN in either operand gives NaN
// (stablehlo.maximum on XLA:CPU keeps only the first operand's NaN). `op` is
// "stablehlo.maximum" or "stablehlo.minimum"; same-typed operands.
inline hlo::Value nan_propagating(hlo::Builder& b, const std::string& op, hlo::Value x, hlo::Value y) {
  hlo::Value r = hlo::binary(b, op, x, y);
  if (!hlo::is_float(x.dtype())) return r;
  hlo::Value any_nan = hlo::binary(b, "stablehlo.or", hlo::compare(b, x, x, "NE"), hlo::compare(b, y, y, "NE"));
  return hlo::select(b, any_nan, hlo::add(b, x, y), r);
}

// fmax/fmin: a NaN operand is ignored unless both are NaN.
inline hlo::Value nan_ignoring(hlo::Builder& b, const std::string& op, hlo::Value x, hlo::Value y) {
  hlo::Value r = hlo::binary(b, op, x, y);
  if (!hlo::is_float(x.dtype())) return r;
  r = hlo::select(b, hlo::compare(b, x, x, "NE"), y, r);
  return hlo::select(b, hlo::compare(b, y, y, "NE"), x, r);
}

}  // namespace tpu::lowering
