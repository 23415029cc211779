#include "engine/growing/growing_dims.h"

#include "engine/device/storage.h"

#include <cstdlib>
#include <cstring>

namespace tpu::engine {

std::optional<int64_t> padded_capacity(const at::Tensor& t, int64_t dim) {
  if (!t.defined() || !t.is_privateuseone() || t.dim() == 0 || t.storage_offset() != 0 || t.numel() == 0) {
    return std::nullopt;
  }
  if (!storage_buffer(t).growable) return std::nullopt;
  int64_t rows = t.size(dim);
  int64_t others = t.numel() / rows;
  int64_t storage_elems = static_cast<int64_t>(t.storage().nbytes() / t.element_size());
  if (storage_elems % others != 0) return std::nullopt;
  int64_t capacity = storage_elems / others;
  if (capacity < rows) return std::nullopt;
  int64_t expected = 1;
  for (int64_t i = t.dim() - 1; i >= 0; --i) {
    int64_t extent = i == dim ? capacity : t.size(i);
    if (t.size(i) != 1 && t.stride(i) != expected) return std::nullopt;
    expected *= extent;
  }
  return capacity;
}

void mark_growable(const at::Tensor& t) { storage_buffer(t).growable = true; }

at::Tensor whole_capacity(const at::Tensor& t, int64_t dim, int64_t capacity) {
  std::vector<int64_t> sizes = t.sizes().vec();
  sizes[dim] = capacity;
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= sizes[i];
  }
  return t.as_strided(sizes, strides, 0);
}

int64_t capacity_for(int64_t length) {
  int64_t c = 128;
  while (c < length) c *= 2;
  return c;
}

bool growing_dims_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("TORCH_TPU_GROWING_DIMS");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

}  // namespace tpu::engine
