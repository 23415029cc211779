// Storage layouts and view access classes (torch-free).
//
// A storage's device buffer holds its elements row-major with `dims` as the buffer's shape:
// Flat is one dim (numel); Shaped is the dense N-D shape of the tensor that produced it, in
// memory order. On a TPU the layout is not free: libtpu tiles the two minor dims, so a matmul
// fed from a flat buffer pays a relayout (docs/layout.md has the measured table).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tpu::program {

struct Layout {
  std::vector<int64_t> dims;

  static Layout flat(int64_t numel) { return Layout{{numel}}; }
  int64_t numel() const;
  bool is_flat() const { return dims.size() == 1; }
  bool operator==(const Layout& o) const { return dims == o.dims; }
};

// Which layout new dense results get (TORCH_TPU_STORAGE_LAYOUT=shaped|flat; shaped is the
// default, flat is kept to measure the difference).
enum class LayoutPolicy { Shaped, Flat };

// How an op reads or writes a strided view of a storage inside its module. It depends on the
// storage offset's value (a runtime parameter), so the class is part of the cache key.
enum class Access : uint8_t {
  Empty,         // no elements
  Whole,         // contiguous, offset 0, covers the storage: a reshape
  Box,           // an N-D box of a shaped storage (narrow/select/step/transpose): slices
  Window,        // a window of the flat storage (after flattening a shaped one): slices
  PaddedWindow,  // like Window, but the window may run past the storage end: pad first
  Gather,        // overlapping or irregular strides: element-wise gather/scatter
};

// The access class of view (sizes, strides, offset) of a storage with `layout`.
Access classify(const Layout& layout, const std::vector<int64_t>& sizes,
                const std::vector<int64_t>& strides, int64_t offset);
// The same for the eager hot path: no allocation when the view is Whole.
Access classify(const std::vector<int64_t>& dims, const int64_t* sizes, const int64_t* strides,
                size_t rank, int64_t offset);

// One view dim mapped onto one storage dim: view index i reads storage index start + i * step.
struct BoxDim {
  int64_t view_dim, storage_dim, size, step;
};
// The mapping of every non-trivial view dim (size > 1, stride != 0) onto distinct storage dims,
// or false when the view is not a box of `dims`.
bool box_dims(const std::vector<int64_t>& dims, const std::vector<int64_t>& sizes,
              const std::vector<int64_t>& strides, std::vector<BoxDim>* out);
// Row-major strides of `dims`.
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims);
// Dims outermost first if `strides` are a permutation of a dense layout of `sizes`, else empty.
std::vector<int64_t> memory_order(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides);

}  // namespace tpu::program
