// torch.cat along a growing dim (growing_dims.h): appends into a storage with spare capacity.
//
// cat(past, new, dim=d) takes this path when `past` is a padded prefix along d, or the whole
// result of an earlier cat along d (the second step of incremental decoding: past = cat(x, y)).
// The result is a new storage (cat never aliases its inputs) of capacity C >= L + n: a copy of past's whole storage, or past padded with zeros to the next
// capacity when it is full, with `new` written at rows [L, L+n). Every module involved depends
// on C, not on L (the write's position is a runtime offset), so a sequence of appends compiles
// once per capacity. Other cats run the lowered cat rule unchanged.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "engine/call/lowered_kernel.h"
#include "engine/device/storage.h"
#include "engine/growing/growing_dims.h"

namespace tpu::engine {
namespace {

// Whether `past` is the whole result of an earlier append-shaped cat along `dim` (lineage, not
// shapes: the k and v caches of every layer have the same shapes and lengths).
bool appended_before(const at::Tensor& past, int64_t dim) {
  return storage_buffer(past).appended_along == dim + 1 && past.is_contiguous() && past.storage_offset() == 0 &&
         static_cast<size_t>(past.numel()) * past.element_size() == past.storage().nbytes();
}

// Whether cat(ts, dim) is an append this path handles; `dim` already wrapped.
bool is_append(const std::vector<at::Tensor>& ts, int64_t dim) {
  if (ts.size() < 2) return false;
  const at::Tensor& past = ts[0];
  if (!past.defined() || !past.is_privateuseone() || past.dim() == 0 || past.numel() == 0) return false;
  for (const at::Tensor& t : ts) {
    if (!t.defined() || !t.is_privateuseone() || t.device() != past.device() || t.scalar_type() != past.scalar_type() ||
        t.dim() != past.dim() || t.is_conj() || t.is_neg()) {
      return false;
    }
    for (int64_t d = 0; d < t.dim(); ++d) {
      if (d != dim && t.size(d) != past.size(d)) return false;
    }
  }
  return true;
}

// A first append whose padded storage stays small (generate()'s ids and attention mask, the
// caches of tiny models) grows at once, so the decode loop's second step already sees the
// layouts of every later one. Larger first appends stay ordinary (exact, contiguous) results:
// one-off cats of big tensors should not get spare capacity. So do cats that add at least as
// many rows as there were (RoPE's rotate_half, cat(x1, x2) of two halves, a class token put in
// front): they are not a sequence growing step by step, and a padded result made every later
// op on it a strided read (a decode step's RoPE: 5x libtpu's v6e estimate of the eager step).
bool small_first_append(const std::vector<at::Tensor>& ts, int64_t dim) {
  constexpr int64_t kSmallBytes = 64 * 1024;
  const at::Tensor& past = ts[0];
  int64_t rows = past.size(dim);
  for (size_t i = 1; i < ts.size(); ++i) rows += ts[i].size(dim);
  if (rows - past.size(dim) >= past.size(dim)) return false;
  int64_t per_row = past.numel() / past.size(dim) * past.element_size();
  return per_row * capacity_for(rows) <= kSmallBytes;
}

at::Tensor append(const std::vector<at::Tensor>& ts, int64_t dim) {
  const at::Tensor& past = ts[0];
  int64_t length = past.size(dim), added = 0;
  for (size_t i = 1; i < ts.size(); ++i) added += ts[i].size(dim);
  std::optional<int64_t> capacity = padded_capacity(past, dim);
  at::Tensor whole = capacity ? whole_capacity(past, dim, *capacity) : past;
  at::Tensor grown;
  if (capacity && length + added <= *capacity) {
    grown = whole.clone(at::MemoryFormat::Contiguous);
  } else {
    std::vector<int64_t> pad(2 * past.dim(), 0);  // constant_pad_nd pads the last dim first
    pad[2 * (past.dim() - 1 - dim) + 1] = capacity_for(length + added) - whole.size(dim);
    grown = at::constant_pad_nd(whole, pad, 0).contiguous();
  }
  std::vector<at::Tensor> rest(ts.begin() + 1, ts.end());
  grown.narrow(dim, length, added).copy_(rest.size() == 1 ? rest[0] : at::cat(rest, dim));
  return as_padded_prefix(grown, dim, length + added);
}

// cat([empty, x], dim) with x a padded prefix along dim: a DynamicCache's first update of a
// layer (its keys start as the legacy empty tensor). The result is x's copy, padded like x, so
// the cache grows from the prompt's bucket and attention over it runs over that bucket.
std::optional<at::Tensor> first_update_of_padded(const std::vector<at::Tensor>& ts, int64_t dim) {
  const at::Tensor* only = nullptr;
  for (const at::Tensor& t : ts) {
    if (t.defined() && t.dim() == 1 && t.numel() == 0) continue;  // legacy empty operands
    if (only != nullptr) return std::nullopt;
    only = &t;
  }
  if (only == nullptr || !only->is_privateuseone()) return std::nullopt;
  std::optional<Spare> s = spare_rows(*only);
  if (!s || (dim != s->dim && dim != s->dim - only->dim())) return std::nullopt;
  at::Tensor whole = whole_capacity(*only, s->dim, s->capacity).clone(at::MemoryFormat::Contiguous);
  return as_padded_prefix(whole, s->dim, s->length);
}

void cat_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  if (growing_dims_enabled()) {
    const c10::IValue& list = (*stack)[stack->size() - 2];
    std::vector<at::Tensor> ts = list.isTensorList() ? list.toTensorVector() : std::vector<at::Tensor>{};
    int64_t rank = !ts.empty() && ts[0].defined() ? ts[0].dim() : 0;
    int64_t dim = (*stack)[stack->size() - 1].toInt();
    if (std::optional<at::Tensor> first = first_update_of_padded(ts, dim)) {
      torch::jit::drop(*stack, 2);
      torch::jit::push(*stack, std::move(*first));
      return;
    }
    if (dim < 0) dim += rank;
    // Out-of-range dims and the legacy empty operands take the rule's path and its errors.
    if (rank > 0 && dim >= 0 && dim < rank) {
      bool append_shaped = is_append(ts, dim);
      if (append_shaped && (padded_capacity(ts[0], dim) || appended_before(ts[0], dim) || small_first_append(ts, dim))) {
        at::Tensor result = append(ts, dim);
        torch::jit::drop(*stack, 2);
        torch::jit::push(*stack, std::move(result));
        return;
      }
      // Padded operands joined along another dim (RoPE's halves of a prompt's q and k).
      if (runs_over_capacity(op, stack)) return;
      if (append_shaped) {
        // An ordinary cat; its result remembers the append so that a next one pads.
        run_lowered(op, stack);
        storage_buffer(stack->back().toTensor()).appended_along = static_cast<int8_t>(dim + 1);
        return;
      }
    }
  }
  run_lowered(op, stack);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cat", torch::CppFunction::makeFromBoxedFunction<&cat_kernel>());
}

}  // namespace
}  // namespace tpu::engine
