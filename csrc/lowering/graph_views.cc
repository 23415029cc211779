// View and dtype-copy ops as graphs see them (graph-only rules, registry.h).
//
// In eager mode a view shares its base's storage and runs no module; in a compiled graph every
// value is a logical tensor, so a view is the computation of its elements: a reshape, a
// transpose, a broadcast or a slice. The result types come from PyTorch's meta kernels.
#include <algorithm>

#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// view, reshape, (un)squeeze, flatten, alias, detach: the same elements in the out shape.
std::vector<Value> reshaped(Context& c) {
  return {reshape(c.b, convert(c.b, c.tensor(0), c.out().dtype), c.out().shape)};
}

std::vector<Value> permute(Context& c) {
  int64_t rank = static_cast<int64_t>(c.tensor(0).shape().size());
  std::vector<int64_t> perm;
  for (int64_t d : c.ints(1)) perm.push_back(wrap_dim(d, rank));  // wrap_dims would sort them
  return {transpose(c.b, c.tensor(0), perm)};
}

std::vector<Value> transpose_dims(Context& c) {  // transpose.int(self, dim0, dim1)
  int64_t rank = static_cast<int64_t>(c.tensor(0).shape().size());
  std::vector<int64_t> perm(rank);
  for (int64_t i = 0; i < rank; ++i) perm[i] = i;
  if (rank > 0) std::swap(perm[wrap_dim(c.int_arg(1), rank)], perm[wrap_dim(c.int_arg(2), rank)]);
  return {transpose(c.b, c.tensor(0), perm)};
}

std::vector<Value> t(Context& c) {
  Value x = c.tensor(0);
  return {x.shape().size() < 2 ? x : transpose(c.b, x, {1, 0})};
}

std::vector<Value> expand(Context& c) { return {broadcast_to(c.b, c.tensor(0), c.out().shape)}; }

// Elements start, start + step, ... along `dim`, as many as the out shape has.
Value slice_dim(Builder& b, Value x, int64_t dim, int64_t start, int64_t step, int64_t count) {
  std::vector<int64_t> begin(x.shape().size(), 0), limit = x.shape(), strides(x.shape().size(), 1);
  begin[dim] = start;
  limit[dim] = count == 0 ? start : start + (count - 1) * step + 1;
  strides[dim] = step;
  return slice(b, x, begin, limit, strides);
}

int64_t clamp_index(int64_t i, int64_t size) {
  if (i < 0) i += size;
  return std::clamp<int64_t>(i, 0, size);
}

std::vector<Value> slice_tensor(Context& c) {  // slice.Tensor(self, dim, start?, end?, step)
  Value x = c.tensor(0);
  int64_t rank = static_cast<int64_t>(x.shape().size());
  int64_t dim = wrap_dim(c.has(1) ? c.int_arg(1) : 0, rank);
  int64_t start = c.has(2) ? clamp_index(c.int_arg(2), x.shape()[dim]) : 0;
  int64_t step = c.has(4) ? c.int_arg(4) : 1;
  return {slice_dim(c.b, x, dim, start, step, c.out().shape.at(dim))};
}

std::vector<Value> narrow(Context& c) {  // narrow(self, dim, start, length)
  Value x = c.tensor(0);
  int64_t dim = wrap_dim(c.int_arg(1), static_cast<int64_t>(x.shape().size()));
  int64_t start = c.int_arg(2) < 0 ? c.int_arg(2) + x.shape()[dim] : c.int_arg(2);
  return {slice_dim(c.b, x, dim, start, 1, c.int_arg(3))};
}

std::vector<Value> select_int(Context& c) {  // select.int(self, dim, index)
  Value x = c.tensor(0);
  int64_t dim = wrap_dim(c.int_arg(1), static_cast<int64_t>(x.shape().size()));
  int64_t index = c.int_arg(2) < 0 ? c.int_arg(2) + x.shape()[dim] : c.int_arg(2);
  return {reshape(c.b, slice_dim(c.b, x, dim, index, 1, 1), c.out().shape)};
}

// split.Tensor, split_with_sizes, unbind: consecutive pieces along dim, sized by the outputs.
std::vector<Value> pieces(Context& c, int64_t dim_arg, bool keep_dim) {
  Value x = c.tensor(0);
  int64_t rank = static_cast<int64_t>(x.shape().size());
  int64_t dim = wrap_dim(c.has(dim_arg) ? c.int_arg(dim_arg) : 0, rank);
  std::vector<Value> out;
  int64_t start = 0;
  for (const Type& t : c.out_types) {
    int64_t count = keep_dim ? t.shape.at(dim) : 1;
    out.push_back(reshape(c.b, slice_dim(c.b, x, dim, start, 1, count), t.shape));
    start += count;
  }
  return out;
}

