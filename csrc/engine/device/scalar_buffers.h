// Small device buffers for runtime scalars (Scalar operands, storage offsets, RNG keys).
#pragma once

#include <c10/core/Scalar.h>

#include <memory>

#include "hlo/types.h"
#include "pjrt/buffer.h"

namespace tpu::engine {

// Cached by (device, dtype, value): a loop reusing a learning rate uploads it once.
std::shared_ptr<pjrt::Buffer> scalar_buffer(int device, hlo::DType dtype, const c10::Scalar& value);
std::shared_ptr<pjrt::Buffer> key_buffer(int device, uint64_t seed, uint64_t offset);

}  // namespace tpu::engine
