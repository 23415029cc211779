// Reading and writing strided views of a flat storage inside a module (DESIGN.md section 4).
//
// A storage is a 1-D array. A view (sizes, strides, offset) is extracted with slices and
// reshapes when its strides describe a window of the storage (the common case: contiguous,
// transposed, narrowed, stepped), and with a gather otherwise. Writes produce a new flat array
// with the view's elements replaced (dynamic_update_slice, or scatter).
#pragma once

#include <vector>

#include "hlo/builder.h"

namespace tpu::lowering {

struct ViewLayout {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t storage_numel = 0;
  // The storage offset is a runtime s64 scalar when `offset` is set, else 0.
  hlo::Value offset;
  // Static guarantee that offset + window length <= storage_numel (no padding needed).
  bool window_fits = true;

  int64_t numel() const;
  bool is_contiguous() const;
  bool covers_storage() const;  // contiguous, offset 0, numel == storage_numel
  // Length of the window a read/write touches, or -1 when the view needs a gather.
  int64_t window_length() const;
};

hlo::Value read_view(hlo::Builder& b, hlo::Value flat, const ViewLayout& view);
hlo::Value write_view(hlo::Builder& b, hlo::Value flat, const ViewLayout& view, hlo::Value update);

}  // namespace tpu::lowering
