// Tensors made like a padded prefix (growing_dims.h): empty_like, and through it zeros_like,
// ones_like and full_like; new_empty and new_zeros of the prefix's own sizes (BART's
// shift_tokens_right: labels.new_zeros(labels.shape), then the shifted labels written in).
//
// PyTorch's empty_like of a tensor whose strides are not dense (a padded prefix's are not: its
// rows sit `capacity` apart) allocates a contiguous tensor of the true sizes, so a buffer made
// like a bucketed activation and filled chunk by chunk (Qwen3.5's chunked delta rule:
// core_attn_out = zeros_like(values), then core_attn_out[:, :, i] = ...) would be exact, and every
// op that reads it would compile once per length. Here it is made with the whole bucket's layout
// and returned as a padded prefix of it, like the tensor it was made from: its spare rows are
// uninitialised (zeros_like fills only the true rows) and never reach a true row. Like a padded
// clone it is not contiguous where the original is not (docs/bucketing.md).
#include <ATen/ATen.h>
#include <ATen/NativeFunctions.h>
#include <torch/library.h>

#include "engine/growing/growing_dims.h"

namespace tpu::engine {
namespace {

at::Tensor empty_like(const at::Tensor& self, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                      std::optional<at::Device> device, std::optional<bool> pin_memory,
                      std::optional<at::MemoryFormat> memory_format) {
  bool like_self = (!device || *device == self.device()) && (!layout || *layout == at::kStrided) &&
                   !pin_memory.value_or(false) &&
                   memory_format.value_or(at::MemoryFormat::Preserve) == at::MemoryFormat::Preserve;
  if (like_self) {
    if (std::optional<Spare> s = spare_rows(self)) {
      at::Tensor whole = at::native::empty_like(whole_capacity(self, s->dim, s->capacity), dtype, layout, device,
                                                pin_memory, memory_format);
      // The whole bucket is dense (a permuted one keeps its order): a padded prefix of it.
      if (whole.is_non_overlapping_and_dense()) return as_padded_prefix(whole, s->dim, s->length);
    } else if (std::optional<Spare> sq = square_rows(self)) {  // full_like of T5's relative positions
      at::Tensor whole =
          at::native::empty_like(whole_square(self, *sq), dtype, layout, device, pin_memory, memory_format);
      if (whole.is_non_overlapping_and_dense()) return as_padded_square(whole, sq->dim, sq->dim2, sq->length);
    }
  }
  return at::native::empty_like(self, dtype, layout, device, pin_memory, memory_format);
}

// A new tensor of `self`'s own sizes in its bucket (row-major over the capacity, all of it
// zeros with `zeros`), or an undefined tensor where `size` or the options differ.
at::Tensor new_in_bucket(const at::Tensor& self, c10::SymIntArrayRef size, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device,
                         std::optional<bool> pin_memory, bool zeros) {
  if ((device && *device != self.device()) || (layout && *layout != at::kStrided) || pin_memory.value_or(false) ||
      size.size() != static_cast<size_t>(self.dim())) {
    return {};
  }
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (size[d] != self.sym_size(d)) return {};
  }
  std::optional<Spare> s = spare_rows(self);
  if (!s || s->dim2 >= 0) return {};
  std::vector<int64_t> sizes = self.sizes().vec();
  sizes[s->dim] = s->capacity;
  at::TensorOptions options = self.options().dtype(dtype.value_or(self.scalar_type()));
  return as_padded_prefix(zeros ? at::zeros(sizes, options) : at::empty(sizes, options), s->dim, s->length);
}

at::Tensor new_empty(const at::Tensor& self, c10::SymIntArrayRef size, std::optional<at::ScalarType> dtype,
                     std::optional<at::Layout> layout, std::optional<at::Device> device,
                     std::optional<bool> pin_memory) {
  at::Tensor made = new_in_bucket(self, size, dtype, layout, device, pin_memory, /*zeros=*/false);
  return made.defined() ? made : at::native::new_empty_symint(self, size, dtype, layout, device, pin_memory);
}

at::Tensor new_zeros(const at::Tensor& self, c10::SymIntArrayRef size, std::optional<at::ScalarType> dtype,
                     std::optional<at::Layout> layout, std::optional<at::Device> device,
                     std::optional<bool> pin_memory) {
  at::Tensor made = new_in_bucket(self, size, dtype, layout, device, pin_memory, /*zeros=*/true);
  return made.defined() ? made
                        : at::native::new_zeros(self, C10_AS_INTARRAYREF_SLOW(size), dtype, layout, device, pin_memory);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty_like", empty_like);
  m.impl("new_empty", new_empty);
  m.impl("new_zeros", new_zeros);
}

}  // namespace
}  // namespace tpu::engine