// view.dtype(self, dtype) to an element type of the same width: the same bits. In eager mode
// a view of the storage; a width change is not lowered in a graph.
std::vector<Value> view_dtype(Context& c) {
  Value x = c.tensor(0);
  DType to = c.out().dtype;
  if (bit_width(x.dtype()) != bit_width(to) || x.dtype() == DType::Pred || to == DType::Pred ||
      is_complex(x.dtype()) || is_complex(to))
    throw NotLowerable("view.dtype: only between real types of the same width in a graph");
  return {to == x.dtype() ? x : bitcast_convert(c.b, x, to)};
}

// as_strided(self, size, stride, offset) of a dense value: element-wise gather from its flat
// elements (the compile driver only sends dense inputs; docs/compile.md).
std::vector<Value> as_strided(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  const std::vector<int64_t>& sizes = c.out().shape;
  const std::vector<int64_t>& strides = c.ints(2);
  int64_t offset = c.has(3) ? c.int_arg(3) : 0;
  Value flat = reshape(b, x, {x.type.numel()});
  Value index = constant(b, static_cast<double>(offset), DType::S64, sizes);
  for (size_t d = 0; d < sizes.size(); ++d) {
    Value i = iota(b, Type(DType::S64, sizes), static_cast<int64_t>(d));
    index = add(b, index, mul(b, i, constant(b, static_cast<double>(strides.at(d)), DType::S64, sizes)));
  }
  std::vector<int64_t> index_shape = sizes;
  index_shape.push_back(1);
  GatherDims dims;
  dims.collapsed_slice_dims = {0};
  dims.start_index_map = {0};
  dims.index_vector_dim = static_cast<int64_t>(sizes.size());
  return {gather(b, flat, reshape(b, index, index_shape), dims, {1}, sizes)};
}

// _to_copy(self, dtype, layout, device, ...): within a graph, a dtype conversion.
std::vector<Value> to_copy(Context& c) { return {convert(c.b, c.tensor(0), c.out().dtype)}; }

// view_as_real(z) -> [..., 2] (real, imag); view_as_complex(x[..., 2]) -> complex. In eager
// mode these are views of one storage reinterpreted; in a graph they are the element pairs.
std::vector<Value> view_as_real(Context& c) {
  Builder& b = c.b;
  Value z = c.tensor(0);
  std::vector<int64_t> pair_shape = z.shape();
  pair_shape.push_back(1);
  Type part(real_part(z.dtype()), z.shape());
  Value re = reshape(b, real(b, z), pair_shape);
  Value im = reshape(b, imag(b, z), pair_shape);
  return {concatenate(b, {re, im}, static_cast<int64_t>(pair_shape.size()) - 1)};
}

std::vector<Value> view_as_complex(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  std::vector<int64_t> shape = x.shape(), start(shape.size(), 0), limit = shape, step(shape.size(), 1);
  shape.pop_back();
  limit.back() = 1;
  Value re = reshape(b, slice(b, x, start, limit, step), shape);
  start.back() = 1, limit.back() = 2;
  Value im = reshape(b, slice(b, x, start, limit, step), shape);
  return {complex(b, re, im)};
}

const GraphRegistrar registrar({
    {"view_as_real", view_as_real},
    {"view_as_complex", view_as_complex},
    {"view", reshaped},
    {"_unsafe_view", reshaped},
    {"reshape", reshaped},
    {"_reshape_alias", reshaped},
    {"view_copy", reshaped},
    {"unsqueeze", reshaped},
    {"squeeze", reshaped},
    {"squeeze.dim", reshaped},
    {"squeeze.dims", reshaped},
    {"flatten.using_ints", reshaped},
    {"unflatten.int", reshaped},
    {"alias", reshaped},
    {"detach", reshaped},
    {"lift_fresh_copy", reshaped},
    {"_to_copy", to_copy},
    {"permute", permute},
    {"transpose.int", transpose_dims},
    {"t", t},
    {"numpy_T", [](Context& c) {
       int64_t rank = static_cast<int64_t>(c.tensor(0).shape().size());
       std::vector<int64_t> perm(rank);
       for (int64_t i = 0; i < rank; ++i) perm[i] = rank - 1 - i;
       return std::vector<Value>{transpose(c.b, c.tensor(0), perm)};
     }},
    {"expand", expand},
    {"slice.Tensor", slice_tensor},
    {"narrow", narrow},
    {"select.int", select_int},
    {"split.Tensor", [](Context& c) { return pieces(c, 2, true); }},
    {"split_with_sizes", [](Context& c) { return pieces(c, 2, true); }},
    {"unbind.int", [](Context& c) { return pieces(c, 1, false); }},
    {"as_strided", as_strided},
    {"view.dtype", view_dtype},
});

}  // namespace
}  // namespace tpu::lowering
