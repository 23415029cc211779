#include "lowering/views.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "hlo/ops.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

struct Dim {
  int64_t index, size, stride;
};

// Dims that address memory: size > 1 and stride != 0, ordered by stride (outermost first).
std::vector<Dim> memory_dims(const ViewLayout& v) {
  std::vector<Dim> dims;
  for (size_t i = 0; i < v.sizes.size(); ++i) {
    if (v.sizes[i] > 1 && v.strides[i] != 0) dims.push_back({int64_t(i), v.sizes[i], v.strides[i]});
  }
  std::stable_sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& b) { return a.stride > b.stride; });
  return dims;
}

bool has_expanded_dim(const ViewLayout& v) {
  for (size_t i = 0; i < v.sizes.size(); ++i) {
    if (v.sizes[i] > 1 && v.strides[i] == 0) return true;
  }
  return false;
}

// The window grouping: [n1, s1/s2, ..., s_{k-1}/s_k, s_k]; empty when strides don't allow it.
std::vector<int64_t> window_shape(const std::vector<Dim>& dims) {
  if (dims.empty()) return {1};
  std::vector<int64_t> shape{dims[0].size};
  for (size_t j = 0; j + 1 < dims.size(); ++j) {
    if (dims[j].stride < 0 || dims[j].stride % dims[j + 1].stride != 0 ||
        dims[j].stride < dims[j + 1].size * dims[j + 1].stride) {
      return {};
    }
    shape.push_back(dims[j].stride / dims[j + 1].stride);
  }
  if (dims.back().stride < 1) return {};
  shape.push_back(dims.back().stride);
  return shape;
}

Value offset_or_zero(Builder& b, const ViewLayout& v) {
  return v.offset.valid() ? v.offset : constant(b, 0, DType::S64);
}

// Flat indices of every view element: offset + sum(i_d * stride_d), shape [numel, 1].
Value element_indices(Builder& b, const ViewLayout& v) {
  Type t(DType::S64, v.sizes);
  Value idx = constant(b, 0, DType::S64, v.sizes);
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    if (v.sizes[d] == 1 || v.strides[d] == 0) continue;
    Value i = iota(b, t, static_cast<int64_t>(d));
    idx = add(b, idx, mul(b, i, constant(b, static_cast<double>(v.strides[d]), DType::S64, v.sizes)));
  }
  idx = add(b, idx, broadcast_in_dim(b, offset_or_zero(b, v), v.sizes, {}));
  return reshape(b, idx, {v.numel(), 1});
}

// Flat storage, padded at the end when the window may run past it.
Value padded(Builder& b, Value flat, int64_t pad_by) {
  if (pad_by <= 0) return flat;
  return pad(b, flat, constant(b, 0, flat.dtype()), {0}, {pad_by}, {0});
}

// The window of the storage the view lives in, and the padding added to reach it.
Value take_window(Builder& b, Value flat, const ViewLayout& v, int64_t length, int64_t* pad_by) {
  *pad_by = v.window_fits ? 0 : length;
  if (!v.offset.valid() && length <= v.storage_numel) {
    *pad_by = 0;
    return slice(b, flat, {0}, {length}, {1});
  }
  Value source = padded(b, flat, *pad_by);
  return dynamic_slice(b, source, {offset_or_zero(b, v)}, {length});
}

// Permutation taking dims from stride order back to the view's order.
std::vector<int64_t> to_view_order(const std::vector<Dim>& dims) {
  std::vector<int64_t> order(dims.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return dims[a].index < dims[b].index; });
  return order;
}

std::vector<int64_t> sizes_of(const std::vector<Dim>& dims) {
  std::vector<int64_t> s;
  for (const Dim& d : dims) s.push_back(d.size);
  return s;
}

}  // namespace

