// The storage model: every tpu storage's DataPtr context is a StorageBuffer holding the
// storage's state and layout.
//
//   state   Unwritten (no buffer: reads see zeros) | Ready (one buffer per shard) | Pending
//           (fused eager: a recorded op writes it; dtype and dims are already those of the
//           result, and reading or replacing the buffer first runs the recorded ops)
//   layout  the buffer's dims: Shaped (the dense N-D shape of the tensor that produced it) or
//           Flat (numel); see program/layout.h and docs/layout.md for why shaped is the default
//   sharding  empty for a single-device storage (the seam for SPMD storages)
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

#include <memory>
#include <string>
#include <vector>

#include "hlo/types.h"
#include "pjrt/buffer.h"
#include "program/layout.h"

namespace tpu::engine {

enum class StorageState { Unwritten, Ready, Pending };

struct StorageBuffer {
  int device = 0;
  size_t nbytes = 0;
  uintptr_t address = 0;  // the storage's data_ptr() (allocator.cc)
  std::vector<std::shared_ptr<pjrt::Buffer>> shards;  // Ready: one per shard
  hlo::DType dtype = hlo::DType::U8;                  // element type of the buffers
  std::vector<int64_t> dims;                          // layout; valid when layout_set
  bool layout_set = false;
  std::string sharding;
  bool growable = false;     // made with spare capacity along a growing dim (engine/growing)
  int8_t appended_along = 0;  // 1 + the dim of the append-shaped cat that made it, 0 if none
  // A growable storage made as a dense tensor with spare rows (engine/growing, as_padded_prefix):
  // its growing axis's stride and capacity, so views of any part of it (a slice of the other
  // dims, a transpose) are recognised as padded prefixes too. 0 when unknown.
  int64_t padded_stride = 0, padded_capacity = 0;
  // A storage padded along two dims with one length (engine/growing, as_padded_square: an
  // attention mask [.., L, L] over a [.., C, C] bucket): the strides of those two dims, outer
  // first (padded_capacity holds C, padded_stride stays 0). 0 when not.
  int64_t square_outer_stride = 0, square_inner_stride = 0;
  bool pending = false;  // a recorded op (engine/fused) writes it; cleared when its buffer is set

  StorageState state() const {
    if (pending) return StorageState::Pending;
    return shards.empty() ? StorageState::Unwritten : StorageState::Ready;
  }
  const std::shared_ptr<pjrt::Buffer>& buffer() const;  // the single-device buffer (or null)
  int64_t numel_of(hlo::DType t) const { return static_cast<int64_t>(nbytes * 8 / hlo::bit_width(t)); }
  int64_t numel() const { return numel_of(dtype); }
  // Makes `buffer` (with shape `dims`) the storage's content.
  void set(std::shared_ptr<pjrt::Buffer> buffer, hlo::DType buffer_dtype, std::vector<int64_t> buffer_dims);
};

// The StorageBuffer behind a tpu tensor (never null for a tpu tensor with storage). A storage
// made by at::from_blob over a live tpu storage's data_ptr() (PyTorch's own serialization does
// this to read a device storage) resolves to that storage.
StorageBuffer& storage_buffer(const at::Tensor& t);
StorageBuffer& storage_buffer(const c10::Storage& s);

// The layout policy for new dense buffers (TORCH_TPU_STORAGE_LAYOUT=shaped|flat).
program::LayoutPolicy layout_policy();
// The layout a new buffer of a dense tensor with `sizes` gets under the policy.
std::vector<int64_t> dense_layout(c10::IntArrayRef sizes);

// Returns the storage's buffer viewed with `dtype` elements, creating zeros if unwritten; a
// Pending storage's recorded ops run first.
// A dtype of another width than the buffer's is re-typed through the host (rare: .view(dtype))
// and becomes flat.
std::shared_ptr<pjrt::Buffer> read_buffer(StorageBuffer& s, hlo::DType dtype);

// Resizes a storage to `nbytes`, keeping the bytes both sizes share (as CPU and CUDA do); new
// bytes are zeros. Backs Tensor.resize_ and untyped_storage().resize_() (FSDP2 frees unsharded
// parameters that way).
void resize_storage_bytes(const c10::Storage& storage, size_t nbytes);

// A new tpu tensor of `sizes`/`strides`/`dtype` whose storage adopts `buffer` (shape
// `buffer_dims`, the whole storage) on `device`.
at::Tensor wrap_buffer(std::shared_ptr<pjrt::Buffer> buffer, hlo::DType buffer_dtype,
                       std::vector<int64_t> buffer_dims, c10::IntArrayRef sizes,
                       c10::IntArrayRef strides, c10::ScalarType dtype, int device);

// A new tpu tensor of `sizes`/`strides`/`dtype` whose storage is Pending: a recorded op
// (engine/fused) will write it as a buffer of `buffer_dims` `buffer_dtype` elements.
at::Tensor pending_tensor(hlo::DType buffer_dtype, std::vector<int64_t> buffer_dims, c10::IntArrayRef sizes,
                          c10::IntArrayRef strides, c10::ScalarType dtype, int device);

}  // namespace tpu::engine
