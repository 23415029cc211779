// The generic eager kernel: one boxed function runs every op that has a lowering rule.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>

#include "engine/eager_driver.h"

namespace tpu::engine {

void boxed_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack);
// Runs `op` through the engine (used by copy_/fill paths that build their own stacks).
void run_op(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// The lowering rule name serving an ATen op ("add_.Tensor" -> "add.Tensor"), or "".
std::string rule_for(const c10::OperatorName& name);

}  // namespace tpu::engine
