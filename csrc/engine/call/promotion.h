// torch.result_type of a call's operands: the compute dtype every driver hands a rule.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/native/TypeProperties.h>

#include "hlo/types.h"

namespace tpu::engine {

class Promotion {
 public:
  void add(const at::Tensor& t);  // a meta tensor of the operand's dtype and shape is enough
  void add(const c10::Scalar& s);
  // The promoted dtype; float32 when nothing was added or the type is not one the engine
  // lowers, and for float8 mixed with another type, which PyTorch promotes neither way (the
  // meta kernel raises where the op needs a common type; the rules use their result types).
  hlo::DType result() const;

 private:
  template <class Operand>
  void update(const Operand& operand);

  at::native::ResultTypeState state_;
  bool any_ = false;
  bool saw_float8_ = false;
  bool float8_mixed_ = false;
};

}  // namespace tpu::engine
