#include "program/views.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "hlo/ops.h"

namespace tpu::program {
namespace {

using namespace hlo;

// ---- Boxes of a shaped storage -------------------------------------------------------------

// Start index along every storage dim: (offset / stride_k) % dim_k, or zeros without an offset.
// In 32 bits where the storage has fewer than 2^31 elements (the offset is below that): a TPU
// has no 64-bit integer unit, and libtpu emulates each s64 division or remainder with some
// thousand scalar u32 operations (a module with a runtime offset was ~3500 lines of them, and
// had no estimate in libtpu's cost analysis).
std::vector<Value> box_starts(Builder& b, const std::vector<int64_t>& dims, const Value& offset) {
  std::vector<int64_t> s = row_major_strides(dims);
  const int64_t elements = std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<int64_t>());
  const DType index = elements <= std::numeric_limits<int32_t>::max() ? DType::S32 : DType::S64;
  Value start = offset.valid() ? convert(b, offset, index) : Value();
  std::vector<Value> starts;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (!start.valid()) {
      starts.push_back(constant(b, 0, index));
      continue;
    }
    Value q = div(b, start, constant(b, static_cast<double>(s[k]), index));
    starts.push_back(binary(b, Binary::Remainder, q, constant(b, static_cast<double>(dims[k]), index)));
  }
  return starts;
}

std::vector<BoxDim> sorted_by(std::vector<BoxDim> box, bool by_storage) {
  std::stable_sort(box.begin(), box.end(), [&](const BoxDim& a, const BoxDim& c) {
    return by_storage ? a.storage_dim < c.storage_dim : a.view_dim < c.view_dim;
  });
  return box;
}

// perm[j] = position in `from` of the j-th dim of `to` (both lists of the same box dims).
std::vector<int64_t> permutation(const std::vector<BoxDim>& from, const std::vector<BoxDim>& to) {
  std::vector<int64_t> perm;
  for (const BoxDim& t : to) {
    for (size_t i = 0; i < from.size(); ++i) {
      if (from[i].view_dim == t.view_dim) perm.push_back(static_cast<int64_t>(i));
    }
  }
  return perm;
}

std::vector<int64_t> sizes_of(const std::vector<BoxDim>& box) {
  std::vector<int64_t> s;
  for (const BoxDim& d : box) s.push_back(d.size);
  return s;
}

// View sizes with expanded (stride-0) dims as 1: what the memory holds before broadcasting.
std::vector<int64_t> unexpanded(const ViewAccess& v) {
  std::vector<int64_t> s;
  for (size_t i = 0; i < v.sizes.size(); ++i) s.push_back(v.strides[i] == 0 ? 1 : v.sizes[i]);
  return s;
}

Value read_box(Builder& b, Value storage, const ViewAccess& v, const std::vector<BoxDim>& box) {
  const std::vector<int64_t>& dims = storage.shape();
  std::vector<int64_t> extent(dims.size(), 1), step(dims.size(), 1);
  bool stepped = false;
  for (const BoxDim& d : box) {
    extent[d.storage_dim] = (d.size - 1) * d.step + 1;
    step[d.storage_dim] = d.step;
    stepped |= d.step > 1;
  }
  std::vector<int64_t> zeros(dims.size(), 0);
  Value x = v.offset.valid() ? dynamic_slice(b, storage, box_starts(b, dims, v.offset), extent)
                             : slice(b, storage, zeros, extent, std::vector<int64_t>(dims.size(), 1));
  if (stepped) x = slice(b, x, zeros, extent, step);
  std::vector<BoxDim> in_storage = sorted_by(box, true), in_view = sorted_by(box, false);
  x = reshape(b, x, sizes_of(in_storage));
  x = transpose(b, x, permutation(in_storage, in_view));
  return broadcast_to(b, reshape(b, x, unexpanded(v)), v.sizes);
}

Value write_box(Builder& b, Value storage, const ViewAccess& v, const std::vector<BoxDim>& box, Value update) {
  const std::vector<int64_t>& dims = storage.shape();
  std::vector<BoxDim> in_storage = sorted_by(box, true), in_view = sorted_by(box, false);
  Value u = reshape(b, update, sizes_of(in_view));
  u = transpose(b, u, permutation(in_view, in_storage));
  std::vector<int64_t> extent(dims.size(), 1);
  for (const BoxDim& d : box) extent[d.storage_dim] = d.size;
  u = reshape(b, u, extent);
  return dynamic_update_slice(b, storage, u, box_starts(b, dims, v.offset));
}

