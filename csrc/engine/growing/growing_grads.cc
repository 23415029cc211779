// Gradients of views over a padded prefix's bucket (growing_dims.h).
//
// The backward of a slice (rotate_half's x[..., :d/2] and x[..., d/2:] in every rotary embedding,
// a split of fused projections) is slice_backward: zeros of the input's sizes with the gradient
// written into the slice. PyTorch's composite makes those zeros at the true length, so a training
// step's gradient left the bucket there and every op after it compiled per length. When the
// gradient is a padded prefix along another dim than the slice's, the zeros take the bucket's
// rows instead and the result is a padded prefix again (its spare rows hold the gradient's).
//
// The backward of a select along the bucketed dim itself (a classifier's pooler reads the first
// token, hidden[:, 0]) is select_backward: zeros of the input's sizes with the gradient at one
// row. When that dim's extent is a live prompt's length, the zeros take its bucket's rows: the
// result's first L rows are the exact result, whatever the bucket is.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/select_backward_native.h>
#include <ATen/ops/slice_backward_native.h>
#include <torch/library.h>

#include "engine/growing/growing_dims.h"

namespace tpu::engine {
namespace {

at::Tensor slice_backward(const at::Tensor& grad, c10::SymIntArrayRef input_sizes, int64_t dim, c10::SymInt start,
                          c10::SymInt end, c10::SymInt step) {
  std::vector<int64_t> sizes;
  for (const c10::SymInt& s : input_sizes) sizes.push_back(s.expect_int());
  const int64_t from = start.expect_int(), to = end.expect_int(), by = step.expect_int();
  auto exact = [&] { return at::native::slice_backward(grad, sizes, dim, from, to, by); };
  if (!plain_tpu_tensor(grad) || grad.dim() != static_cast<int64_t>(sizes.size()) || grad.dim() == 0) return exact();
  const int64_t d = at::maybe_wrap_dim(dim, grad.dim());
  std::optional<Spare> s = spare_rows(grad);
  if (!s || s->dim2 >= 0 || s->dim == d || sizes[s->dim] != s->length) return exact();
  for (int64_t i = 0; i < grad.dim(); ++i) {
    if (i != d && sizes[i] != grad.size(i)) return exact();  // malformed: PyTorch's own error
  }
  sizes[s->dim] = s->capacity;
  at::Tensor whole = at::zeros(sizes, grad.options());
  whole.slice(d, from, to, by).copy_(whole_capacity(grad, s->dim, s->capacity));
  return as_padded_prefix(whole, s->dim, s->length);
}

at::Tensor select_backward(const at::Tensor& grad, c10::SymIntArrayRef input_sizes, int64_t dim, c10::SymInt index) {
  std::vector<int64_t> sizes;
  for (const c10::SymInt& s : input_sizes) sizes.push_back(s.expect_int());
  const int64_t at_index = index.expect_int();
  auto exact = [&] { return at::native::select_backward_symint(grad, input_sizes, dim, index); };
  if (!bucketing_enabled() || !plain_tpu_tensor(grad) || grad.dim() + 1 != static_cast<int64_t>(sizes.size())) {
    return exact();
  }
  const int64_t d = at::maybe_wrap_dim(dim, static_cast<int64_t>(sizes.size()));
  const int64_t length = sizes[d];
  if (length < 2 || at_index < -length || at_index >= length || spare_rows(grad)) return exact();
  std::optional<int64_t> capacity = capacity_of_bucketed_length(length);
  if (!capacity || *capacity <= length) return exact();
  for (int64_t i = 0, g = 0; i < static_cast<int64_t>(sizes.size()); ++i) {
    if (i != d && sizes[i] != grad.size(g++)) return exact();  // malformed: PyTorch's own error
  }
  sizes[d] = *capacity;
  at::Tensor whole = at::zeros(sizes, grad.options());
  whole.select(d, at_index < 0 ? at_index + length : at_index).copy_(grad);
  return as_padded_prefix(whole, d, length);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("slice_backward", slice_backward);
  m.impl("select_backward", select_backward);
}

}  // namespace
}  // namespace tpu::engine
