// 2-D pooling: max (with indices), avg and adaptive avg, and their backwards.
#include <algorithm>
#include <limits>
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

struct PoolArgs {
  std::vector<int64_t> k, s, p, d;
  bool ceil_mode = false;
};

// Pads (or cuts) the last two dims of x for the windows `g`, with `fill`.
Value pool_pad(Builder& b, Value x, const std::vector<PoolGeom>& g, Value fill) {
  int64_t r = x.rank();
  std::vector<int64_t> lo(r, 0), hi(r, 0), in(r, 0);
  for (int i = 0; i < 2; ++i) {
    lo[r - 2 + i] = g[i].lo;
    hi[r - 2 + i] = g[i].hi;
  }
  return pad(b, x, fill, lo, hi, in);
}

std::vector<int64_t> window_attr(int64_t rank, const std::vector<int64_t>& v, int64_t dflt) {
  std::vector<int64_t> r(rank, dflt);
  r[rank - 2] = v[0];
  r[rank - 1] = v[1];
  return r;
}

PoolArgs pool_args(Context& c, size_t k_arg, bool has_dilation, size_t ceil_arg) {
  PoolArgs a;
  a.k = expand(c.ints(k_arg), 2, 1);
  a.s = c.ints(k_arg + 1).empty() ? a.k : expand(c.ints(k_arg + 1), 2, 1);
  a.p = expand(c.ints(k_arg + 2), 2, 0);
  a.d = has_dilation ? expand(c.ints(k_arg + 3), 2, 1) : std::vector<int64_t>{1, 1};
  a.ceil_mode = c.bool_arg(ceil_arg);
  return a;
}

// max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) -> (out, indices)
std::vector<Value> max_pool2d_with_indices(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  int64_t r = x.rank();
  if (r != 3 && r != 4) throw std::invalid_argument("max_pool2d expects a 3-D or 4-D input");
  PoolArgs a = pool_args(c, 1, true, 5);
  int64_t H = x.shape()[r - 2], W = x.shape()[r - 1];
  std::vector<PoolGeom> g{pool_geom(H, a.k[0], a.s[0], a.p[0], a.d[0], a.ceil_mode),
                          pool_geom(W, a.k[1], a.s[1], a.p[1], a.d[1], a.ceil_mode)};
  DType dt = x.dtype();
  Value idx = add(b, mul(b, iota(b, Type(DType::S64, x.shape()), r - 2), constant(b, W, DType::S64, x.shape())),
                  iota(b, Type(DType::S64, x.shape()), r - 1));
  double ninf = -std::numeric_limits<double>::infinity();
  bool is_float = dt == DType::F32 || dt == DType::BF16 || dt == DType::F16 || dt == DType::F64;
  Value vinit = is_float ? constant(b, ninf, dt) : reduction_init(b, "max", dt);
  Value iinit = constant(b, 4611686018427387904.0, DType::S64);
  Value xp = pool_pad(b, x, g, vinit);
  Value ip = pool_pad(b, idx, g, iinit);
  std::vector<int64_t> shape = x.shape();
  shape[r - 2] = g[0].out;
  shape[r - 1] = g[1].out;
  Type sv(dt, {}), si(DType::S64, {});
  std::string body = b.region({sv, si, sv, si}, [&](Builder& rb, const std::vector<Value>& v) {
    Value gt = compare(rb, v[0], v[2], Direction::GT);
    Value eq = compare(rb, v[0], v[2], Direction::EQ);
    Value lt_i = compare(rb, v[1], v[3], Direction::LT);
    Value take_a = binary(rb, Binary::Or, gt, binary(rb, Binary::And, eq, lt_i));
    if (is_float) {
      Value a_nan = compare(rb, v[0], v[0], Direction::NE);
      Value b_nan = compare(rb, v[2], v[2], Direction::NE);
      // NaN wins; between two NaNs the later index, as the CPU kernel replaces its running
      // maximum on `val > max || isnan(val)` (pooling3d.cc does the same).
      Value both = binary(rb, Binary::And, a_nan, b_nan);
      take_a = select(rb, both, compare(rb, v[1], v[3], Direction::GT), binary(rb, Binary::Or, binary(rb, Binary::And, a_nan, unary(rb, Unary::Not, b_nan)),
                                             binary(rb, Binary::And, take_a, unary(rb, Unary::Not, b_nan))));
    }
    return std::vector<Value>{select(rb, take_a, v[0], v[2]), select(rb, take_a, v[1], v[3])};
  });
  std::string attrs = "window_dimensions = " + i64_array(window_attr(r, a.k, 1)) +
                      ", window_strides = " + i64_array(window_attr(r, a.s, 1)) +
                      ", window_dilations = " + i64_array(window_attr(r, a.d, 1));
  std::vector<Value> res = b.emit("stablehlo.reduce_window", {xp, ip, vinit, iinit},
                                  {Type(dt, shape), Type(DType::S64, shape)}, attrs, {body});
  return {res[0], res[1]};
}

