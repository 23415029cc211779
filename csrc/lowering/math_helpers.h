// Small math helpers shared by the rule files: the type an op computes in, and constants
// shaped like a value. Torch-free, like the rest of the lowering layer.
#pragma once

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

}  // namespace tpu::lowering