// ---- Windows of a flat storage ---------------------------------------------------------------

struct Dim {
  int64_t index, size, stride;
};

std::vector<Dim> memory_dims(const ViewAccess& v) {
  std::vector<Dim> dims;
  for (size_t i = 0; i < v.sizes.size(); ++i) {
    if (v.sizes[i] > 1 && v.strides[i] != 0) dims.push_back({int64_t(i), v.sizes[i], v.strides[i]});
  }
  std::stable_sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& c) { return a.stride > c.stride; });
  return dims;
}

// The window grouping [n1, s1/s2, ..., s_{k-1}/s_k, s_k] (Access::Window guarantees it exists).
std::vector<int64_t> window_shape(const std::vector<Dim>& dims) {
  if (dims.empty()) return {1};
  std::vector<int64_t> shape{dims[0].size};
  for (size_t j = 0; j + 1 < dims.size(); ++j) shape.push_back(dims[j].stride / dims[j + 1].stride);
  shape.push_back(dims.back().stride);
  return shape;
}

int64_t window_length(const std::vector<Dim>& dims) { return dims.empty() ? 1 : dims[0].size * dims[0].stride; }

Value offset_or_zero(Builder& b, const ViewAccess& v) {
  return v.offset.valid() ? v.offset : constant(b, 0, DType::S64);
}

// Flat indices of every view element: offset + sum(i_d * stride_d), shape [numel, 1]; in 32 bits
// when the flat storage has fewer than 2^31 elements (as box_starts, for a TPU's sake).
Value element_indices(Builder& b, const ViewAccess& v, int64_t storage_elements) {
  const DType index = storage_elements <= std::numeric_limits<int32_t>::max() ? DType::S32 : DType::S64;
  Type t(index, v.sizes);
  Value idx = constant(b, 0, index, v.sizes);
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    if (v.sizes[d] == 1 || v.strides[d] == 0) continue;
    Value i = iota(b, t, static_cast<int64_t>(d));
    idx = add(b, idx, mul(b, i, constant(b, static_cast<double>(v.strides[d]), index, v.sizes)));
  }
  idx = add(b, idx, broadcast_in_dim(b, convert(b, offset_or_zero(b, v), index), v.sizes, {}));
  return reshape(b, idx, {v.numel(), 1});
}

// The window of the flat storage the view lives in; `pad_by` elements are appended first when
// the window may run past the storage end (Access::PaddedWindow).
Value take_window(Builder& b, Value flat, const ViewAccess& v, int64_t length, int64_t pad_by) {
  int64_t numel = flat.shape()[0];
  if (!v.offset.valid() && length <= numel) return slice(b, flat, {0}, {length}, {1});
  if (pad_by > 0) flat = pad(b, flat, constant(b, 0, flat.dtype()), {0}, {pad_by}, {0});
  return dynamic_slice(b, flat, {offset_or_zero(b, v)}, {length});
}

// Permutation taking dims from stride order back to the view's order.
std::vector<int64_t> to_view_order(const std::vector<Dim>& dims) {
  std::vector<int64_t> order(dims.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return dims[a].index < dims[c].index; });
  return order;
}

Value read_flat(Builder& b, Value flat, const ViewAccess& v) {
  if (v.access == Access::Gather) {
    GatherDims g{{}, {0}, {0}, 1};
    return reshape(b, gather(b, flat, element_indices(b, v, flat.shape()[0]), g, {1}, {v.numel()}), v.sizes);
  }
  std::vector<Dim> dims = memory_dims(v);
  std::vector<int64_t> shape = window_shape(dims);
  int64_t length = window_length(dims);
  int64_t pad_by = v.access == Access::PaddedWindow ? length : 0;
  Value window = reshape(b, take_window(b, flat, v, length, pad_by), shape);
  std::vector<int64_t> limit;
  for (const Dim& d : dims) limit.push_back(d.size);
  limit.push_back(1);
  window = slice(b, window, std::vector<int64_t>(shape.size(), 0), limit, std::vector<int64_t>(shape.size(), 1));
  std::vector<int64_t> squeezed;
  for (const Dim& d : dims) squeezed.push_back(d.size);
  Value x = transpose(b, reshape(b, window, squeezed), to_view_order(dims));
  return broadcast_to(b, reshape(b, x, unexpanded(v)), v.sizes);
}

