// view() of a growing tensor (growing_dims.h). A padded prefix with more than one row before the
// growing dim is not contiguous, so view(-1) of generate()'s ids after two appends would raise
// where the CPU's contiguous cat result views fine. When no other tensor shares its storage,
// the tensor is first moved into a dense storage of its own (same values, same tensor object),
// which is what the CPU's layout would have been; then the view is the CPU's. Shared storages
// (other views alias it) keep PyTorch's error: moving one alias would split them. A slice of
// the first L rows of a tensor that fills a live bucket of L is a padded prefix of it.
#include <ATen/ATen.h>
#include <ATen/InferSize.h>
#include <ATen/TensorUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_unsafe_view_native.h>
#include <ATen/ops/slice_native.h>
#include <ATen/ops/view_native.h>
#include <c10/util/strides.h>
#include <torch/library.h>

#include "engine/device/storage.h"
#include "engine/growing/growing_dims.h"

namespace tpu::engine {
namespace {

bool viewable(const at::Tensor& self, c10::IntArrayRef size) {
  at::DimVector shape = at::infer_size_dv(size, self.numel());
  return at::detail::computeStride(self.sizes(), self.strides(), shape).has_value();
}

bool owns_growable_storage(const at::Tensor& self) {
  return self.is_privateuseone() && storage_buffer(self).growable && self.storage_offset() == 0 &&
         self.storage().use_count() == 1 && self.unsafeGetTensorImpl()->allow_tensor_metadata_change();
}

void make_dense_if_growing(const at::Tensor& self) {
  if (!owns_growable_storage(self)) return;
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  // A copy into a dense tensor, not clone: clone(contiguous) of a square mask or a repeat keeps
  // its spare rows (bucketed_ops.cc).
  at::Tensor dense = at::empty(self.sizes(), self.options()).copy_(self);
  impl->set_storage_keep_dtype(dense.storage());
  impl->set_sizes_and_strides(self.sizes(), dense.strides());
}

// Moves `self` into the bucket's layout for `size` when that layout's true elements are its
// front (the padded dim merged with every dim before it); false: not moved.
bool move_into_merged_layout(const at::Tensor& self, c10::IntArrayRef size) {
  if (!bucketing_enabled() || !owns_growable_storage(self)) return false;
  std::optional<Spare> s = spare_rows(self);
  if (!s || s->dim2 >= 0 || s->length < 2) return false;
  at::DimVector shape = at::infer_size_dv(size, self.numel());
  std::optional<BucketLayout> layout = relayout_in_bucket(self, *s, shape);
  if (!layout) return false;
  for (int64_t d = 0; d < layout->dim; ++d) {
    if (shape[d] != 1) return false;  // the true elements are in blocks, not at the front
  }
  at::Tensor whole = layout->whole;
  as_padded_prefix(whole, layout->dim, layout->length);  // marks the storage's padded rows
  std::vector<int64_t> sizes = self.sizes().vec();
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(whole.storage());
  impl->set_sizes_and_strides(sizes, c10::contiguous_strides(sizes));
  return true;
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) {
  if (!viewable(self, size) && !move_into_merged_layout(self, size)) make_dense_if_growing(self);
  return at::native::view(self, size);
}

// reshape's view of its own copy (at::_unsafe_view(self.clone(contiguous), shape)): the copy of a
// repeated padded prefix keeps its spare rows (bucketed_ops.cc), so a shape that merges the
// padded dim with the ones before it needs the dense copy reshape meant to make.
at::Tensor unsafe_view(const at::Tensor& self, c10::IntArrayRef size) {
  if (!viewable(self, size)) make_dense_if_growing(self);
  return at::native::_unsafe_view(self, size);
}

// A row of ids longer than a live prompt's bucket (BERT's position_ids buffer, arange(512)[None]),
// sliced to the prompt's L entries: its storage is marked as padded along that row with the
// prompt's capacity, so the slice is a padded prefix whose spare rows are the row's next entries
// (real ids, which the ops over the bucket ignore) and the position embeddings stay in the
// bucket. The row itself is longer than the capacity, so it is never taken for a padded prefix.
// Only integer rows (ids, not values) whose storage is no other bucket's, or is their own upload's
// bucket along that row (then the row keeps its own capacity: it is longer than the window's).
void mark_window_of_ids(const at::Tensor& self, int64_t d, int64_t capacity) {
  if (!c10::isIntegralType(self.scalar_type(), /*includeBool=*/false)) return;
  for (int64_t i = 0; i < self.dim(); ++i) {
    if (i != d && self.size(i) != 1) return;
  }
  StorageBuffer& buffer = storage_buffer(self);
  if (buffer.growable && buffer.padded_stride != self.stride(d)) return;
  if (buffer.square_outer_stride != 0) return;
  buffer.growable = true;
  buffer.padded_stride = self.stride(d);
  buffer.padded_capacity = capacity;
}

// x[..., :L] of a tensor that fills a bucket (its dim is the capacity of a live bucketed prompt
// of L rows) is that prompt's padded prefix again. Qwen3.5's chunked delta rule pads the prompt
// to a multiple of 64; when that fills the bucket every op runs at the bucket's shape, and its
// result's [:, :, :L] would otherwise be an exact tensor from which every later op compiles per
// length. Marking the storage costs nothing: the rows past L are the bucket's spare rows.
at::Tensor slice(const at::Tensor& self, int64_t dim, std::optional<c10::SymInt> start, std::optional<c10::SymInt> end,
                 c10::SymInt step) {
  std::optional<int64_t> from = start ? std::optional<int64_t>(start->expect_int()) : std::nullopt;
  std::optional<int64_t> to = end ? std::optional<int64_t>(end->expect_int()) : std::nullopt;
  at::Tensor result = at::native::slice(self, dim, from, to, step.expect_int());
  if (!bucketing_enabled() || step != 1 || self.dim() == 0) return result;
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  int64_t rows = result.size(d);
  bool from_row_zero = result.storage_offset() == self.storage_offset();
  if (!from_row_zero || rows < 2 || rows == self.size(d) || self.storage_offset() != 0 || self.is_conj() ||
      self.is_neg() || !self.is_non_overlapping_and_dense()) {
    return result;
  }
  std::optional<int64_t> capacity = capacity_of_bucketed_length(rows);
  if (!capacity) return result;
  bool whole_storage = static_cast<size_t>(self.numel() * self.element_size()) == self.storage().nbytes();
  if (whole_storage && !storage_buffer(self).growable && *capacity == self.size(d)) {
    return as_padded_prefix(self, d, rows);
  }
  // The row may itself be a padded prefix of a bigger bucket (an int64 buffer of 514 entries is
  // uploaded into one of 1024): the window's capacity is the prompt's all the same.
  if (*capacity < self.size(d)) mark_window_of_ids(self, d, *capacity);
  return result;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("slice.Tensor", slice);
  m.impl("view", view);
  m.impl("_unsafe_view", unsafe_view);
}

}  // namespace
}  // namespace tpu::engine
