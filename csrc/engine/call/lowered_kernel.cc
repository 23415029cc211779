#include "engine/call/lowered_kernel.h"

#include <c10/util/Exception.h>

#include <atomic>

namespace tpu::engine {
namespace {
std::atomic<LoweredKernel> g_kernel{nullptr};
}  // namespace

void install_lowered_kernel(LoweredKernel kernel) { g_kernel.store(kernel); }

void run_lowered(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  LoweredKernel kernel = g_kernel.load();
  TORCH_INTERNAL_ASSERT(kernel != nullptr, "the eager driver has not installed its kernel");
  kernel(op, stack);
}

}  // namespace tpu::engine
