// Reflection and replication padding (1d/2d/3d) and their backward ops.
//
// padding lists (left, right) pairs starting from the last dimension, as in F.pad. The pad is
// built per dimension from slices: reflection mirrors the edge-excluded border, replication
// repeats the edge. A negative amount crops, as on the CPU (the meta kernel has validated the
// sizes). The backward ops fold each border's gradient back onto the rows it was copied from.
#include <algorithm>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

Value slice_dim(Builder& b, Value x, int64_t dim, int64_t start, int64_t limit) {
  std::vector<int64_t> lo(x.rank(), 0), hi = x.shape(), st(x.rank(), 1);
  lo[dim] = start;
  hi[dim] = limit;
  return slice(b, x, lo, hi, st);
}

Value repeat_dim(Builder& b, Value row, int64_t dim, int64_t times) {
  std::vector<int64_t> shape = row.shape(), dims(row.rank());
  for (int64_t i = 0; i < row.rank(); ++i) dims[i] = i;
  shape[dim] = times;
  return broadcast_in_dim(b, row, shape, dims);
}

// Zero padding of `x` along one dimension.
Value zero_pad_dim(Builder& b, Value x, int64_t dim, int64_t low, int64_t high) {
  std::vector<int64_t> lo(x.rank(), 0), hi(x.rank(), 0), in(x.rank(), 0);
  lo[dim] = low;
  hi[dim] = high;
  return pad(b, x, constant(b, 0, x.dtype()), lo, hi, in);
}

// Sum over `dim`, keeping it with size 1.
Value sum_keep(Builder& b, Value x, int64_t dim) {
  std::vector<int64_t> shape = x.shape();
  shape[dim] = 1;
  return reshape(b, reduce(b, x, {dim}, "add"), shape);
}

struct DimPad {
  int64_t dim, lo, hi;
};

std::vector<DimPad> dim_pads(const std::vector<int64_t>& padding, int64_t rank) {
  std::vector<DimPad> out;
  for (size_t i = 0; 2 * i + 1 < padding.size(); ++i) {
    out.push_back({rank - 1 - static_cast<int64_t>(i), padding[2 * i], padding[2 * i + 1]});
  }
  return out;
}

Value pad_forward(Builder& b, Value x, const std::vector<int64_t>& padding, bool reflect) {
  for (const DimPad& p : dim_pads(padding, x.rank())) {
    int64_t n = x.shape()[p.dim];
    int64_t lo = std::max<int64_t>(p.lo, 0), hi = std::max<int64_t>(p.hi, 0);
    std::vector<Value> parts;
    if (lo > 0) {
      parts.push_back(reflect ? reverse(b, slice_dim(b, x, p.dim, 1, lo + 1), {p.dim})
                              : repeat_dim(b, slice_dim(b, x, p.dim, 0, 1), p.dim, lo));
    }
    parts.push_back(x);
    if (hi > 0) {
      parts.push_back(reflect ? reverse(b, slice_dim(b, x, p.dim, n - 1 - hi, n - 1), {p.dim})
                              : repeat_dim(b, slice_dim(b, x, p.dim, n - 1, n), p.dim, hi));
    }
    Value y = parts.size() == 1 ? x : concatenate(b, parts, p.dim);
    int64_t len = y.shape()[p.dim];
    int64_t crop_lo = std::max<int64_t>(-p.lo, 0), crop_hi = std::max<int64_t>(-p.hi, 0);
    x = crop_lo + crop_hi > 0 ? slice_dim(b, y, p.dim, crop_lo, len - crop_hi) : y;
  }
  return x;
}

