// Sliding-window rearrangements: im2col (nn.Unfold), col2im (nn.Fold), unfold_backward
// (Tensor.unfold's gradient) and channel_shuffle.
//
// im2col takes one strided slice of the zero-padded input per kernel offset; col2im places each
// offset's columns back with an interior-padded `pad` and adds them in kernel order, which is
// the order the CPU kernel accumulates in. Only data movement and additions of the window's
// own values: a NaN stays in the windows that hold it.
#include <string>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"
#include "lowering/spatial_helpers.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

struct Window2d {
  std::vector<int64_t> k, d, p, s;
  int64_t out_h = 0, out_w = 0;
};

// (kernel_size, dilation, padding, stride) starting at argument `first`; output extents of an
// (h, w) plane.
Window2d window_of(const Context& c, size_t first, int64_t h, int64_t w) {
  Window2d g{spatial::expand(c.ints(first), 2, 1), spatial::expand(c.ints(first + 1), 2, 1),
             spatial::expand(c.ints(first + 2), 2, 0), spatial::expand(c.ints(first + 3), 2, 1)};
  g.out_h = (h + 2 * g.p[0] - (g.d[0] * (g.k[0] - 1) + 1)) / g.s[0] + 1;
  g.out_w = (w + 2 * g.p[1] - (g.d[1] * (g.k[1] - 1) + 1)) / g.s[1] + 1;
  return g;
}

// im2col(self, kernel_size, dilation, padding, stride): [N,] C, H, W -> [N,] C*kh*kw, L
std::vector<Value> im2col(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  require_dtype(!is_integer(x.dtype()), "im2col_out_cpu", x.dtype());
  const Type& out = c.out();
  if (out.numel() == 0) return {zeros(b, out)};
  bool batched = x.rank() == 4;
  int64_t N = batched ? x.shape()[0] : 1, C = x.shape()[x.rank() - 3];
  int64_t H = x.shape()[x.rank() - 2], W = x.shape()[x.rank() - 1];
  Window2d g = window_of(c, 1, H, W);
  Value xp = pad(b, reshape(b, x, {N, C, H, W}), constant(b, 0, x.dtype()), {0, 0, g.p[0], g.p[1]},
                 {0, 0, g.p[0], g.p[1]}, {0, 0, 0, 0});
  int64_t L = g.out_h * g.out_w;
  std::vector<Value> cols;
  for (int64_t i = 0; i < g.k[0]; ++i) {
    for (int64_t j = 0; j < g.k[1]; ++j) {
      int64_t h0 = i * g.d[0], w0 = j * g.d[1];
      Value t = slice(b, xp, {0, 0, h0, w0}, {N, C, h0 + (g.out_h - 1) * g.s[0] + 1, w0 + (g.out_w - 1) * g.s[1] + 1},
                      {1, 1, g.s[0], g.s[1]});
      cols.push_back(reshape(b, t, {N, C, 1, L}));
    }
  }
  Value y = cols.size() == 1 ? cols[0] : concatenate(b, cols, 2);
  return {reshape(b, y, out.shape)};
}

