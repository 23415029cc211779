// view() of a growing tensor (growing_dims.h). A padded prefix with more than one row before the
// growing dim is not contiguous, so view(-1) of generate()'s ids after two appends would raise
// where the CPU's contiguous cat result views fine. When no other tensor shares its storage,
// the tensor is first moved into a dense storage of its own (same values, same tensor object),
// which is what the CPU's layout would have been; then the view is the CPU's. Shared storages
// (other views alias it) keep PyTorch's error: moving one alias would split them.
#include <ATen/ATen.h>
#include <ATen/InferSize.h>
#include <ATen/TensorUtils.h>
#include <ATen/ops/_unsafe_view_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include "engine/device/storage.h"
#include "engine/growing/growing_dims.h"

namespace tpu::engine {
namespace {

bool viewable(const at::Tensor& self, c10::IntArrayRef size) {
  at::DimVector shape = at::infer_size_dv(size, self.numel());
  return at::detail::computeStride(self.sizes(), self.strides(), shape).has_value();
}

void make_dense_if_growing(const at::Tensor& self) {
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  if (!self.is_privateuseone() || !storage_buffer(self).growable || self.storage_offset() != 0 ||
      self.storage().use_count() != 1 || !impl->allow_tensor_metadata_change()) {
    return;
  }
  // A copy into a dense tensor, not clone: clone(contiguous) of a square mask or a repeat keeps
  // its spare rows (bucketed_ops.cc).
  at::Tensor dense = at::empty(self.sizes(), self.options()).copy_(self);
  impl->set_storage_keep_dtype(dense.storage());
  impl->set_sizes_and_strides(self.sizes(), dense.strides());
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) {
  if (!viewable(self, size)) make_dense_if_growing(self);
  return at::native::view(self, size);
}

// reshape's view of its own copy (at::_unsafe_view(self.clone(contiguous), shape)): the copy of a
// repeated padded prefix keeps its spare rows (bucketed_ops.cc), so a shape that merges the
// padded dim with the ones before it needs the dense copy reshape meant to make.
at::Tensor unsafe_view(const at::Tensor& self, c10::IntArrayRef size) {
  if (!viewable(self, size)) make_dense_if_growing(self);
  return at::native::_unsafe_view(self, size);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("view", view);
  m.impl("_unsafe_view", unsafe_view);
}

}  // namespace
}  // namespace tpu::engine
