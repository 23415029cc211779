// reshape of a padded prefix whose PyTorch reshape would leave the bucket (growing_dims.h).
//
// A left-padded batch's activations are [B, L, ...] of a [B, C, ...] bucket. A reshape that
// merges the padded dim with a batch dim before it (Qwen3.5's gated norm: [B, L, h, d] ->
// [B*L*h, d]) cannot be a view of the bucket, so PyTorch copies it into a dense tensor of the
// true sizes, and every op after it compiles once per prompt length. Here such a reshape copies
// into another padded layout of the same bucket instead: [B*L*h, d] of [B*C*h, d] rows, the
// true rows first. The reshape back ([B*L*h, d] -> [B, L, h*d]) would be a view of a dense
// prefix that no longer shows the bucket; it is the inverse copy, to [B, L, h*d] of [B, C, h*d].
// Both are one gather over the bucket whose index (uploaded from the host) is the only thing
// that depends on the length, so a new length in a warm bucket compiles nothing.
//
// PyTorch's reshape may return a view or a copy (callers must not depend on which), so a copy
// where it would have returned a view keeps its contract. A batch of one needs none of this:
// its padded dims merge and split as views.
//
// reshape is a CompositeImplicitAutograd op, so it is registered at AutogradPrivateUse1 (and at
// PrivateUse1 for torch.inference_mode()). With autograd recording, a reshape that is a view
// stays PyTorch's (an autograd view), and one that copies records its own node whose backward is
// the inverse copy (the gradient's reshape back, over the bucket when the gradient is a padded
// prefix). Tensors that are not plain tpu tensors run PyTorch's own composite.
#include <ATen/ATen.h>
#include <ATen/InferSize.h>
#include <ATen/TensorUtils.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/reshape_native.h>
#include <c10/core/GradMode.h>
#include <c10/util/accumulate.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <numeric>

#include "engine/growing/growing_dims.h"

