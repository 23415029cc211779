// Reads of a growing tensor (growing_dims.h) whose results would otherwise carry the length in a
// shape that changes every step. generate() grows its 2-D attention mask by one column per
// token, and with a padded batch it rebuilds the 4-D mask from it each step: the mask is
// converted to bool (_to_copy), padded to the static cache's length (constant_pad_nd) and, for
// sliding-window layers, gathered at the window's positions (index.Tensor). Each of these runs
// over the mask's whole capacity with the length as a runtime scalar, so its modules depend on
// the capacity, not on the length, and a generate compiles nothing new per token. Results that
// keep the growing dim are padded prefixes again (non-contiguous, like a grown cat's result).
#include <ATen/ATen.h>
#include <ATen/NativeFunctions.h>
#include <torch/library.h>

#include "engine/growing/growing_dims.h"

namespace tpu::engine {
namespace {

// The one dim of `t` whose size is the length of a live bucketed prompt, and that prompt's bucket;
// nullopt when none or several are.
std::optional<std::pair<int64_t, int64_t>> live_prompt_dim(const at::Tensor& t) {
  std::optional<std::pair<int64_t, int64_t>> found;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) < 2) continue;
    if (std::optional<int64_t> capacity = capacity_of_bucketed_length(t.size(d))) {
      if (found) return std::nullopt;
      found = std::make_pair(d, *capacity);
    }
  }
  return found;
}

at::Tensor to_copy(const at::Tensor& self, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                   std::optional<at::Device> device, std::optional<bool> pin_memory, bool non_blocking,
                   std::optional<at::MemoryFormat> memory_format) {
  // A contiguous copy keeps the spare rows, as clone(memory_format=contiguous) does
  // (bucketed_ops.cc): Qwen3.5's delta rule ends in .to(dtype, memory_format=contiguous_format).
  at::MemoryFormat format = memory_format.value_or(at::MemoryFormat::Preserve);
  bool same_place = (!device || *device == self.device()) && (!layout || *layout == at::kStrided) &&
                    !pin_memory.value_or(false) &&
                    (format == at::MemoryFormat::Preserve || format == at::MemoryFormat::Contiguous);
  if (same_place) {
    if (std::optional<Spare> s = spare_rows(self)) {
      // Converts the whole capacity (the rows past the length are zeros or stale rows: any value
      // converts) and returns a padded prefix of the result, so it keeps growing.
      at::Tensor whole = whole_capacity(self, s->dim, s->capacity);
      return as_padded_prefix(
          at::native::_to_copy(whole, dtype, layout, device, pin_memory, non_blocking, memory_format), s->dim,
          s->length);
    }
    // A square (T5's relative positions, (relative_position > 0).to(torch.long)) likewise.
    if (std::optional<Spare> sq = square_rows(self)) {
      at::Tensor source = whole_square(self, *sq);
      at::Tensor whole = at::native::_to_copy(source, dtype, layout, device, pin_memory, non_blocking,
                                              at::MemoryFormat::Preserve);
      if (whole.strides() == source.strides()) return as_padded_square(whole, sq->dim, sq->dim2, sq->length);
    }
  }
  at::Tensor copy = at::native::_to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format);
  // A contiguous copy asked for explicitly of an exact, non-contiguous tensor with one dim of a
  // live prompt's length lands in that prompt's bucket: Qwen3.5's chunked delta rule ends in
  // out[:, :, :L].transpose(1, 2).to(dtype, memory_format=contiguous_format), exact for a prompt
  // of one chunk (L <= 64, its [1, 64] chunk view is exact), and every op after it compiled per
  // length. The copy and its pad compile per length; what reads the result does not.
  if (same_place && format == at::MemoryFormat::Contiguous && !self.is_contiguous() && bucketing_enabled()) {
    if (std::optional<std::pair<int64_t, int64_t>> prompt = live_prompt_dim(copy)) {
      auto [dim, capacity] = *prompt;
      return as_padded_prefix(zero_rows_to_capacity(copy, dim, capacity), dim, copy.size(dim));
    }
  }
  return copy;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("_to_copy", to_copy); }

}  // namespace

