#include "program/layout.h"

#include <algorithm>
#include <numeric>

namespace tpu::program {
namespace {

struct Dim {
  int64_t index, size, stride;
};

// Dims that address memory: size > 1 and stride != 0, outermost (largest stride) first.
std::vector<Dim> memory_dims(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  std::vector<Dim> dims;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] > 1 && strides[i] != 0) dims.push_back({int64_t(i), sizes[i], strides[i]});
  }
  std::stable_sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& b) { return a.stride > b.stride; });
  return dims;
}

bool contiguous(const int64_t* sizes, const int64_t* strides, size_t rank) {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(rank) - 1; i >= 0; --i) {
    if (sizes[i] != 1 && strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

// Length of the flat window a strided view spans, or -1 when its strides do not nest (then
// only a gather reads it). Mirrors the grouping in views.cc.
int64_t window_length(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  std::vector<Dim> dims = memory_dims(sizes, strides);
  if (dims.empty()) return 1;
  for (size_t j = 0; j + 1 < dims.size(); ++j) {
    if (dims[j].stride % dims[j + 1].stride != 0 || dims[j].stride < dims[j + 1].size * dims[j + 1].stride) {
      return -1;
    }
  }
  if (dims.back().stride < 1) return -1;
  return dims[0].size * dims[0].stride;
}

}  // namespace

int64_t Layout::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size());
  int64_t acc = 1;
  for (int64_t i = static_cast<int64_t>(dims.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= std::max<int64_t>(dims[i], 1);
  }
  return s;
}

std::vector<int64_t> memory_order(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  std::vector<int64_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  int64_t expected = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (sizes[*it] != 1 && strides[*it] != expected) return {};
    expected *= sizes[*it];
  }
  return order;
}

bool box_dims(const std::vector<int64_t>& dims, const std::vector<int64_t>& sizes,
              const std::vector<int64_t>& strides, std::vector<BoxDim>* out) {
  std::vector<int64_t> s = row_major_strides(dims);
  std::vector<bool> used(dims.size(), false);
  out->clear();
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] <= 1 || strides[i] == 0) continue;
    // The storage dim whose stride range holds this view stride (size-1 storage dims never do).
    int64_t k = -1;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] > 1 && s[d] <= strides[i] && (d == 0 || strides[i] < s[d - 1])) k = static_cast<int64_t>(d);
    }
    if (k < 0 || used[k] || strides[i] % s[k] != 0) return false;
    int64_t step = strides[i] / s[k];
    if ((sizes[i] - 1) * step >= dims[k]) return false;
    used[k] = true;
    out->push_back({int64_t(i), k, sizes[i], step});
  }
  return true;
}

Access classify(const Layout& layout, const std::vector<int64_t>& sizes,
                const std::vector<int64_t>& strides, int64_t offset) {
  return classify(layout.dims, sizes.data(), strides.data(), sizes.size(), offset);
}

Access classify(const std::vector<int64_t>& dims, const int64_t* size_ptr, const int64_t* stride_ptr,
                size_t rank, int64_t offset) {
  int64_t numel = 1;
  for (size_t i = 0; i < rank; ++i) numel *= size_ptr[i];
  if (numel == 0) return Access::Empty;
  int64_t storage_numel = 1;
  for (int64_t d : dims) storage_numel *= d;
  if (offset == 0 && numel == storage_numel && contiguous(size_ptr, stride_ptr, rank)) return Access::Whole;
  std::vector<int64_t> sizes(size_ptr, size_ptr + rank), strides(stride_ptr, stride_ptr + rank);
  std::vector<BoxDim> box;
  if (!dims.empty() && offset < storage_numel && box_dims(dims, sizes, strides, &box)) {
    std::vector<int64_t> s = row_major_strides(dims);
    bool fits = true;
    for (const BoxDim& d : box) {
      int64_t start = (offset / s[d.storage_dim]) % dims[d.storage_dim];
      fits &= start + (d.size - 1) * d.step < dims[d.storage_dim];
    }
    if (fits) return Access::Box;
  }
  int64_t length = window_length(sizes, strides);
  if (length < 0) return Access::Gather;
  return offset + length <= storage_numel ? Access::Window : Access::PaddedWindow;
}

}  // namespace tpu::program
