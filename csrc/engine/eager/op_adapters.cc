#include "engine/eager/op_adapters.h"

#include <ATen/ATen.h>

#include <map>
#include <string>

namespace tpu::engine {

void move_cpu_indices(const c10::OperatorHandle&, torch::jit::Stack* stack, size_t num_args) {
  size_t first = stack->size() - num_args;
  const c10::IValue& self = (*stack)[first];
  if (!self.isTensor() || !self.toTensor().is_privateuseone()) return;
  for (size_t a = 0; a < num_args; ++a) {
    c10::IValue& v = (*stack)[first + a];
    if (!v.isOptionalTensorList()) continue;
    c10::List<std::optional<at::Tensor>> moved;
    bool changed = false;
    const c10::Device device = self.toTensor().device();
    for (const std::optional<at::Tensor> t : v.toOptionalTensorList()) {
      bool on_cpu = t.has_value() && t->defined() && t->device().is_cpu() && t->dim() > 0;
      changed |= on_cpu;
      if (!on_cpu) {
        moved.push_back(t);
      } else if (t->scalar_type() == at::kBool || t->scalar_type() == at::kByte) {
        at::Tensor coords = t->nonzero();
        for (int64_t d = 0; d < t->dim(); ++d) moved.push_back(coords.select(1, d).to(device));
      } else {
        moved.push_back(t->to(device));
      }
    }
    if (changed) v = moved;
  }
}

const OpAdapter* find_adapter(const c10::OperatorName& name) {
  static const OpAdapter cpu_indices{&move_cpu_indices, false};
  static const OpAdapter random_bits{nullptr, true};
  static const std::map<std::string, const OpAdapter*> table{
      {"aten::index", &cpu_indices},
      {"aten::index_put", &cpu_indices},
      {"aten::index_put_", &cpu_indices},
      {"aten::_index_put_impl", &cpu_indices},
      {"aten::_index_put_impl_", &cpu_indices},
      {"aten::native_dropout", &random_bits},
  };
  auto it = table.find(name.name);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace tpu::engine