bool pad_over_capacity(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!op.schema().overload_name().empty()) return false;  // constant_pad_nd.out keeps its out=
  size_t n = stack->size();
  const at::Tensor self = (*stack)[n - 3].toTensor();
  std::optional<Spare> s = spare_rows(self);
  if (!s) return false;
  std::vector<int64_t> pad = (*stack)[n - 2].toIntVector();
  // Only padding after the growing dim's rows (pairs run from the last dim backwards).
  size_t after = 2 * static_cast<size_t>(self.dim() - 1 - s->dim) + 1;
  if (pad.size() % 2 != 0 || pad.size() > 2 * static_cast<size_t>(self.dim()) || after >= pad.size()) return false;
  for (size_t i = 0; i < pad.size(); ++i) {
    if (i != after && pad[i] != 0) return false;
  }
  if (pad[after] <= 0) return false;
  int64_t total = s->length + pad[after];
  at::Scalar value = (*stack)[n - 1].toScalar();
  // The result is a padded prefix too (of the same capacity while it fits), so the ops that read
  // it next (the mask's gathers) see the same shapes whether the length needed padding or not.
  int64_t capacity = total <= s->capacity ? s->capacity : capacity_for(total);
  at::Tensor whole = whole_capacity(self, s->dim, s->capacity);
  if (capacity > s->capacity) {
    std::vector<int64_t> grow(pad.size(), 0);
    grow[after] = capacity - s->capacity;
    whole = at::constant_pad_nd(whole, grow, value);
  }
  // Rows at and past the length become `value`; the length is the comparison's runtime scalar.
  at::Tensor keep = rows_below(capacity, s->length, s->dim, self.dim(), self);
  at::Tensor result =
      as_padded_prefix(at::where(keep, whole, at::scalar_tensor(value, self.options())), s->dim, total);
  torch::jit::drop(*stack, 3);
  torch::jit::push(*stack, std::move(result));
  return true;
}

bool index_over_capacity(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (op.schema().overload_name() != "Tensor") return false;
  size_t n = stack->size();
  at::Tensor self = (*stack)[n - 2].toTensor();
  c10::List<std::optional<at::Tensor>> indices = (*stack)[n - 1].toOptionalTensorList();
  std::optional<Spare> s = spare_rows(self);
  // Index tensors that grow (the mask's key positions, arange(kv_length) + offset) must agree on
  // one broadcast dim; the others broadcast along it.
  int64_t rank = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    std::optional<at::Tensor> idx = indices.get(i);
    if (!idx || !idx->defined()) continue;
    if (!idx->is_privateuseone() || idx->device() != self.device() ||
        !at::isIntegralType(idx->scalar_type(), /*includeBool=*/false) || idx->scalar_type() == at::kByte) {
      return false;  // a mask: its coordinates are data-dependent
    }
    rank = std::max<int64_t>(rank, idx->dim());
  }
  // Growing indices make a growing result only in the simple case (every dim of self indexed, so
  // the result is the broadcast index shape, growing along their dim); otherwise they are
  // ordinary strided operands of the rule.
  std::optional<Spare> grows;  // in broadcast coordinates
  if (static_cast<int64_t>(indices.size()) == self.dim()) {
    std::vector<at::Tensor> operands;
    for (size_t i = 0; i < indices.size(); ++i) {
      std::optional<at::Tensor> idx = indices.get(i);
      if (idx && idx->defined()) operands.push_back(*idx);
    }
    if (operands.size() == indices.size()) grows = shared_growth(operands, rank);
  }
  bool self_grows = s && static_cast<int64_t>(indices.size()) > s->dim && indices.get(s->dim) &&
                    indices.get(s->dim)->defined();
  if (!grows && !self_grows) return false;
  // Rows past a growing index's length hold anything: they read row 0 (their results are not
  // part of the prefix, and must not trip the range check).
  for (size_t i = 0; grows && i < indices.size(); ++i) {
    at::Tensor idx = *indices.get(i);
    if (std::optional<Spare> g = spare_rows(idx)) {
      at::Tensor whole = whole_capacity(idx, g->dim, g->capacity);
      indices.set(i, at::where(rows_below(g->capacity, g->length, g->dim, idx.dim(), idx), whole,
                               at::zeros({}, whole.options())));
    }
  }
  if (self_grows) {
    // Indices along self's growing dim wrap by its length (not the capacity); out-of-range ones
    // are moved past the capacity, where the index rule raises the CPU's IndexError at the next sync.
    at::Tensor idx = *indices.get(s->dim);
    at::Tensor wrapped = at::where(idx.lt(0), idx.add(s->length), idx);
    at::Tensor outside = wrapped.lt(0).logical_or_(wrapped.ge(s->length));
    indices.set(s->dim, wrapped.masked_fill(outside, s->capacity));
    self = whole_capacity(self, s->dim, s->capacity);
  }
  at::Tensor result = at::index(self, indices);
  if (grows) {
    TORCH_INTERNAL_ASSERT(result.dim() == rank && result.size(grows->dim) == grows->capacity, "index.Tensor over capacity");
    result = as_padded_prefix(result, grows->dim, grows->length);
  }
  torch::jit::drop(*stack, 2);
  torch::jit::push(*stack, std::move(result));
  return true;
}

}  // namespace tpu::engine
