// CPU fallback (tier 2 in docs/ARCHITECTURE.md) for ops without a lowering rule.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace tpu::engine {

// Copies inputs to CPU, runs the op there, copies results back; warns once per op and counts.
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// Ops with hand-written kernels (allocation, views, copies) rather than lowering rules.
bool is_explicit_kernel(const c10::OperatorName& name);

}  // namespace tpu::engine
