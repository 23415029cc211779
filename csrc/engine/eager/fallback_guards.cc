#include "engine/eager/fallback_guards.h"

#include <c10/util/Exception.h>

#include <string>
#include <vector>

namespace tpu::engine {
namespace {

// The argument positions of the lists that hold one tensor per parameter (argument 0); an
// empty optional list (momentum buffers, max_exp_avg_sqs) is allowed.
std::vector<size_t> per_parameter_lists(const std::string& name) {
  if (name.rfind("aten::_fused_adam", 0) == 0) return {1, 2, 3, 4};  // also _fused_adamw
  if (name.rfind("aten::_fused_sgd", 0) == 0) return {1, 2};
  if (name.rfind("aten::_fused_adagrad", 0) == 0) return {1, 2};
  return {};
}

}  // namespace

void check_before_cpu_fallback(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const c10::OperatorName& name = op.schema().operator_name();
  std::vector<size_t> lists = per_parameter_lists(name.name);
  if (lists.empty()) return;
  size_t first = stack.size() - op.schema().arguments().size();
  std::string label = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
  std::vector<at::Tensor> params = stack[first].toTensorList().vec();
  for (size_t a : lists) {
    std::vector<at::Tensor> l = stack[first + a].toTensorList().vec();
    if (l.empty() && a != 1) continue;
    TORCH_CHECK_VALUE(l.size() == params.size(), label, ": argument ", a, " has ", l.size(), " tensors for ",
                      params.size(), " parameters");
    for (size_t i = 0; i < l.size(); ++i) {
      TORCH_CHECK_VALUE(l[i].sizes() == params[i].sizes(), label, ": tensor ", i, " of argument ", a,
                        " has shape ", l[i].sizes(), ", its parameter ", params[i].sizes());
    }
  }
}

}  // namespace tpu::engine