// max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
// ceil_mode, indices)
std::vector<Value> max_pool2d_with_indices_backward(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(1);
  DType out = c.out().dtype;
  DType acc = opmath(out);
  int64_t r = x.rank();
  int64_t H = x.shape()[r - 2], W = x.shape()[r - 1];
  int64_t B = 1;
  for (int64_t i = 0; i < r - 2; ++i) B *= x.shape()[i];
  Value g = convert(b, c.tensor(0), acc);
  int64_t L = g.type.numel() / std::max<int64_t>(B, 1);
  g = reshape(b, g, {B, L});
  Value idx = reshape(b, convert(b, c.tensor(7), DType::S64), {B, L, 1});
  Value bi = iota(b, Type(DType::S64, {B, L, 1}), 0);
  Value ind = concatenate(b, {bi, idx}, 2);
  ScatterDims d;
  d.inserted_window_dims = {0, 1};
  d.scatter_dims_to_operand_dims = {0, 1};
  d.index_vector_dim = 2;
  Value res = scatter(b, zeros(b, Type(acc, {B, H * W})), ind, g, d, "add");
  return {convert(b, reshape(b, res, x.shape()), out)};
}

// The divisor of each output position, shape [oh, ow] broadcast to `shape`.
Value avg_divisor(Builder& b, Context& c, const PoolArgs& a, int64_t H, int64_t W, const std::vector<PoolGeom>& g,
                  bool include_pad, size_t override_arg, DType acc, const std::vector<int64_t>& shape) {
  int64_t r = static_cast<int64_t>(shape.size());
  if (c.has(override_arg)) return constant(b, static_cast<double>(c.int_arg(override_arg)), acc, shape);
  Value ch = convert(b, constant_i64_vector(b, avg_counts(H, a.k[0], a.s[0], a.p[0], g[0].out, include_pad)), acc);
  Value cw = convert(b, constant_i64_vector(b, avg_counts(W, a.k[1], a.s[1], a.p[1], g[1].out, include_pad)), acc);
  return mul(b, broadcast_in_dim(b, ch, shape, {r - 2}), broadcast_in_dim(b, cw, shape, {r - 1}));
}

// avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override?)
std::vector<Value> avg_pool2d(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  int64_t r = x.rank();
  if (r != 3 && r != 4) throw std::invalid_argument("avg_pool2d expects a 3-D or 4-D input");
  PoolArgs a = pool_args(c, 1, false, 4);
  int64_t H = x.shape()[r - 2], W = x.shape()[r - 1];
  std::vector<PoolGeom> g{pool_geom(H, a.k[0], a.s[0], a.p[0], 1, a.ceil_mode),
                          pool_geom(W, a.k[1], a.s[1], a.p[1], 1, a.ceil_mode)};
  DType out = c.out().dtype;
  DType acc = opmath(out);
  Value xf = convert(b, x, acc);
  Value xp = pool_pad(b, xf, g, constant(b, 0, acc));
  std::vector<std::pair<int64_t, int64_t>> nopad(r, {0, 0});
  Value s = reduce_window(b, xp, "add", window_attr(r, a.k, 1), window_attr(r, a.s, 1), nopad);
  Value div_ = avg_divisor(b, c, a, H, W, g, c.bool_arg(5), 6, acc, s.shape());
  return {convert(b, div(b, s, div_), out)};
}

// avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
// count_include_pad, divisor_override?)
std::vector<Value> avg_pool2d_backward(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(1);
  int64_t r = x.rank();
  PoolArgs a = pool_args(c, 2, false, 5);
  int64_t H = x.shape()[r - 2], W = x.shape()[r - 1];
  std::vector<PoolGeom> g{pool_geom(H, a.k[0], a.s[0], a.p[0], 1, a.ceil_mode),
                          pool_geom(W, a.k[1], a.s[1], a.p[1], 1, a.ceil_mode)};
  DType out = c.out().dtype;
  DType acc = opmath(out);
  Value go = convert(b, c.tensor(0), acc);
  go = div(b, go, avg_divisor(b, c, a, H, W, g, c.bool_arg(6), 7, acc, go.shape()));
  // Dilate by the stride and pad so that a stride-1 window sum gives each input's windows.
  std::vector<int64_t> lo(r, 0), hi(r, 0), in(r, 0);
  int64_t sizes[2] = {H, W};
  for (int i = 0; i < 2; ++i) {
    int64_t d = r - 2 + i;
    in[d] = a.s[i] - 1;
    lo[d] = a.k[i] - 1 - a.p[i];
    int64_t dil = dilate(go.shape()[d], a.s[i]);
    hi[d] = sizes[i] + a.k[i] - 1 - lo[d] - dil;
  }
  Value gp = pad(b, go, constant(b, 0, acc), lo, hi, in);
  std::vector<std::pair<int64_t, int64_t>> nopad(r, {0, 0});
  Value res = reduce_window(b, gp, "add", window_attr(r, a.k, 1), std::vector<int64_t>(r, 1), nopad);
  return {convert(b, res, out)};
}

// ---- Adaptive average pooling: per-window sums (spatial::adaptive_avg), never a dense matrix,
// so a NaN or inf reaches only the outputs whose window holds it ----

// _adaptive_avg_pool2d(self, output_size)
std::vector<Value> adaptive_avg_pool2d(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  int64_t r = x.rank();
  if (r != 3 && r != 4) throw std::invalid_argument("adaptive_avg_pool2d expects a 3-D or 4-D input");
  require_dtype(is_float(x.dtype()), "adaptive_avg_pool2d", x.dtype());
  std::vector<int64_t> os = expand(c.ints(1), 2, 1);
  DType out = c.out().dtype;
  DType acc = opmath(out);
  if (c.out().numel() == 0) return {zeros(b, c.out())};
  int64_t H = x.shape()[r - 2], W = x.shape()[r - 1];
  Value xf = convert(b, x, acc);
  if (H % os[0] == 0 && W % os[1] == 0) {
    std::vector<int64_t> s(x.shape().begin(), x.shape().end() - 2);
    s.insert(s.end(), {os[0], H / os[0], os[1], W / os[1]});
    Value y = reduce(b, reshape(b, xf, s), {r - 1, r + 1}, "add");
    y = div(b, y, constant(b, static_cast<double>((H / os[0]) * (W / os[1])), acc, y.shape()));
    return {convert(b, reshape(b, y, c.out().shape), out)};
  }
  return {convert(b, adaptive_avg(b, xf, os), out)};
}

// _adaptive_avg_pool2d_backward(grad_output, self)
std::vector<Value> adaptive_avg_pool2d_backward(Context& c) {
  Builder& b = c.b;
  Value g = c.tensor(0), x = c.tensor(1);
  int64_t r = x.rank();
  // The CPU template's checks, before anything reads the spatial dims.
  if (g.rank() != 3 && g.rank() != 4) {
    throw InvalidCall("adaptive_avg_pool2d_backward(): Expected 3D or 4D tensor, but got " + shape_str(g.shape()));
  }
  if (r != g.rank()) {
    throw InvalidCall("adaptive_avg_pool2d_backward_out_cpu_template: Expected dimensions " + std::to_string(r) +
                      " for `grad_output` but got dimensions " + std::to_string(g.rank()));
  }
  spatial::check_grad_leading_dims("adaptive_avg_pool2d_backward", g, x, 2);
  DType out = c.out().dtype;
  DType acc = opmath(out);
  if (c.out().numel() == 0 || g.type.numel() == 0) return {zeros(b, c.out())};
  std::vector<int64_t> in{x.shape()[r - 2], x.shape()[r - 1]};
  return {convert(b, adaptive_avg_grad(b, convert(b, g, acc), in), out)};
}

const Registrar registrar({
    {"max_pool2d_with_indices", max_pool2d_with_indices},
    {"max_pool2d_with_indices_backward", max_pool2d_with_indices_backward},
    {"max_pool2d_with_indices_backward.grad_input", max_pool2d_with_indices_backward},
    {"avg_pool2d", avg_pool2d},
    {"avg_pool2d_backward", avg_pool2d_backward},
    {"avg_pool2d_backward.grad_input", avg_pool2d_backward},
    {"_adaptive_avg_pool2d", adaptive_avg_pool2d},
    {"_adaptive_avg_pool2d_backward", adaptive_avg_pool2d_backward},
});

}  // namespace
}  // namespace tpu::lowering
