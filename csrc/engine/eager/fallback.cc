#include "engine/eager/fallback.h"

#include <ATen/native/CPUFallback.h>
#include <c10/util/Logging.h>
#include <torch/library.h>

#include <mutex>
#include <set>

#include "engine/compile/metrics.h"
#include "engine/eager/op_adapters.h"

namespace tpu::engine {

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  check_before_cpu_fallback(op, *stack);
  // Run first: a call that raises (bad input) is the user's error, not a fallback to report.
  at::native::cpu_fallback(op, stack, /*error_on_views=*/false);
  const auto& name = op.schema().operator_name();
  std::string full = name.name.substr(name.name.find("::") + 2) +
                     (name.overload_name.empty() ? "" : "." + name.overload_name);
  count_fallback(full);
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(full).second) {
    TORCH_WARN("torch-tpu: ", full, " ran on the CPU (no tpu lowering for this call; inputs "
               "were copied to the host and back). Counted in torch_tpu.metrics.report().");
  }
}

namespace {
void fallback_boxed(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  cpu_fallback(op, stack);
}
}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback_boxed>());
}

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

}  // namespace tpu::engine
