// The generic eager kernel: one boxed function runs every op that has a lowering rule.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/eager/plan.h"
#include "engine/eager_driver.h"

namespace tpu::engine {

void boxed_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack);
// Runs `op` through the engine (used by copy_/fill paths that build their own stacks).
void run_op(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// The strict plan of a call signature: the cached one, or `build()`'s, cached and counted as
// the eager kernel counts its own (fused eager runs a stream op by op with them).
std::shared_ptr<Plan> plan_for_call(const c10::OperatorHandle& op, const std::vector<int64_t>& key,
                                    const std::function<std::shared_ptr<Plan>()>& build);

// The lowering rule name serving an ATen op ("add_.Tensor" -> "add.Tensor"), or "".
std::string rule_for(const c10::OperatorName& name);

}  // namespace tpu::engine
