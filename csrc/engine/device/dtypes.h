// torch ScalarType <-> StableHLO element type <-> PJRT buffer type.
#pragma once

#include <c10/core/ScalarType.h>

#include "hlo/types.h"
#include "pjrt/pjrt_abi.h"

namespace tpu::engine {

// Throws a c10::TypeError naming `op` for dtypes the device does not support.
hlo::DType to_hlo(c10::ScalarType t, const char* op = "tpu");
c10::ScalarType to_torch(hlo::DType t);
pjrt::abi::BufferType to_pjrt(hlo::DType t);
bool is_supported(c10::ScalarType t);

}  // namespace tpu::engine