int64_t ViewLayout::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool ViewLayout::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    if (sizes[i] != 1 && strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

bool ViewLayout::covers_storage() const {
  return !offset.valid() && is_contiguous() && numel() == storage_numel;
}

int64_t ViewLayout::window_length() const {
  std::vector<Dim> dims = memory_dims(*this);
  std::vector<int64_t> shape = window_shape(dims);
  if (shape.empty()) return -1;
  return dims.empty() ? 1 : dims[0].size * dims[0].stride;
}

Value read_view(Builder& b, Value flat, const ViewLayout& v) {
  if (v.numel() == 0) return constant(b, 0, flat.dtype(), v.sizes);
  if (v.covers_storage()) return reshape(b, flat, v.sizes);
  std::vector<Dim> dims = memory_dims(v);
  std::vector<int64_t> shape = window_shape(dims);
  if (shape.empty()) {  // overlapping or irregular strides: gather element by element
    GatherDims g{{}, {0}, {0}, 1};
    Value x = gather(b, flat, element_indices(b, v), g, {1}, {v.numel()});
    return reshape(b, x, v.sizes);
  }
  int64_t length = dims.empty() ? 1 : dims[0].size * dims[0].stride;
  int64_t pad_by = 0;
  Value window = reshape(b, take_window(b, flat, v, length, &pad_by), shape);
  std::vector<int64_t> limit;
  for (size_t j = 0; j < dims.size(); ++j) limit.push_back(dims[j].size);
  limit.push_back(1);
  window = slice(b, window, std::vector<int64_t>(shape.size(), 0), limit,
                 std::vector<int64_t>(shape.size(), 1));
  Value x = reshape(b, window, sizes_of(dims));
  x = transpose(b, x, to_view_order(dims));
  // Restore size-1 dims and broadcast expanded (stride-0) dims.
  std::vector<int64_t> unexpanded;
  for (size_t i = 0; i < v.sizes.size(); ++i) unexpanded.push_back(v.strides[i] == 0 ? 1 : v.sizes[i]);
  x = reshape(b, x, unexpanded);
  return broadcast_to(b, x, v.sizes);
}

Value write_view(Builder& b, Value flat, const ViewLayout& v, Value update) {
  if (v.numel() == 0) return flat;
  if (has_expanded_dim(v)) {
    throw std::invalid_argument(
        "unsupported operation: more than one element of the written-to tensor refers to a "
        "single memory location. Please clone() the tensor before performing the operation.");
  }
  if (v.covers_storage()) return reshape(b, update, {v.storage_numel});
  std::vector<Dim> dims = memory_dims(v);
  std::vector<int64_t> shape = window_shape(dims);
  if (shape.empty()) {
    ScatterDims s{{}, {0}, {0}, 1};
    return scatter(b, flat, element_indices(b, v), reshape(b, update, {v.numel()}), s, "");
  }
  int64_t length = dims.empty() ? 1 : dims[0].size * dims[0].stride;
  int64_t pad_by = 0;
  Value window = reshape(b, take_window(b, flat, v, length, &pad_by), shape);
  // The update in stride order, shaped like the leading corner of the grouped window.
  std::vector<int64_t> squeezed;
  for (const Dim& d : dims) squeezed.push_back(d.size);
  Value u = reshape(b, update, [&] {
    std::vector<int64_t> s;
    for (size_t i = 0; i < v.sizes.size(); ++i)
      if (v.sizes[i] > 1) s.push_back(v.sizes[i]);
    return s;
  }());
  std::vector<int64_t> order = to_view_order(dims);  // stride order -> view order
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = static_cast<int64_t>(i);
  u = transpose(b, u, inverse);
  squeezed.push_back(1);
  u = reshape(b, u, squeezed);
  std::vector<Value> zeros(shape.size(), constant(b, 0, DType::S64));
  window = dynamic_update_slice(b, window, u, zeros);
  window = reshape(b, window, {length});
  if (!v.offset.valid() && length <= v.storage_numel) {
    Value head = dynamic_update_slice(b, flat, window, {constant(b, 0, DType::S64)});
    return head;
  }
  Value target = padded(b, flat, pad_by);
  target = dynamic_update_slice(b, target, window, {offset_or_zero(b, v)});
  return pad_by > 0 ? slice(b, target, {0}, {v.storage_numel}, {1}) : target;
}

}  // namespace tpu::lowering