Value write_flat(Builder& b, Value flat, const ViewAccess& v, Value update) {
  if (v.access == Access::Gather) {
    ScatterDims s{{}, {0}, {0}, 1};
    return scatter(b, flat, element_indices(b, v, flat.shape()[0]), reshape(b, update, {v.numel()}), s, "");
  }
  int64_t numel = flat.shape()[0];
  std::vector<Dim> dims = memory_dims(v);
  std::vector<int64_t> shape = window_shape(dims);
  int64_t length = window_length(dims);
  int64_t pad_by = v.access == Access::PaddedWindow ? length : 0;
  Value window = reshape(b, take_window(b, flat, v, length, pad_by), shape);
  // The update in stride order, shaped like the leading corner of the grouped window.
  std::vector<int64_t> squeezed, view_squeezed;
  for (const Dim& d : dims) squeezed.push_back(d.size);
  for (int64_t s : v.sizes)
    if (s > 1) view_squeezed.push_back(s);
  std::vector<int64_t> order = to_view_order(dims);
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = static_cast<int64_t>(i);
  Value u = transpose(b, reshape(b, update, view_squeezed), inverse);
  squeezed.push_back(1);
  u = reshape(b, u, squeezed);
  std::vector<Value> zeros(shape.size(), constant(b, 0, DType::S64));
  window = reshape(b, dynamic_update_slice(b, window, u, zeros), {length});
  if (!v.offset.valid() && length <= numel) return dynamic_update_slice(b, flat, window, {constant(b, 0, DType::S64)});
  Value target = pad_by > 0 ? pad(b, flat, constant(b, 0, flat.dtype()), {0}, {pad_by}, {0}) : flat;
  target = dynamic_update_slice(b, target, window, {offset_or_zero(b, v)});
  return pad_by > 0 ? slice(b, target, {0}, {numel}, {1}) : target;
}

int64_t numel_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

bool has_expanded_dim(const ViewAccess& v) {
  for (size_t i = 0; i < v.sizes.size(); ++i) {
    if (v.sizes[i] > 1 && v.strides[i] == 0) return true;
  }
  return false;
}

}  // namespace

int64_t ViewAccess::numel() const { return numel_of(sizes); }

Value read_view(Builder& b, Value storage, const ViewAccess& v) {
  switch (v.access) {
    case Access::Empty:
      return constant(b, 0, storage.dtype(), v.sizes);
    case Access::Whole:
      return reshape(b, storage, v.sizes);
    case Access::Box: {
      std::vector<BoxDim> box;
      box_dims(storage.shape(), v.sizes, v.strides, &box);
      return read_box(b, storage, v, box);
    }
    default:
      return read_flat(b, reshape(b, storage, {numel_of(storage.shape())}), v);
  }
}

Value write_view(Builder& b, Value storage, const ViewAccess& v, Value update) {
  if (v.access == Access::Empty) return storage;
  if (has_expanded_dim(v)) {
    throw std::invalid_argument(
        "unsupported operation: more than one element of the written-to tensor refers to a "
        "single memory location. Please clone() the tensor before performing the operation.");
  }
  if (v.access == Access::Whole) return reshape(b, update, storage.shape());
  if (v.access == Access::Box) {
    std::vector<BoxDim> box;
    box_dims(storage.shape(), v.sizes, v.strides, &box);
    bool unit_steps = std::all_of(box.begin(), box.end(), [](const BoxDim& d) { return d.step == 1; });
    if (unit_steps) return write_box(b, storage, v, box, update);
    // A stepped box (x[::2] = ...) is scattered into the flattened storage.
    ViewAccess window = v;
    window.access = Access::Gather;
    int64_t numel = numel_of(storage.shape());
    Value flat = write_flat(b, reshape(b, storage, {numel}), window, update);
    return reshape(b, flat, storage.shape());
  }
  int64_t numel = numel_of(storage.shape());
  return reshape(b, write_flat(b, reshape(b, storage, {numel}), v, update), storage.shape());
}

}  // namespace tpu::program
