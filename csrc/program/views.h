// Reading and writing strided views of a storage inside a module (docs/ARCHITECTURE.md, Storages).
//
// The storage arrives as a value shaped like its layout. Whole views are a reshape; boxes of a
// shaped storage are (dynamic) slices in N-D, so a KV-cache write or a narrow keeps the
// storage's shape; other views flatten the storage in the module and use windows of the flat
// array (slices and reshapes), or a gather/scatter when nothing else fits.
#pragma once

#include <vector>

#include "hlo/builder.h"
#include "program/layout.h"

namespace tpu::program {

struct ViewAccess {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  Access access = Access::Whole;
  hlo::Value offset;  // runtime s64 scalar; unset when the storage offset is 0

  int64_t numel() const;
};

// `storage` has the layout's shape (its dims); the result has the view's sizes.
hlo::Value read_view(hlo::Builder& b, hlo::Value storage, const ViewAccess& view);
// The storage with the view's elements replaced by `update` (same shape as `storage`). Throws
// std::invalid_argument for a write through an expanded (stride-0) view, as PyTorch does.
hlo::Value write_view(hlo::Builder& b, hlo::Value storage, const ViewAccess& view, hlo::Value update);

}  // namespace tpu::program
