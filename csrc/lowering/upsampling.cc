// Upsampling: nearest / nearest-exact in 1-3 D, linear1d, bilinear2d, trilinear3d, bicubic2d
// and the antialiased bilinear / bicubic 2-D resizes, with their backwards.
//
// Every mode is separable: per spatial dim, each output is a weighted sum of a few input taps
// (1 nearest, 2 linear, 4 cubic), done as a gather of the taps (the backward scatter-adds), so
// NaN and inf stay local as on the CPU (a dense matrix product would spread them). Source
// positions are computed with PyTorch's CPU formulas in its arithmetic type (float, or double
// for float64 inputs), so the floor() of a position lands where the CPU's does. Nearest modes
// also run on integer tensors (uint8 images), as on the CPU.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"
#include "lowering/spatial_helpers.h"

namespace tpu::lowering {
namespace {

using namespace hlo;
using namespace spatial;

enum Mode { kNearest, kNearestExact, kLinear, kCubic, kLinearAA, kCubicAA };

// The input-per-output scale (PyTorch's area_pixel_compute_scale / compute_scales_value).
template <typename T>
T scale_of(int64_t in, int64_t out, bool align, bool has_scale, double scale) {
  if (align) return out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
  return (has_scale && scale > 0) ? static_cast<T>(1.0 / scale) : static_cast<T>(in) / static_cast<T>(out);
}

// Taps of one output position: input indices and weights (PyTorch's CPU arithmetic).
struct Taps {
  int64_t k = 1;                 // taps per output
  std::vector<int64_t> index;    // [out, k]
  std::vector<double> weight;    // [out, k]
  std::vector<double> used;      // [out, k] 1/0, empty: all used (padding taps read nothing)
};

template <typename T>
Taps nearest_taps(int64_t in, int64_t out, bool has_scale, double scale, bool exact) {
  Taps t;
  T sc = (has_scale && scale > 0) ? static_cast<T>(1.0 / scale) : static_cast<T>(in) / static_cast<T>(out);
  for (int64_t o = 0; o < out; ++o) {
    int64_t i;
    if (exact) i = std::min(static_cast<int64_t>(std::floor((static_cast<T>(o) + T(0.5)) * sc)), in - 1);
    else if (out == in) i = o;
    else if (out == 2 * in) i = o >> 1;
    else i = std::min(static_cast<int64_t>(std::floor(static_cast<T>(o) * sc)), in - 1);
    t.index.push_back(i);
    t.weight.push_back(1.0);
  }
  return t;
}

template <typename T>
Taps linear_taps(int64_t in, int64_t out, bool align, bool has_scale, double scale) {
  Taps t;
  t.k = 2;
  T sc = scale_of<T>(in, out, align, has_scale, scale);
  for (int64_t o = 0; o < out; ++o) {
    if (out == in) {  // the CPU's compute_source_index_and_lambda copies, whatever the scale says
      t.index.insert(t.index.end(), {o, o});
      t.weight.insert(t.weight.end(), {1.0, 0.0});
      continue;
    }
    T src = align ? sc * static_cast<T>(o) : std::max(sc * (static_cast<T>(o) + T(0.5)) - T(0.5), T(0));
    // The CPU's guard_index_and_lambda: a source past the last input reads the last one with
    // weights (0, 1), so an inf there becomes 0 * inf + 1 * inf = NaN as on the CPU.
    int64_t i0 = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
    T l1 = std::min(std::max(src - static_cast<T>(i0), T(0)), T(1)), l0 = T(1) - l1;
    t.index.insert(t.index.end(), {i0, i1});
    t.weight.insert(t.weight.end(), {static_cast<double>(l0), static_cast<double>(l1)});
  }
  return t;
}

// Keys' cubic convolution with A = -0.75, as in PyTorch's upsample_bicubic2d; the four taps
// are clamped to the input.
template <typename T>
Taps cubic_taps(int64_t in, int64_t out, bool align, bool has_scale, double scale) {
  Taps t;
  t.k = 4;
  const T A = T(-0.75);
  auto near = [&](T x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
  auto far = [&](T x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
  T sc = scale_of<T>(in, out, align, has_scale, scale);
  for (int64_t o = 0; o < out; ++o) {
    T real = align ? sc * static_cast<T>(o) : sc * (static_cast<T>(o) + T(0.5)) - T(0.5);
    T fl = std::floor(real);
    int64_t i = static_cast<int64_t>(fl);
    T x = real - fl;
    T w[4] = {far(x + 1), near(x), near(1 - x), far(2 - x)};
    for (int k = 0; k < 4; ++k) {
      t.index.push_back(std::clamp<int64_t>(i - 1 + k, 0, in - 1));
      t.weight.push_back(static_cast<double>(w[k]));
    }
  }
  return t;
}

// Antialiased (torchvision-style) resampling: a triangle (bilinear) or Keys cubic with a = -0.5
// (bicubic) filter stretched by the scale when downsampling, weights normalised per output,
// as PyTorch's separable CPU kernel computes them.
template <typename T>
Taps aa_taps(int64_t in, int64_t out, bool align, bool has_scale, double scale, bool cubic) {
  T sc = scale_of<T>(in, out, align, has_scale, scale);
  T interp = cubic ? T(4) : T(2);
  T support = sc >= T(1) ? interp * T(0.5) * sc : interp * T(0.5);
  T invscale = sc >= T(1) ? T(1) / sc : T(1);
  auto filter = [&](T x) -> T {
    x = std::abs(x);
    if (!cubic) return x < T(1) ? T(1) - x : T(0);
    const T a = T(-0.5);
    if (x < T(1)) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < T(2)) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return T(0);
  };
  std::vector<int64_t> xmin(out), xsize(out);
  std::vector<T> center(out);
  int64_t K = 1;
  for (int64_t o = 0; o < out; ++o) {
    center[o] = sc * (static_cast<T>(o) + T(0.5));
    xmin[o] = std::max(static_cast<int64_t>(center[o] - support + T(0.5)), int64_t(0));
    xsize[o] = std::min(static_cast<int64_t>(center[o] + support + T(0.5)), in) - xmin[o];
    K = std::max(K, xsize[o]);
  }
  Taps t;
  t.k = K;
  for (int64_t o = 0; o < out; ++o) {
    std::vector<T> w(K, T(0));
    T total = 0;
    for (int64_t j = 0; j < xsize[o]; ++j) {
      w[j] = filter((static_cast<T>(j + xmin[o]) - center[o] + T(0.5)) * invscale);
      total += w[j];
    }
    for (int64_t j = 0; j < K; ++j) {
      bool live = j < xsize[o];
      t.index.push_back(live ? xmin[o] + j : std::clamp<int64_t>(xmin[o], 0, in - 1));
      t.weight.push_back(live && total != T(0) ? static_cast<double>(w[j] / total) : (live ? static_cast<double>(w[j]) : 0.0));
      t.used.push_back(live ? 1.0 : 0.0);
    }
  }
  return t;
}

struct Dim {
  int64_t in, out;
  bool has_scale;
  double scale;
};

Taps taps(Mode mode, const Dim& d, bool align, bool f64) {
  switch (mode) {
    case kNearest:
    case kNearestExact:
      return f64 ? nearest_taps<double>(d.in, d.out, d.has_scale, d.scale, mode == kNearestExact)
                 : nearest_taps<float>(d.in, d.out, d.has_scale, d.scale, mode == kNearestExact);
    case kLinear:
      return f64 ? linear_taps<double>(d.in, d.out, align, d.has_scale, d.scale)
                 : linear_taps<float>(d.in, d.out, align, d.has_scale, d.scale);
    case kCubic:
      return f64 ? cubic_taps<double>(d.in, d.out, align, d.has_scale, d.scale)
                 : cubic_taps<float>(d.in, d.out, align, d.has_scale, d.scale);
    case kLinearAA:
    case kCubicAA:
      return f64 ? aa_taps<double>(d.in, d.out, align, d.has_scale, d.scale, mode == kCubicAA)
                 : aa_taps<float>(d.in, d.out, align, d.has_scale, d.scale, mode == kCubicAA);
  }
  throw std::logic_error("upsample mode");
}

std::vector<int64_t> last_perm(int64_t r, int64_t dim) {
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r; ++i) if (i != dim) perm.push_back(i);
  perm.push_back(dim);
  return perm;
}

std::vector<int64_t> inverse(const std::vector<int64_t>& p) {
  std::vector<int64_t> inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = static_cast<int64_t>(i);
  return inv;
}

// Which taps read an input ([out, k] broadcast to `shape`, dims r-1 and r).
Value used_mask(Builder& b, const Taps& t, int64_t out, const std::vector<int64_t>& shape, int64_t r) {
  Value m = matrix(b, t.used, out, t.k, DType::F32);
  return broadcast_in_dim(b, compare(b, m, zeros(b, m.type), Direction::NE), shape, {r - 1, r});
}

// y[..., o, ...] = sum_k w[o, k] * x[..., index[o, k], ...] along `dim` (a gather per tap, so a
// NaN reaches only the outputs that read it, as on the CPU).
Value resample(Builder& b, Value x, const Taps& t, int64_t dim, int64_t out) {
  int64_t r = x.rank();
  std::vector<int64_t> perm = last_perm(r, dim);
  Value xt = transpose(b, x, perm);
  std::vector<int64_t> lead(xt.shape().begin(), xt.shape().end() - 1);
  int64_t m = out * t.k;
  GatherDims gd;
  for (int64_t i = 0; i < r - 1; ++i) gd.offset_dims.push_back(i);
  gd.collapsed_slice_dims = {r - 1};
  gd.start_index_map = {r - 1};
  gd.index_vector_dim = 1;
  std::vector<int64_t> sizes = lead, gshape = lead, wshape = lead;
  sizes.push_back(1);
  gshape.push_back(m);
  wshape.insert(wshape.end(), {out, t.k});
  Value g = reshape(b, gather(b, xt, reshape(b, constant_i64_vector(b, t.index), {m, 1}), gd, sizes, gshape), wshape);
  Value y;
  if (t.k == 1) {
    y = reshape(b, g, std::vector<int64_t>(wshape.begin(), wshape.end() - 1));
  } else {
    Value w = broadcast_in_dim(b, matrix(b, t.weight, out, t.k, x.dtype()), wshape, {r - 1, r});
    Value gw = mul(b, g, w);
    if (!t.used.empty()) gw = select(b, used_mask(b, t, out, wshape, r), gw, zeros(b, gw.type));
    y = reduce(b, gw, {r}, "add");
  }
  return transpose(b, y, inverse(perm));
}

// The transpose of resample: grad_in[..., index[o, k], ...] += w[o, k] * grad[..., o, ...].
Value resample_backward(Builder& b, Value g, const Taps& t, int64_t dim, int64_t in) {
  int64_t r = g.rank();
  int64_t out = g.shape()[dim];
  std::vector<int64_t> perm = last_perm(r, dim);
  Value gt = transpose(b, g, perm);
  std::vector<int64_t> lead(gt.shape().begin(), gt.shape().end() - 1);
  int64_t m = out * t.k;
  std::vector<int64_t> wshape = lead, ushape = lead, oshape = lead;
  wshape.insert(wshape.end(), {out, t.k});
  ushape.push_back(m);
  oshape.push_back(in);
  Value u = broadcast_in_dim(b, gt, wshape, range(0, r));
  if (t.k > 1 || t.weight[0] != 1.0) u = mul(b, u, broadcast_in_dim(b, matrix(b, t.weight, out, t.k, g.dtype()), wshape, {r - 1, r}));
  if (!t.used.empty()) u = select(b, used_mask(b, t, out, wshape, r), u, zeros(b, u.type));
  u = reshape(b, u, ushape);
  ScatterDims sd;
  for (int64_t i = 0; i < r - 1; ++i) sd.update_window_dims.push_back(i);
  sd.inserted_window_dims = {r - 1};
  sd.scatter_dims_to_operand_dims = {r - 1};
  sd.index_vector_dim = 1;
  Value res = scatter(b, zeros(b, Type(g.dtype(), oshape)), reshape(b, constant_i64_vector(b, t.index), {m, 1}), u, sd, "add");
  return transpose(b, res, inverse(perm));
}

bool interpolates(Mode m) { return m == kLinear || m == kCubic || m == kLinearAA || m == kCubicAA; }

// Forward (backward = false):  (self, output_size, [align_corners,] scales...)
// Backward (backward = true):  (grad_output, output_size, input_size, [align_corners,] scales...)
Rule upsample(int n, Mode mode, bool backward) {
  return [n, mode, backward](Context& c) {
    Builder& b = c.b;
    Value x = c.tensor(0);
    const Type& out = c.out();
    std::vector<int64_t> out_size = c.ints(1);
    if (static_cast<int>(out_size.size()) != n) {
      throw std::runtime_error("upsample: expected output_size with " + std::to_string(n) + " elements");
    }
    size_t next = backward ? 3 : 2;
    bool align = false;
    if (interpolates(mode)) align = c.bool_arg(next++);
    std::vector<int64_t> in_size;
    if (backward) {
      const auto& is = c.ints(2);
      if (static_cast<int>(is.size()) != n + 2) throw std::runtime_error("upsample backward: bad input_size");
      in_size.assign(is.end() - n, is.end());
    } else {
      if (x.rank() != n + 2) {
        throw std::runtime_error("upsample: expected a " + std::to_string(n + 2) + "-D input, got " +
                                 std::to_string(x.rank()) + "-D");
      }
      in_size.assign(x.shape().end() - n, x.shape().end());
    }
    if (out.numel() == 0 || x.type.numel() == 0) return std::vector<Value>{zeros(b, out)};
    DType acc = opmath(out.dtype);
    if (!is_float(acc) && (interpolates(mode) || is_complex(acc))) throw NotLowerable("interpolating upsampling of a non-float tensor");
    bool f64 = acc == DType::F64;
    int64_t r = x.rank();
    Value y = convert(b, x, acc);
    for (int i = 0; i < n; ++i) {
      Dim d{in_size[i], out_size[i], c.has(next + i), c.has(next + i) ? c.double_arg(next + i) : 0.0};
      Taps t = taps(mode, d, align, f64);
      y = backward ? resample_backward(b, y, t, r - n + i, d.in) : resample(b, y, t, r - n + i, d.out);
    }
    return std::vector<Value>{convert(b, y, out.dtype)};
  };
}

const Registrar registrar({
    {"upsample_nearest2d", upsample(2, kNearest, false)},
    {"upsample_nearest2d_backward", upsample(2, kNearest, true)},
    {"upsample_nearest2d_backward.grad_input", upsample(2, kNearest, true)},
    {"_upsample_nearest_exact2d", upsample(2, kNearestExact, false)},
    {"_upsample_nearest_exact2d_backward", upsample(2, kNearestExact, true)},
    {"_upsample_nearest_exact2d_backward.grad_input", upsample(2, kNearestExact, true)},
    {"upsample_bilinear2d", upsample(2, kLinear, false)},
    {"upsample_bilinear2d_backward", upsample(2, kLinear, true)},
    {"upsample_bilinear2d_backward.grad_input", upsample(2, kLinear, true)},
    {"upsample_nearest1d", upsample(1, kNearest, false)},
    {"upsample_nearest1d_backward", upsample(1, kNearest, true)},
    {"upsample_nearest1d_backward.grad_input", upsample(1, kNearest, true)},
    {"upsample_nearest3d", upsample(3, kNearest, false)},
    {"upsample_nearest3d_backward", upsample(3, kNearest, true)},
    {"upsample_nearest3d_backward.grad_input", upsample(3, kNearest, true)},
    {"_upsample_nearest_exact1d", upsample(1, kNearestExact, false)},
    {"_upsample_nearest_exact1d_backward", upsample(1, kNearestExact, true)},
    {"_upsample_nearest_exact1d_backward.grad_input", upsample(1, kNearestExact, true)},
    {"_upsample_nearest_exact3d", upsample(3, kNearestExact, false)},
    {"_upsample_nearest_exact3d_backward", upsample(3, kNearestExact, true)},
    {"_upsample_nearest_exact3d_backward.grad_input", upsample(3, kNearestExact, true)},
    {"upsample_linear1d", upsample(1, kLinear, false)},
    {"upsample_linear1d_backward", upsample(1, kLinear, true)},
    {"upsample_linear1d_backward.grad_input", upsample(1, kLinear, true)},
    {"upsample_trilinear3d", upsample(3, kLinear, false)},
    {"upsample_trilinear3d_backward", upsample(3, kLinear, true)},
    {"upsample_trilinear3d_backward.grad_input", upsample(3, kLinear, true)},
    {"upsample_bicubic2d", upsample(2, kCubic, false)},
    {"upsample_bicubic2d_backward", upsample(2, kCubic, true)},
    {"upsample_bicubic2d_backward.grad_input", upsample(2, kCubic, true)},
    {"_upsample_bilinear2d_aa", upsample(2, kLinearAA, false)},
    {"_upsample_bilinear2d_aa_backward", upsample(2, kLinearAA, true)},
    {"_upsample_bilinear2d_aa_backward.grad_input", upsample(2, kLinearAA, true)},
    {"_upsample_bicubic2d_aa", upsample(2, kCubicAA, false)},
    {"_upsample_bicubic2d_aa_backward", upsample(2, kCubicAA, true)},
    {"_upsample_bicubic2d_aa_backward.grad_input", upsample(2, kCubicAA, true)},
});

}  // namespace
}  // namespace tpu::lowering
