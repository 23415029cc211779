#include "hlo/runtime_size.h"

#include <stdexcept>

#include "hlo/ops.h"

namespace tpu::hlo {

Value with_runtime_size(Builder& b, Value x, int64_t dim, Value size) {
  if (dim < 0 || dim >= x.rank()) throw std::invalid_argument("with_runtime_size: dim out of range");
  Type bounded = x.type;
  bounded.bounded_dim = static_cast<int>(dim);
  Value n = convert(b, size, DType::S32);  // set_dimension_size takes an i32 size
  Value dynamic = b.emit1("stablehlo.set_dimension_size", {x, n}, bounded, "dimension = " + std::to_string(dim) + " : i64");
  // Back to the static type: a same-type convert that XLA folds, after which ops print as usual.
  return b.emit1("stablehlo.convert", {dynamic}, x.type);
}

Value static_result(Builder& b, Value x) {
  // A dim's size set back to its bound, a constant, is static again for the compiler (checked:
  // tools/bounded_dynamism_study.cc; writing the value into zeros is not). Which dims are
  // dynamic is the compiler's knowledge, so every dim is reset.
  for (int64_t d = 0; d < x.rank(); ++d) x = with_runtime_size(b, x, d, constant(b, static_cast<double>(x.shape()[d]), DType::S32));
  return x;
}

}  // namespace tpu::hlo
