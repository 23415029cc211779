#include "engine/call/promotion.h"

#include "engine/device/dtypes.h"

namespace tpu::engine {

template <class Operand>
void Promotion::update(const Operand& operand) {
  if (float8_mixed_) return;
  try {
    state_ = at::native::update_result_type_state(operand, state_);
    any_ = true;
  } catch (const c10::Error&) {
    if (!saw_float8_) throw;
    float8_mixed_ = true;
  }
}

void Promotion::add(const at::Tensor& t) {
  saw_float8_ |= at::isFloat8Type(t.scalar_type());
  update(t);
}

void Promotion::add(const c10::Scalar& s) { update(s); }

hlo::DType Promotion::result() const {
  if (float8_mixed_) return hlo::DType::F32;
  c10::ScalarType t = any_ ? at::native::result_type(state_) : c10::kFloat;
  return is_supported(t) ? to_hlo(t) : hlo::DType::F32;
}

}  // namespace tpu::engine
