// copy_ between two padded prefixes of one bucket (growing_dims.h): the true rows of `src` into
// those of `dst`, as a select over both buckets with the length a runtime scalar, so the copy's
// modules depend on the bucket, not on the length. Qwen3.5's rotary frequencies are recomposed
// with strided writes (freqs[..., 1:3:3] = other[..., 1:3:3]) of two [1, L, 1] views of the
// prompt's bucket: exact, each new prompt length compiled them again. The rows of `dst` past the
// length keep their values (they may be another view's rows), so the select reads them too.
#include <ATen/ATen.h>

#include "engine/device/storage.h"
#include "engine/growing/growing_dims.h"

namespace tpu::engine {

bool copy_over_capacity(const at::Tensor& dst, const at::Tensor& src) {
  if (!growing_dims_enabled() || !dst.is_privateuseone() || !src.is_privateuseone() ||
      !storage_buffer(dst).growable || !storage_buffer(src).growable || dst.sizes() != src.sizes() ||
      dst.scalar_type() != src.scalar_type()) {
    return false;
  }
  std::optional<Spare> d = spare_rows(dst), s = spare_rows(src);
  if (!d || !s || d->dim != s->dim || d->length != s->length || d->capacity != s->capacity) return false;
  at::Tensor whole_dst = whole_capacity(dst, d->dim, d->capacity);
  at::Tensor kept = at::where(rows_below(d->capacity, d->length, d->dim, dst.dim(), dst),
                              whole_capacity(src, s->dim, s->capacity), whole_dst);
  whole_dst.copy_(kept);
  return true;
}

}  // namespace tpu::engine
