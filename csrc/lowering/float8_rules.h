// Float8 helpers for rules (float8_rules.cc).
#pragma once

#include <vector>

#include "lowering/registry.h"

namespace tpu::lowering {

// PyTorch promotes no float8 type with another type: cat of float8 and float32 raises its error.
void refuse_float8_promotion(const std::vector<Value>& xs);

}  // namespace tpu::lowering
