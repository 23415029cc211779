// The kernel that runs an ATen op through its lowering rule on the tpu. The eager driver
// installs it; code that rewrites a call's arguments first and then hands the call on
// (engine/growing: a padded prefix's whole capacity, a bucketed length) runs it through here
// without depending on the driver.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace tpu::engine {

using LoweredKernel = void (*)(const c10::OperatorHandle& op, torch::jit::Stack* stack);

void install_lowered_kernel(LoweredKernel kernel);
// Runs `op` on the stack's last arguments and leaves its returns there.
void run_lowered(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace tpu::engine
