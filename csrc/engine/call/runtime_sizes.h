// Runtime sizes of an eager call's tensors (engine/growing/bucketed_ops.cc): while a scope is
// open on this thread, a listed tensor (the whole capacity of a padded prefix) is read into the
// op's module with its dim `dim` holding `length` rows, `length` a runtime parameter
// (hlo/runtime_size.h), so the module depends on the capacity only and XLA masks the rows past
// the length in every reduction and contraction. A square (engine/growing: [L, L] of a [C, C]
// bucket) holds `length` rows along `dim2` too.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace tpu::engine {

struct RuntimeSize {
  const c10::TensorImpl* tensor = nullptr;
  int64_t dim = 0;
  int64_t length = 0;
  int64_t dim2 = -1;
};

class RuntimeSizeScope {
 public:
  explicit RuntimeSizeScope(std::vector<RuntimeSize> sizes);
  ~RuntimeSizeScope();
  RuntimeSizeScope(const RuntimeSizeScope&) = delete;
  RuntimeSizeScope& operator=(const RuntimeSizeScope&) = delete;

 private:
  std::vector<RuntimeSize> previous_;
};

// The runtime size of `t` in the open scope, or nullptr (always, outside a scope).
const RuntimeSize* runtime_size_of(const at::Tensor& t);

}  // namespace tpu::engine
