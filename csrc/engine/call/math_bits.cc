#include "engine/call/math_bits.h"

#include <ATen/Functions.h>

namespace tpu::engine {

at::Tensor stored_elements(const at::Tensor& t) {
  if (!has_math_bits(t)) return t;
  at::Tensor alias = at::alias(t);
  alias._set_conj(false);
  alias._set_neg(false);
  return alias;
}

at::Tensor elements_for(const at::Tensor& dst, const at::Tensor& src) {
  at::Tensor v = stored_elements(src);
  // Stored = conj^c(neg^n(value)); both maps are involutions and commute, so only the bits
  // that differ between source and destination need applying.
  if (src.is_conj() != dst.is_conj() && v.is_complex()) v = at::conj_physical(v);
  if (src.is_neg() != dst.is_neg()) v = at::neg(v);
  return v;
}

namespace {

bool writes(const c10::Argument& a) { return a.alias_info() && a.alias_info()->isWrite(); }

at::Tensor resolved(const at::Tensor& t) {
  if (!has_math_bits(t)) return t;
  at::Tensor plain = at::empty_like(stored_elements(t));
  return plain.copy_(t);  // the copy applies the bits (basic_ops.cc)
}

}  // namespace

bool resolve_math_bit_arguments(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t num_args) {
  const auto& args = op.schema().arguments();
  size_t first = stack->size() - num_args;
  for (size_t a = 0; a < num_args; ++a) {
    const c10::IValue& v = (*stack)[first + a];
    if (!writes(args[a])) continue;
    if (v.isTensor() && has_math_bits(v.toTensor())) return false;
    if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) if (has_math_bits(t)) return false;
    }
  }
  for (size_t a = 0; a < num_args; ++a) {
    c10::IValue& v = (*stack)[first + a];
    if (v.isTensor()) {
      if (has_math_bits(v.toTensor())) v = resolved(v.toTensor());
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> items = v.toTensorVector();
      for (at::Tensor& t : items) t = resolved(t);
      v = items;
    } else if (v.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> items;
      for (const std::optional<at::Tensor> t : v.toOptionalTensorList()) {
        items.push_back(t.has_value() ? std::optional<at::Tensor>(resolved(*t)) : std::nullopt);
      }
      v = items;
    }
  }
  return true;
}

}  // namespace tpu::engine