// col2im(self, output_size, kernel_size, dilation, padding, stride): [N,] C*kh*kw, L -> [N,] C, H, W
std::vector<Value> col2im(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  require_dtype(!is_integer(x.dtype()), "col2im_out_cpu", x.dtype());
  const Type& out = c.out();
  if (out.numel() == 0) return {zeros(b, out)};
  int64_t H = c.ints(1).at(0), W = c.ints(1).at(1);
  Window2d g = window_of(c, 2, H, W);
  int64_t N = x.rank() == 3 ? x.shape()[0] : 1;
  int64_t K = g.k[0] * g.k[1], C = x.shape()[x.rank() - 2] / K;
  DType acc = opmath(out.dtype);
  Value cols = reshape(b, convert(b, x, acc), {N, C, K, g.out_h, g.out_w});
  int64_t Hp = H + 2 * g.p[0], Wp = W + 2 * g.p[1];
  Value sum = constant(b, 0, acc, {N, C, Hp, Wp});
  if (x.type.numel() > 0) {
    for (int64_t i = 0; i < g.k[0]; ++i) {
      for (int64_t j = 0; j < g.k[1]; ++j) {
        Value t = reshape(b, slice(b, cols, {0, 0, i * g.k[1] + j, 0, 0}, {N, C, i * g.k[1] + j + 1, g.out_h, g.out_w},
                                   {1, 1, 1, 1, 1}),
                          {N, C, g.out_h, g.out_w});
        int64_t h0 = i * g.d[0], w0 = j * g.d[1];
        int64_t h_hi = Hp - (h0 + (g.out_h - 1) * g.s[0] + 1), w_hi = Wp - (w0 + (g.out_w - 1) * g.s[1] + 1);
        // A window that starts past the padded plane adds nothing (its columns read padding).
        if (h_hi < 0 || w_hi < 0) continue;
        sum = add(b, sum, pad(b, t, constant(b, 0, acc), {0, 0, h0, w0}, {0, 0, h_hi, w_hi},
                              {0, 0, g.s[0] - 1, g.s[1] - 1}));
      }
    }
  }
  Value y = slice(b, sum, {0, 0, g.p[0], g.p[1]}, {N, C, g.p[0] + H, g.p[1] + W}, {1, 1, 1, 1});
  return {convert(b, reshape(b, y, out.shape), out.dtype)};
}

// unfold_backward(grad_in, input_sizes, dim, size, step): grad_in has the input's shape with
// `dim` replaced by the window count and a trailing `size` dim; window w, offset k came from
// position w * step + k. Small windows: one pad per offset (interior step - 1) places it, and
// the offsets add in order. Long windows: one scatter-add of all (w, k) (a loop of `size` pads
// would make the module O(size) long).
Value unfold_backward_scatter(Builder& b, Value gf, const std::vector<int64_t>& shape, int64_t d, int64_t step) {
  int64_t gr = gf.rank(), nw = gf.shape()[d], size = gf.shape()[gr - 1];
  // [..., nw, ..., size] -> [nw, size, rest...]
  std::vector<int64_t> perm{d, gr - 1}, rest;
  for (int64_t i = 0; i < gr - 1; ++i) {
    if (i != d) {
      perm.push_back(i);
      rest.push_back(gf.shape()[i]);
    }
  }
  Value upd = transpose(b, gf, perm);
  Value pos = add(b, mul(b, iota(b, Type(DType::S64, {nw, size, 1}), 0),
                         constant(b, static_cast<double>(step), DType::S64, {nw, size, 1})),
                  iota(b, Type(DType::S64, {nw, size, 1}), 1));
  std::vector<int64_t> target{shape[d]};
  target.insert(target.end(), rest.begin(), rest.end());
  ScatterDims sd;
  for (int64_t i = 0; i < static_cast<int64_t>(rest.size()); ++i) sd.update_window_dims.push_back(2 + i);
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 2;
  Value r = scatter(b, zeros(b, Type(gf.dtype(), target)), pos, upd, sd, "add");
  // [len, rest...] -> the input's dim order
  std::vector<int64_t> inv(shape.size());
  std::vector<int64_t> order{d};
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) if (i != d) order.push_back(i);
  for (size_t i = 0; i < order.size(); ++i) inv[order[i]] = static_cast<int64_t>(i);
  return transpose(b, r, inv);
}

