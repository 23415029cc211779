#include "engine/call/runtime_sizes.h"

namespace tpu::engine {
namespace {
thread_local std::vector<RuntimeSize> t_sizes;
}  // namespace

RuntimeSizeScope::RuntimeSizeScope(std::vector<RuntimeSize> sizes) : previous_(std::move(t_sizes)) {
  t_sizes = std::move(sizes);
}

RuntimeSizeScope::~RuntimeSizeScope() { t_sizes = std::move(previous_); }

const RuntimeSize* runtime_size_of(const at::Tensor& t) {
  if (t_sizes.empty()) return nullptr;
  for (const RuntimeSize& s : t_sizes) {
    if (s.tensor == t.unsafeGetTensorImpl()) return &s;
  }
  return nullptr;
}

}  // namespace tpu::engine
