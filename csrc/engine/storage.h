// The storage model (DESIGN.md section 4): every tpu storage's DataPtr context owns the PJRT
// buffer currently holding the whole storage, as a 1-D array of `dtype` elements.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

#include <memory>

#include "hlo/types.h"
#include "pjrt/buffer.h"

namespace tpu::engine {

struct StorageBuffer {
  int device = 0;
  size_t nbytes = 0;
  // Null until first written: reading an unwritten storage yields zeros.
  std::shared_ptr<pjrt::Buffer> buffer;
  hlo::DType dtype = hlo::DType::U8;  // element type of `buffer`

  int64_t numel() const { return static_cast<int64_t>(nbytes * 8 / hlo::bit_width(dtype)); }
};

// The StorageBuffer behind a tpu tensor (never null for a tpu tensor with storage).
StorageBuffer& storage_buffer(const at::Tensor& t);
StorageBuffer& storage_buffer(const c10::Storage& s);

// Returns the storage's buffer viewed with `dtype` elements, creating zeros if unwritten.
// A dtype of another width than the buffer's is re-typed through the host (rare: .view(dtype)).
std::shared_ptr<pjrt::Buffer> read_buffer(StorageBuffer& s, hlo::DType dtype);

// A new tpu tensor of `sizes`/`strides`/`dtype` whose storage adopts `buffer` (1-D, numel of
// the storage) on `device`.
at::Tensor wrap_buffer(std::shared_ptr<pjrt::Buffer> buffer, hlo::DType buffer_dtype,
                       c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::ScalarType dtype,
                       int device);

}  // namespace tpu::engine
