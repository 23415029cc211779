// 2-D upsampling (nearest, nearest-exact, bilinear) and its backward, as separable linear maps over the last
// two dims.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"
#include "lowering/spatial_helpers.h"

namespace tpu::lowering {
namespace {

using namespace hlo;
using namespace spatial;

// PyTorch's nearest source index (float arithmetic like the CPU kernel); `exact` is
// nearest-exact, which samples at pixel centres: floor((o + 0.5) * scale).
std::vector<double> nearest_matrix(int64_t in, int64_t out, bool has_scale, double scale, bool exact) {
  std::vector<double> m(out * in, 0.0);
  float sc = (has_scale && scale > 0) ? static_cast<float>(1.0 / scale)
                                      : static_cast<float>(in) / static_cast<float>(out);
  for (int64_t o = 0; o < out; ++o) {
    int64_t i;
    if (out == in) i = o;
    else if (exact) i = std::min(static_cast<int64_t>(std::floor((static_cast<float>(o) + 0.5f) * sc)), in - 1);
    else if (out == 2 * in) i = o >> 1;
    else i = std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * sc)), in - 1);
    m[o * in + i] = 1.0;
  }
  return m;
}

std::vector<double> bilinear_matrix(int64_t in, int64_t out, bool align_corners, bool has_scale, double scale) {
  std::vector<double> m(out * in, 0.0);
  float sc;
  if (align_corners) sc = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.f;
  else sc = (has_scale && scale > 0) ? static_cast<float>(1.0 / scale) : static_cast<float>(in) / static_cast<float>(out);
  for (int64_t o = 0; o < out; ++o) {
    float src = align_corners ? sc * static_cast<float>(o)
                              : std::max(sc * (static_cast<float>(o) + 0.5f) - 0.5f, 0.f);
    int64_t i0 = static_cast<int64_t>(src);
    int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
    float l1 = src - static_cast<float>(i0), l0 = 1.f - l1;
    m[o * in + i0] += l0;
    m[o * in + i1] += l1;
  }
  return m;
}

struct Upsample {
  std::vector<int64_t> in, out;  // [H, W]
  bool has_sh = false, has_sw = false;
  double sh = 0, sw = 0;
};

enum Mode { kNearest = 0, kBilinear = 1, kNearestExact = 2 };

Value up_matrix(Builder& b, const Upsample& u, int i, int mode, bool align, DType acc) {
  bool hs = i == 0 ? u.has_sh : u.has_sw;
  double s = i == 0 ? u.sh : u.sw;
  auto m = mode == kBilinear ? bilinear_matrix(u.in[i], u.out[i], align, hs, s)
                             : nearest_matrix(u.in[i], u.out[i], hs, s, mode == kNearestExact);
  return matrix(b, m, u.out[i], u.in[i], acc);
}

// upsample_nearest2d(input, output_size, scales_h?, scales_w?) and
// upsample_bilinear2d(input, output_size, align_corners, scales_h?, scales_w?)
Rule upsample_rule(int mode) {
  return [mode](Context& c) {
    Builder& b = c.b;
    Value x = c.tensor(0);
    int64_t r = x.rank();
    if (r != 4) throw std::invalid_argument("upsample 2d expects a 4-D input");
    size_t sarg = mode == kBilinear ? 3 : 2;
    Upsample u;
    u.in = {x.shape()[2], x.shape()[3]};
    u.out = expand(c.ints(1), 2, 1);
    u.has_sh = c.has(sarg);
    u.sh = u.has_sh ? c.double_arg(sarg) : 0;
    u.has_sw = c.has(sarg + 1);
    u.sw = u.has_sw ? c.double_arg(sarg + 1) : 0;
    bool align = mode == kBilinear && c.bool_arg(2);
    DType out = c.out().dtype;
    DType acc = opmath(out);
    Value y = separable(b, convert(b, x, acc), up_matrix(b, u, 0, mode, align, acc), up_matrix(b, u, 1, mode, align, acc));
    return std::vector<Value>{convert(b, y, out)};
  };
}

// upsample_nearest2d_backward(grad_output, output_size, input_size, scales_h?, scales_w?) and
// upsample_bilinear2d_backward(grad_output, output_size, input_size, align_corners, scales_h?, scales_w?)
Rule upsample_backward_rule(int mode) {
  return [mode](Context& c) {
    Builder& b = c.b;
    Value g = c.tensor(0);
    size_t sarg = mode == kBilinear ? 4 : 3;
    Upsample u;
    u.out = expand(c.ints(1), 2, 1);
    const auto& is = c.ints(2);
    if (is.size() != 4) throw std::invalid_argument("upsample 2d backward expects a 4-D input_size");
    u.in = {is[2], is[3]};
    u.has_sh = c.has(sarg);
    u.sh = u.has_sh ? c.double_arg(sarg) : 0;
    u.has_sw = c.has(sarg + 1);
    u.sw = u.has_sw ? c.double_arg(sarg + 1) : 0;
    bool align = mode == kBilinear && c.bool_arg(3);
    DType out = c.out().dtype;
    DType acc = opmath(out);
    Value y = separable(b, convert(b, g, acc), transpose2(b, up_matrix(b, u, 0, mode, align, acc)),
                        transpose2(b, up_matrix(b, u, 1, mode, align, acc)));
    return std::vector<Value>{convert(b, y, out)};
  };
}

const Registrar registrar({
    {"upsample_nearest2d", upsample_rule(kNearest)},
    {"upsample_nearest2d_backward", upsample_backward_rule(kNearest)},
    {"upsample_nearest2d_backward.grad_input", upsample_backward_rule(kNearest)},
    {"_upsample_nearest_exact2d", upsample_rule(kNearestExact)},
    {"_upsample_nearest_exact2d_backward", upsample_backward_rule(kNearestExact)},
    {"_upsample_nearest_exact2d_backward.grad_input", upsample_backward_rule(kNearestExact)},
    {"upsample_bilinear2d", upsample_rule(kBilinear)},
    {"upsample_bilinear2d_backward", upsample_backward_rule(kBilinear)},
    {"upsample_bilinear2d_backward.grad_input", upsample_backward_rule(kBilinear)},
});

}  // namespace
}  // namespace tpu::lowering