namespace tpu::engine {
namespace {

int64_t product(c10::IntArrayRef sizes, int64_t from, int64_t to) {
  return c10::multiply_integers(sizes.begin() + from, sizes.begin() + to);
}

// A row-major padded layout in elements: `blocks` blocks `stride` elements apart whose first
// `valid` elements hold the tensor's elements in row-major order.
// `row` is the elements of one row of the padded dim.
struct Blocks {
  int64_t blocks, valid, stride, row;
};

Blocks blocks_of(c10::IntArrayRef sizes, int64_t dim, int64_t capacity) {
  int64_t row = product(sizes, dim + 1, static_cast<int64_t>(sizes.size()));
  return {product(sizes, 0, dim), sizes[dim] * row, capacity * row, row};
}

// The elements of `whole` (a dense tensor holding layout `from`) in layout `to`, as a flat
// tensor of to.blocks * to.stride elements; the padding's elements repeat element 0. The gather
// moves units of elements that divide both layouts' rows, so its shapes do not depend on the
// length (only its index does).
at::Tensor relayout(const at::Tensor& whole, Blocks from, Blocks to) {
  int64_t unit = std::gcd(from.row, to.row);
  int64_t from_valid = from.valid / unit, from_stride = from.stride / unit;
  int64_t to_valid = to.valid / unit, to_stride = to.stride / unit;
  int64_t units = to.blocks * to_stride;
  bool narrow = whole.numel() / unit <= std::numeric_limits<int32_t>::max();
  at::Tensor index = at::empty({units}, at::TensorOptions().dtype(narrow ? at::kInt : at::kLong));
  auto fill = [&](auto* out) {
    for (int64_t x = 0; x < units; ++x) {
      int64_t block = x / to_stride, row = x % to_stride;
      int64_t n = block * to_valid + row;  // the element's place in row-major order
      out[x] = row < to_valid ? n / from_valid * from_stride + n % from_valid : 0;
    }
  };
  if (narrow) {
    fill(index.data_ptr<int32_t>());
  } else {
    fill(index.data_ptr<int64_t>());
  }
  return whole.reshape({-1, unit}).index_select(0, index.to(whole.device())).view(-1);
}

// The target dim that carries the bucket after the reshape, and its capacity. Any dim of `shape`
// whose extent scales with the length (extent * capacity / length rows, a whole number) could;
// the one whose extent is a live prompt's length with that capacity (the split back to
// [B, L, ...]) or else the one merged around the padded dim (the merge) is taken, when only one
// qualifies.
std::optional<std::pair<int64_t, int64_t>> bucket_dim_of(c10::IntArrayRef from, const Spare& s,
                                                         c10::IntArrayRef shape) {
  int64_t outer = product(from, 0, s.dim), inner = product(from, s.dim + 1, static_cast<int64_t>(from.size()));
  std::vector<std::pair<int64_t, int64_t>> live, merged;
  for (int64_t q = 0; q < static_cast<int64_t>(shape.size()); ++q) {
    if (shape[q] < 2 || (shape[q] * s.capacity) % s.length != 0) continue;
    int64_t capacity = shape[q] * s.capacity / s.length;
    if (capacity <= shape[q]) continue;
    std::optional<int64_t> bucket = capacity_of_bucketed_length(shape[q]);
    if (!bucket) bucket = capacity_of_grown_length(shape[q]);
    if (bucket == capacity) live.emplace_back(q, capacity);
    int64_t before = product(shape, 0, q), after = product(shape, q + 1, static_cast<int64_t>(shape.size()));
    if (outer % before == 0 && inner % after == 0) merged.emplace_back(q, capacity);
  }
  if (live.size() == 1) return live[0];
  if (live.empty() && merged.size() == 1) return merged[0];
  return std::nullopt;
}

}  // namespace

std::optional<BucketLayout> relayout_in_bucket(const at::Tensor& self, const Spare& s, c10::IntArrayRef shape) {
  std::optional<std::pair<int64_t, int64_t>> target = bucket_dim_of(self.sizes(), s, shape);
  if (!target) return std::nullopt;
  auto [dim, capacity] = *target;
  // Not a view (as PyTorch's reshape copy is not): below ADInplaceOrView the result owns its
  // storage, so a later view() that needs a dense layout may move it (growing_view.cc).
  at::AutoDispatchBelowADInplaceOrView below_views;
  at::Tensor whole = whole_capacity(self, s.dim, s.capacity);
  if (!whole.is_contiguous()) {
    // A permuted bucket ([B, h, L, d] transposed to [B, L, h, d]): its copy is row-major in the
    // same bucket (bucketed_ops.cc), as PyTorch's reshape would copy it first.
    at::Tensor copy = self.clone(at::MemoryFormat::Contiguous);
    std::optional<Spare> c = spare_rows(copy);
    if (!c || c->dim != s.dim || c->capacity != s.capacity) return std::nullopt;
    whole = whole_capacity(copy, c->dim, c->capacity);
    if (!whole.is_contiguous()) return std::nullopt;
  }
  at::Tensor flat = relayout(whole, blocks_of(self.sizes(), s.dim, s.capacity), blocks_of(shape, dim, capacity));
  at::DimVector whole_shape(shape.begin(), shape.end());
  whole_shape[dim] = capacity;
  return BucketLayout{flat.view(whole_shape), dim, shape[dim]};
}

namespace {

// The reshape as a padded prefix of the same bucket, or nullopt for PyTorch's reshape.
std::optional<at::Tensor> reshape_in_bucket(const at::Tensor& self, c10::IntArrayRef size) {
  if (!bucketing_enabled() || !plain_tpu_tensor(self)) return std::nullopt;
  std::optional<Spare> s = spare_rows(self);
  if (!s || s->length < 2) return std::nullopt;
  at::DimVector shape = at::infer_size_dv(size, self.numel());
  if (c10::IntArrayRef(shape) == self.sizes()) return std::nullopt;
  // PyTorch's reshape when it is a view: kept where it shows the bucket the copy would (a
  // gradient [B * L, V] of [B * C, V] rows back to [B, L, V] is a view, of no bucket of L), or
  // where no dim would show one.
  std::optional<at::Tensor> view;
  if (at::detail::computeStride(self.sizes(), self.strides(), shape)) view = self.view(shape);
  std::optional<std::pair<int64_t, int64_t>> target = bucket_dim_of(self.sizes(), *s, shape);
  if (view) {
    std::optional<Spare> v = spare_rows(*view);
    if (!target || (v && v->dim == target->first && v->capacity == target->second)) return view;
  }
  if (!target) return std::nullopt;
  std::optional<BucketLayout> layout = relayout_in_bucket(self, *s, shape);
  if (!layout) return view;
  at::AutoDispatchBelowADInplaceOrView below_views;  // not a view of the layout (as above)
  return as_padded_prefix(layout->whole, layout->dim, layout->length);
}

// A copying reshape in the bucket, recorded for autograd as one node.
struct CopyInBucket : public torch::autograd::Function<CopyInBucket> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& self, c10::IntArrayRef shape) {
    ctx->saved_data["sizes"] = self.sizes().vec();
    return *reshape_in_bucket(self, shape);  // autograd is off here
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    // Without a double backward this reaches reshape() below again: over the bucket where it can.
    return {grads[0].reshape(ctx->saved_data["sizes"].toIntVector()), at::Tensor()};
  }
};

// Whether reshape_in_bucket copies (rather than returns a view, or nothing).
bool copies_in_bucket(const at::Tensor& self, c10::IntArrayRef size) {
  if (!bucketing_enabled() || !plain_tpu_tensor(self)) return false;
  std::optional<Spare> s = spare_rows(self);
  if (!s || s->length < 2) return false;
  at::DimVector shape = at::infer_size_dv(size, self.numel());
  if (c10::IntArrayRef(shape) == self.sizes()) return false;
  if (at::detail::computeStride(self.sizes(), self.strides(), shape)) return false;
  return bucket_dim_of(self.sizes(), *s, shape).has_value();
}

at::Tensor reshape(const at::Tensor& self, c10::SymIntArrayRef shape) {
  if (std::optional<c10::IntArrayRef> sizes = c10::asIntArrayRefSlowOpt(shape)) {
    if (c10::GradMode::is_enabled() && self.requires_grad()) {
      if (copies_in_bucket(self, *sizes)) return CopyInBucket::apply(self, *sizes);
    } else if (std::optional<at::Tensor> r = reshape_in_bucket(self, *sizes)) {
      return *r;
    }
  }
  return at::native::reshape_symint(self, shape);
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { m.impl("reshape", reshape); }
// Below autograd too: under torch.inference_mode() the autograd keys are skipped.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("reshape", reshape); }

}  // namespace
}  // namespace tpu::engine