std::vector<Value> unfold_backward(Context& c) {
  Builder& b = c.b;
  Value g = c.tensor(0);
  const Type& out = c.out();
  int64_t r = out.rank();
  int64_t dim = wrap_dim(c.int_arg(2), r), size = c.int_arg(3), step = c.int_arg(4);
  // grad is the unfold's result: input_sizes with dim replaced by the window count, then size.
  // The CPU kernel reads it with that layout unchecked (out of bounds when it is smaller).
  if (size < 0 || step <= 0) throw InvalidCall("unfold_backward: size must be >= 0 and step > 0");
  std::vector<int64_t> want = out.shape;
  if (r > 0) want[dim] = out.shape[dim] >= size ? (out.shape[dim] - size) / step + 1 : 0;
  want.push_back(size);
  if (g.shape() != want) {
    throw InvalidCall("unfold_backward: grad has shape " + shape_str(g.shape()) + ", expected " + shape_str(want) +
                      " (input_sizes " + shape_str(out.shape) + " unfolded along " + std::to_string(dim) +
                      " with size " + std::to_string(size) + " and step " + std::to_string(step) + ")");
  }
  if (out.numel() == 0) return {zeros(b, out)};
  DType acc = opmath(out.dtype);
  int64_t len = r == 0 ? 1 : out.shape[dim];
  int64_t nw = r == 0 ? 1 : g.shape()[dim];
  Value gf = convert(b, g, acc);
  std::vector<int64_t> shape = r == 0 ? std::vector<int64_t>{1} : out.shape;
  int64_t d = r == 0 ? 0 : dim;
  if (g.type.numel() == 0) return {zeros(b, out)};
  if (size > 16) {
    if (r == 0) gf = reshape(b, gf, {1, size});
    return {convert(b, reshape(b, unfold_backward_scatter(b, gf, shape, d, step), out.shape), out.dtype)};
  }
  Value sum = constant(b, 0, acc, shape);
  int64_t gr = g.rank();
  for (int64_t k = 0; k < size; ++k) {
    std::vector<int64_t> lo(gr, 0), hi = g.shape(), st(gr, 1);
    lo[gr - 1] = k;
    hi[gr - 1] = k + 1;
    std::vector<int64_t> piece_shape(g.shape().begin(), g.shape().end() - 1);
    if (piece_shape.empty()) piece_shape = {1};
    Value piece = reshape(b, slice(b, gf, lo, hi, st), piece_shape);
    std::vector<int64_t> plo(shape.size(), 0), phi(shape.size(), 0), pin(shape.size(), 0);
    plo[d] = k;
    pin[d] = step - 1;
    phi[d] = len - (k + (nw - 1) * step + 1);
    sum = add(b, sum, pad(b, piece, constant(b, 0, acc), plo, phi, pin));
  }
  return {convert(b, reshape(b, sum, out.shape), out.dtype)};
}

// channel_shuffle(self, groups): [N, g, C/g, *] -> [N, C/g, g, *]
std::vector<Value> channel_shuffle(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  int64_t groups = c.int_arg(1);
  if (x.rank() <= 2) {
    throw InvalidCall("channel_shuffle expects input with > 2 dims, but got input with sizes " + shape_str(x.shape()));
  }
  if (groups <= 0) {
    throw InvalidCall("Number of groups to divide channels in must be positive. Value of groups:" + std::to_string(groups));
  }
  int64_t C = x.shape()[1];
  if (C % groups != 0) {
    throw InvalidCall("Number of channels must be divisible by groups. Got " + std::to_string(C) + " channels and " +
                      std::to_string(groups) + " groups.");
  }
  if (x.type.numel() == 0) return {zeros(b, c.out())};
  std::vector<int64_t> split = x.shape();
  split[1] = C / groups;
  split.insert(split.begin() + 1, groups);
  std::vector<int64_t> perm{0, 2, 1};
  for (int64_t i = 3; i < static_cast<int64_t>(split.size()); ++i) perm.push_back(i);
  return {reshape(b, transpose(b, reshape(b, x, split), perm), x.shape())};
}

const Registrar registrar({
    {"im2col", im2col},
    {"col2im", col2im},
    {"unfold_backward", unfold_backward},
    {"channel_shuffle", channel_shuffle},
});

}  // namespace
}  // namespace tpu::lowering