Value pad_backward(Builder& b, Value g, const std::vector<int64_t>& in_shape,
                   const std::vector<int64_t>& padding, bool reflect) {
  for (const DimPad& p : dim_pads(padding, g.rank())) {
    int64_t n = in_shape[p.dim];
    // Cropped rows got no gradient: restore them as zeros, then fold the positive borders.
    int64_t crop_lo = std::max<int64_t>(-p.lo, 0), crop_hi = std::max<int64_t>(-p.hi, 0);
    if (crop_lo + crop_hi > 0) g = zero_pad_dim(b, g, p.dim, crop_lo, crop_hi);
    int64_t lo = std::max<int64_t>(p.lo, 0), hi = std::max<int64_t>(p.hi, 0);
    Value r = slice_dim(b, g, p.dim, lo, lo + n);
    if (lo > 0) {
      Value left = slice_dim(b, g, p.dim, 0, lo);
      Value folded = reflect ? zero_pad_dim(b, reverse(b, left, {p.dim}), p.dim, 1, n - 1 - lo)
                             : zero_pad_dim(b, sum_keep(b, left, p.dim), p.dim, 0, n - 1);
      r = add(b, r, folded);
    }
    if (hi > 0) {
      Value right = slice_dim(b, g, p.dim, lo + n, lo + n + hi);
      Value folded = reflect ? zero_pad_dim(b, reverse(b, right, {p.dim}), p.dim, n - 1 - hi, 1)
                             : zero_pad_dim(b, sum_keep(b, right, p.dim), p.dim, n - 1, 0);
      r = add(b, r, folded);
    }
    g = r;
  }
  return g;
}

Rule forward_rule(bool reflect) {
  return [reflect](Context& c) {
    Value x = c.tensor(0);
    // The CPU has no bool padding kernels: decline, so that it raises its own error.
    if (x.dtype() == DType::Pred) throw NotLowerable("padding of a bool tensor");
    Value r = pad_forward(c.b, x, c.ints(1), reflect);
    return std::vector<Value>{convert(c.b, reshape(c.b, r, c.out().shape), c.out().dtype)};
  };
}

// *_backward(grad_output, self, padding)
Rule backward_rule(bool reflect) {
  return [reflect](Context& c) {
    DType out = c.out().dtype;
    // grad_output is the forward's result: input padded by (left, right) per padded dim, last dim
    // first. The CPU checks only the padded widths and reads other dims unchecked.
    std::vector<int64_t> want = c.tensor(1).shape();
    const std::vector<int64_t>& pad = c.ints(2);
    int64_t dims = static_cast<int64_t>(pad.size() / 2), rank = static_cast<int64_t>(want.size());
    if (rank != dims + 1 && rank != dims + 2) {  // the forward's check; the CPU backward misreads others
      throw InvalidCall("padding backward expects a " + std::to_string(dims + 1) + "-D or " + std::to_string(dims + 2) +
                        "-D input, got " + shape_str(want));
    }
    for (int64_t d = 0; d < dims; ++d) want[rank - 1 - d] += pad[2 * d] + pad[2 * d + 1];
    if (c.tensor(0).shape() != want) {
      throw InvalidCall("grad_output has shape " + shape_str(c.tensor(0).shape()) + ", expected " + shape_str(want) +
                        " (input " + shape_str(c.tensor(1).shape()) + " padded by " + shape_str(pad) + ")");
    }
    Value g = convert(c.b, c.tensor(0), opmath(out));
    Value r = pad_backward(c.b, g, c.tensor(1).shape(), c.ints(2), reflect);
    return std::vector<Value>{convert(c.b, r, out)};
  };
}

const Registrar registrar({
    {"reflection_pad1d", forward_rule(true)},
    {"reflection_pad2d", forward_rule(true)},
    {"reflection_pad3d", forward_rule(true)},
    {"replication_pad1d", forward_rule(false)},
    {"replication_pad2d", forward_rule(false)},
    {"replication_pad3d", forward_rule(false)},
    {"reflection_pad1d_backward", backward_rule(true)},
    {"reflection_pad1d_backward.grad_input", backward_rule(true)},
    {"reflection_pad2d_backward", backward_rule(true)},
    {"reflection_pad2d_backward.grad_input", backward_rule(true)},
    {"reflection_pad3d_backward", backward_rule(true)},
    {"reflection_pad3d_backward.grad_input", backward_rule(true)},
    {"replication_pad1d_backward", backward_rule(false)},
    {"replication_pad1d_backward.grad_input", backward_rule(false)},
    {"replication_pad2d_backward", backward_rule(false)},
    {"replication_pad2d_backward.grad_input", backward_rule(false)},
    {"replication_pad3d_backward", backward_rule(false)},
    {"replication_pad3d_backward.grad_input", backward_rule(false)},
});

}  // namespace
}  // namespace tpu::lowering
