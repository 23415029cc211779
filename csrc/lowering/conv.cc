// Convolution, pooling, group norm and upsampling (what UNet/DiT/VAE models need).
#include <cmath>
#include <cstdio>
#include <limits>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

std::vector<int64_t> expand(const std::vector<int64_t>& v, size_t n, int64_t dflt) {
  if (v.empty()) return std::vector<int64_t>(n, dflt);
  if (v.size() == 1) return std::vector<int64_t>(n, v[0]);
  if (v.size() != n) throw std::invalid_argument("expected " + std::to_string(n) + " values in a conv/pool parameter");
  return v;
}

std::vector<int64_t> range(int64_t lo, int64_t hi) {
  std::vector<int64_t> r;
  for (int64_t i = lo; i < hi; ++i) r.push_back(i);
  return r;
}

int64_t dilate(int64_t s, int64_t d) { return s == 0 ? 0 : 1 + d * (s - 1); }

// Dimension labels: "b"/"f" for lhs and result, "o"/"i" for the kernel, then spatial 0..n-1.
std::string dims_str(const std::vector<std::string>& first_two_in_order, int64_t nsp) {
  std::string s = "[" + first_two_in_order[0] + ", " + first_two_in_order[1];
  for (int64_t i = 0; i < nsp; ++i) s += ", " + std::to_string(i);
  return s + "]";
}

struct ConvSpec {
  bool lhs_swapped = false;  // lhs is [f, b, ...] instead of [b, f, ...]
  bool rhs_swapped = false;  // kernel is [i, o, ...] instead of [o, i, ...]
  bool out_swapped = false;  // result is [f, b, ...]
  std::vector<int64_t> strides, pad_lo, pad_hi, lhs_dil, rhs_dil;
  int64_t fgc = 1, bgc = 1;
};

Value conv(Builder& b, Value lhs, Value rhs, const ConvSpec& s, DType result) {
  int64_t nsp = lhs.rank() - 2;
  int64_t lb = s.lhs_swapped ? 1 : 0, lf = 1 - lb;
  int64_t ro = s.rhs_swapped ? 1 : 0, ri = 1 - ro;
  int64_t batch = lhs.shape()[lb] / s.bgc;
  int64_t feat = rhs.shape()[ro];
  std::vector<int64_t> sp;
  for (int64_t i = 0; i < nsp; ++i) {
    int64_t in = dilate(lhs.shape()[2 + i], s.lhs_dil[i]) + s.pad_lo[i] + s.pad_hi[i];
    int64_t k = dilate(rhs.shape()[2 + i], s.rhs_dil[i]);
    sp.push_back(in < k ? 0 : (in - k) / s.strides[i] + 1);
  }
  (void)lf;
  (void)ri;
  std::vector<int64_t> shape = s.out_swapped ? std::vector<int64_t>{feat, batch} : std::vector<int64_t>{batch, feat};
  shape.insert(shape.end(), sp.begin(), sp.end());
  std::string dn = "dimension_numbers = #stablehlo.conv<" +
                   dims_str(s.lhs_swapped ? std::vector<std::string>{"f", "b"} : std::vector<std::string>{"b", "f"}, nsp) + "x" +
                   dims_str(s.rhs_swapped ? std::vector<std::string>{"i", "o"} : std::vector<std::string>{"o", "i"}, nsp) + "->" +
                   dims_str(s.out_swapped ? std::vector<std::string>{"f", "b"} : std::vector<std::string>{"b", "f"}, nsp) + ">";
  std::string pads = "dense<[";
  for (int64_t i = 0; i < nsp; ++i) {
    pads += (i ? ", [" : "[") + std::to_string(s.pad_lo[i]) + ", " + std::to_string(s.pad_hi[i]) + "]";
  }
  pads += "]> : tensor<" + std::to_string(nsp) + "x2xi64>";
  if (nsp == 0) pads = "dense<> : tensor<0x2xi64>";
  std::string attrs = dn + ", window_strides = " + i64_array(s.strides) + ", padding = " + pads +
                      ", lhs_dilation = " + i64_array(s.lhs_dil) + ", rhs_dilation = " + i64_array(s.rhs_dil) +
                      ", feature_group_count = " + std::to_string(s.fgc) +
                      " : i64, batch_group_count = " + std::to_string(s.bgc) + " : i64";
  if (lhs.dtype() == DType::F32 || lhs.dtype() == DType::F64) {
    attrs += ", precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]";
  }
  return b.emit1("stablehlo.convolution", {lhs, rhs}, Type(result, shape), attrs);
}

// A transposed-conv weight [Cin, Cout/g, k...] as a flipped forward kernel [Cout, Cin/g, k...].
Value transposed_kernel(Builder& b, Value w, int64_t groups) {
  std::vector<int64_t> ws = w.shape();
  int64_t cin = ws[0], coutg = ws[1];
  std::vector<int64_t> k(ws.begin() + 2, ws.end());
  std::vector<int64_t> s5{groups, cin / groups, coutg};
  s5.insert(s5.end(), k.begin(), k.end());
  Value r = reshape(b, w, s5);
  std::vector<int64_t> perm{0, 2, 1};
  for (size_t i = 0; i < k.size(); ++i) perm.push_back(3 + static_cast<int64_t>(i));
  r = transpose(b, r, perm);
  std::vector<int64_t> s3{groups * coutg, cin / groups};
  s3.insert(s3.end(), k.begin(), k.end());
  r = reshape(b, r, s3);
  return reverse(b, r, range(2, r.rank()));
}

// Transposed convolution of x with a [Cin, Cout/g, k...] weight.
Value conv_transpose(Builder& b, Value x, Value w, const std::vector<int64_t>& stride,
                     const std::vector<int64_t>& pad, const std::vector<int64_t>& dil,
                     const std::vector<int64_t>& out_pad, int64_t groups, DType result) {
  int64_t nsp = x.rank() - 2;
  ConvSpec s;
  s.strides = std::vector<int64_t>(nsp, 1);
  s.lhs_dil = stride;
  s.rhs_dil = dil;
  s.fgc = groups;
  for (int64_t i = 0; i < nsp; ++i) {
    int64_t e = dil[i] * (w.shape()[2 + i] - 1);
    s.pad_lo.push_back(e - pad[i]);
    s.pad_hi.push_back(e - pad[i] + out_pad[i]);
  }
  return conv(b, x, transposed_kernel(b, w, groups), s, result);
}

// Gradient of a forward conv's kernel: input x [N, C, ...], grad g [N, O, ...] -> [O, C/g, k...].
Value conv_weight_grad(Builder& b, Value x, Value g, const std::vector<int64_t>& kernel,
                       const std::vector<int64_t>& stride, const std::vector<int64_t>& pad,
                       const std::vector<int64_t>& dil, int64_t groups, DType result) {
  int64_t nsp = x.rank() - 2;
  ConvSpec s;
  s.lhs_swapped = true;
  s.rhs_swapped = true;
  s.out_swapped = true;
  s.strides = dil;
  s.rhs_dil = stride;
  s.lhs_dil = std::vector<int64_t>(nsp, 1);
  s.bgc = groups;
  for (int64_t i = 0; i < nsp; ++i) {
    int64_t in_d = x.shape()[2 + i], out_d = dilate(g.shape()[2 + i], stride[i]);
    int64_t k_d = dilate(kernel[i], dil[i]);
    s.pad_lo.push_back(pad[i]);
    s.pad_hi.push_back((out_d - in_d) + (k_d - pad[i] - 1));
  }
  Value r = conv(b, x, g, s, result);
  // The result has k' >= k spatial positions when the input has rows no window used.
  std::vector<int64_t> lim = r.shape();
  bool cut = false;
  for (int64_t i = 0; i < nsp; ++i) {
    if (lim[2 + i] != kernel[i]) {
      lim[2 + i] = kernel[i];
      cut = true;
    }
  }
  if (cut) r = slice(b, r, std::vector<int64_t>(r.rank(), 0), lim, std::vector<int64_t>(r.rank(), 1));
  return r;
}

struct ConvArgs {
  std::vector<int64_t> stride, pad, dil, out_pad;
  bool transposed;
  int64_t groups;
};

ConvArgs conv_args(Context& c, size_t first, int64_t nsp) {
  ConvArgs a;
  a.stride = expand(c.ints(first), nsp, 1);
  a.pad = expand(c.ints(first + 1), nsp, 0);
  a.dil = expand(c.ints(first + 2), nsp, 1);
  a.transposed = c.bool_arg(first + 3);
  a.out_pad = expand(c.ints(first + 4), nsp, 0);
  a.groups = c.int_arg(first + 5);
  if (a.groups < 1) throw std::invalid_argument("groups must be positive");
  return a;
}

// convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)
std::vector<Value> convolution(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0), w = c.tensor(1);
  int64_t nsp = w.rank() - 2;
  if (nsp < 1) throw std::invalid_argument("convolution weight must have at least 3 dims");
  bool unbatched = x.rank() == w.rank() - 1;
  if (unbatched) {
    std::vector<int64_t> s{1};
    s.insert(s.end(), x.shape().begin(), x.shape().end());
    x = reshape(b, x, s);
  }
  if (x.rank() != w.rank()) throw std::invalid_argument("convolution input and weight ranks differ");
  ConvArgs a = conv_args(c, 3, nsp);
  DType dt = x.dtype();
  if (dt != DType::F32 && dt != DType::BF16 && dt != DType::F16 && dt != DType::F64) {
    throw NotLowerable("convolution of a non-float dtype");
  }
  w = convert(b, w, dt);
  Value y;
  if (a.transposed) {
    y = conv_transpose(b, x, w, a.stride, a.pad, a.dil, a.out_pad, a.groups, dt);
  } else {
    ConvSpec s;
    s.strides = a.stride;
    s.pad_lo = a.pad;
    s.pad_hi = a.pad;
    s.lhs_dil = std::vector<int64_t>(nsp, 1);
    s.rhs_dil = a.dil;
    s.fgc = a.groups;
    y = conv(b, x, w, s, dt);
  }
  if (c.has(2)) y = add(b, y, broadcast_in_dim(b, convert(b, c.tensor(2), dt), y.shape(), {1}));
  return {reshape(b, y, c.out().shape)};
}

// _convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups,
// benchmark, deterministic, cudnn_enabled, allow_tf32)
std::vector<Value> underscore_convolution(Context& c) { return convolution(c); }

// convolution_backward(grad_output, input, weight, bias_sizes?, stride, padding, dilation,
// transposed, output_padding, groups, output_mask) -> (grad_input, grad_weight, grad_bias)
std::vector<Value> convolution_backward(Context& c) {
  Builder& b = c.b;
  Value g = c.tensor(0), x = c.tensor(1), w = c.tensor(2);
  int64_t nsp = w.rank() - 2;
  if (x.rank() != w.rank() || g.rank() != w.rank()) throw NotLowerable("unbatched convolution_backward");
  ConvArgs a = conv_args(c, 4, nsp);
  const auto& mask = c.ints(10);
  auto on = [&](size_t i) { return i >= mask.size() || mask[i] != 0; };
  DType dt = x.dtype();
  g = convert(b, g, dt);
  w = convert(b, w, dt);
  std::vector<Value> r(3, g);
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  if (on(0)) {
    if (!a.transposed) {
      std::vector<int64_t> op;
      for (int64_t i = 0; i < nsp; ++i) {
        int64_t full = (g.shape()[2 + i] - 1) * a.stride[i] - 2 * a.pad[i] + a.dil[i] * (kernel[i] - 1) + 1;
        op.push_back(x.shape()[2 + i] - full);
      }
      r[0] = conv_transpose(b, g, w, a.stride, a.pad, a.dil, op, a.groups, dt);
    } else {
      ConvSpec s;
      s.strides = a.stride;
      s.pad_lo = a.pad;
      s.pad_hi = a.pad;
      s.lhs_dil = std::vector<int64_t>(nsp, 1);
      s.rhs_dil = a.dil;
      s.fgc = a.groups;
      r[0] = conv(b, g, w, s, dt);
      // Output padding rows of grad_output add no window: cut the result to the input's size.
      std::vector<int64_t> lim = r[0].shape();
      if (lim != x.shape()) {
        r[0] = slice(b, r[0], std::vector<int64_t>(lim.size(), 0), x.shape(), std::vector<int64_t>(lim.size(), 1));
      }
    }
    r[0] = reshape(b, r[0], x.shape());
  }
  if (on(1)) {
    r[1] = a.transposed ? conv_weight_grad(b, g, x, kernel, a.stride, a.pad, a.dil, a.groups, dt)
                        : conv_weight_grad(b, x, g, kernel, a.stride, a.pad, a.dil, a.groups, dt);
    r[1] = reshape(b, r[1], w.shape());
  }
  if (on(2)) {
    std::vector<int64_t> dims{0};
    for (int64_t i = 2; i < g.rank(); ++i) dims.push_back(i);
    r[2] = convert(b, reduce(b, convert(b, g, opmath(dt)), dims, "add"), dt);
  }
  return r;
}

// ---- Pooling ----

struct PoolGeom {
  int64_t out, lo, hi;  // output size, low padding, high padding (negative: cut the input)
};

PoolGeom pool_geom(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t eff = d * (k - 1) + 1;
  int64_t num = in + 2 * p - eff + (ceil_mode ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  if (out < 0) out = 0;
  return {out, p, (out - 1) * s + eff - in - p};
}

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
    Value gt = compare(rb, v[0], v[2], "GT");
    Value eq = compare(rb, v[0], v[2], "EQ");
    Value lt_i = compare(rb, v[1], v[3], "LT");
    Value take_a = binary(rb, "stablehlo.or", gt, binary(rb, "stablehlo.and", eq, lt_i));
    if (is_float) {
      Value a_nan = compare(rb, v[0], v[0], "NE");
      Value b_nan = compare(rb, v[2], v[2], "NE");
      // NaN wins; between two NaNs the earlier index.
      Value both = binary(rb, "stablehlo.and", a_nan, b_nan);
      take_a = select(rb, both, lt_i, binary(rb, "stablehlo.or", binary(rb, "stablehlo.and", a_nan, unary(rb, "stablehlo.not", b_nan)),
                                             binary(rb, "stablehlo.and", take_a, unary(rb, "stablehlo.not", b_nan))));
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

// Per-position divisors of avg_pool along one dim (PyTorch's CPU kernel formula).
std::vector<int64_t> avg_counts(int64_t in, int64_t k, int64_t s, int64_t p, int64_t out, bool include_pad) {
  std::vector<int64_t> r;
  for (int64_t o = 0; o < out; ++o) {
    int64_t start = o * s - p, end = std::min(start + k, in + p);
    int64_t pool = end - start;
    start = std::max<int64_t>(start, 0);
    end = std::min(end, in);
    r.push_back(include_pad ? pool : end - start);
  }
  return r;
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

// ---- Separable linear maps over the last two dims (adaptive pooling, upsampling) ----

// A constant [rows, cols] matrix of dtype f32 (or f64).
Value matrix(Builder& b, const std::vector<double>& m, int64_t rows, int64_t cols, DType dt) {
  Type t(dt, {rows * cols});
  std::string body = "[";
  char buf[64];
  for (size_t i = 0; i < m.size(); ++i) {
    std::snprintf(buf, sizeof(buf), "%.17e", m[i]);
    body += (i ? ", " : "") + std::string(buf);
  }
  body += "]";
  if (m.empty()) body = "";
  Value v = b.emit1("stablehlo.constant", {}, t, "value = dense<" + body + "> : " + t.str());
  return reshape(b, v, {rows, cols});
}

// y[..., o, p] = sum_{h, w} Mh[o, h] * x[..., h, w] * Mw[p, w]
Value separable(Builder& b, Value x, Value mh, Value mw) {
  int64_t r = x.rank();
  // Contract W: [..., H, OW]
  Value y = dot_general(b, x, mw, {}, {}, {r - 1}, {1}, x.dtype());
  // Contract H: [..., OW, OH]
  y = dot_general(b, y, mh, {}, {}, {r - 2}, {1}, x.dtype());
  std::vector<int64_t> perm = range(0, r - 2);
  perm.push_back(r - 1);
  perm.push_back(r - 2);
  return transpose(b, y, perm);
}

Value transpose2(Builder& b, Value m) { return transpose(b, m, {1, 0}); }

std::vector<double> adaptive_matrix(int64_t in, int64_t out) {
  std::vector<double> m(out * in, 0.0);
  for (int64_t o = 0; o < out; ++o) {
    int64_t start = (o * in) / out;
    int64_t end = ((o + 1) * in + out - 1) / out;
    for (int64_t i = start; i < end; ++i) m[o * in + i] = 1.0 / static_cast<double>(end - start);
  }
  return m;
}

// _adaptive_avg_pool2d(self, output_size)
std::vector<Value> adaptive_avg_pool2d(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  int64_t r = x.rank();
  if (r != 3 && r != 4) throw std::invalid_argument("adaptive_avg_pool2d expects a 3-D or 4-D input");
  std::vector<int64_t> os = expand(c.ints(1), 2, 1);
  DType out = c.out().dtype;
  DType acc = opmath(out);
  int64_t H = x.shape()[r - 2], W = x.shape()[r - 1];
  Value xf = convert(b, x, acc);
  if (H % os[0] == 0 && W % os[1] == 0) {
    std::vector<int64_t> s(x.shape().begin(), x.shape().end() - 2);
    s.insert(s.end(), {os[0], H / os[0], os[1], W / os[1]});
    Value y = reduce(b, reshape(b, xf, s), {r - 1, r + 1}, "add");
    y = div(b, y, constant(b, static_cast<double>((H / os[0]) * (W / os[1])), acc, y.shape()));
    return {convert(b, reshape(b, y, c.out().shape), out)};
  }
  Value mh = matrix(b, adaptive_matrix(H, os[0]), os[0], H, acc);
  Value mw = matrix(b, adaptive_matrix(W, os[1]), os[1], W, acc);
  return {convert(b, separable(b, xf, mh, mw), out)};
}

// _adaptive_avg_pool2d_backward(grad_output, self)
std::vector<Value> adaptive_avg_pool2d_backward(Context& c) {
  Builder& b = c.b;
  Value g = c.tensor(0), x = c.tensor(1);
  int64_t r = x.rank();
  DType out = c.out().dtype;
  DType acc = opmath(out);
  int64_t H = x.shape()[r - 2], W = x.shape()[r - 1];
  int64_t OH = g.shape()[r - 2], OW = g.shape()[r - 1];
  Value mh = matrix(b, adaptive_matrix(H, OH), OH, H, acc);
  Value mw = matrix(b, adaptive_matrix(W, OW), OW, W, acc);
  return {convert(b, separable(b, convert(b, g, acc), transpose2(b, mh), transpose2(b, mw)), out)};
}

// PyTorch's nearest source index (float arithmetic like the CPU kernel).
std::vector<double> nearest_matrix(int64_t in, int64_t out, bool has_scale, double scale) {
  std::vector<double> m(out * in, 0.0);
  float sc = (has_scale && scale > 0) ? static_cast<float>(1.0 / scale)
                                      : static_cast<float>(in) / static_cast<float>(out);
  for (int64_t o = 0; o < out; ++o) {
    int64_t i;
    if (out == in) i = o;
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

Value up_matrix(Builder& b, const Upsample& u, int i, int mode, bool align, DType acc) {
  bool hs = i == 0 ? u.has_sh : u.has_sw;
  double s = i == 0 ? u.sh : u.sw;
  auto m = mode == 0 ? nearest_matrix(u.in[i], u.out[i], hs, s) : bilinear_matrix(u.in[i], u.out[i], align, hs, s);
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
    size_t sarg = mode == 0 ? 2 : 3;
    Upsample u;
    u.in = {x.shape()[2], x.shape()[3]};
    u.out = expand(c.ints(1), 2, 1);
    u.has_sh = c.has(sarg);
    u.sh = u.has_sh ? c.double_arg(sarg) : 0;
    u.has_sw = c.has(sarg + 1);
    u.sw = u.has_sw ? c.double_arg(sarg + 1) : 0;
    bool align = mode == 1 && c.bool_arg(2);
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
    size_t sarg = mode == 0 ? 3 : 4;
    Upsample u;
    u.out = expand(c.ints(1), 2, 1);
    const auto& is = c.ints(2);
    if (is.size() != 4) throw std::invalid_argument("upsample 2d backward expects a 4-D input_size");
    u.in = {is[2], is[3]};
    u.has_sh = c.has(sarg);
    u.sh = u.has_sh ? c.double_arg(sarg) : 0;
    u.has_sw = c.has(sarg + 1);
    u.sw = u.has_sw ? c.double_arg(sarg + 1) : 0;
    bool align = mode == 1 && c.bool_arg(3);
    DType out = c.out().dtype;
    DType acc = opmath(out);
    Value y = separable(b, convert(b, g, acc), transpose2(b, up_matrix(b, u, 0, mode, align, acc)),
                        transpose2(b, up_matrix(b, u, 1, mode, align, acc)));
    return std::vector<Value>{convert(b, y, out)};
  };
}

// ---- Group norm ----

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd)
std::vector<Value> native_group_norm(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  DType out = c.out(0).dtype;
  DType acc = opmath(out);
  int64_t N = c.int_arg(3), C = c.int_arg(4), HW = c.int_arg(5), G = c.int_arg(6);
  if (G <= 0 || C % G != 0) throw std::invalid_argument("group_norm: channels must be divisible by groups");
  double eps = c.double_arg(7);
  int64_t D = (C / G) * HW;
  Value xg = reshape(b, convert(b, x, acc), {N, G, D});
  Value mean = div(b, reduce(b, xg, {2}, "add"), constant(b, static_cast<double>(D), acc, {N, G}));
  Value d = sub(b, xg, broadcast_in_dim(b, mean, {N, G, D}, {0, 1}));
  Value var = div(b, reduce(b, mul(b, d, d), {2}, "add"), constant(b, static_cast<double>(D), acc, {N, G}));
  Value rstd = unary(b, "stablehlo.rsqrt", add(b, var, constant(b, eps, acc, {N, G})));
  Value y = reshape(b, mul(b, d, broadcast_in_dim(b, rstd, {N, G, D}, {0, 1})), {N, C, HW});
  if (c.has(1)) y = mul(b, y, broadcast_in_dim(b, convert(b, c.tensor(1), acc), {N, C, HW}, {1}));
  if (c.has(2)) y = add(b, y, broadcast_in_dim(b, convert(b, c.tensor(2), acc), {N, C, HW}, {1}));
  return {convert(b, reshape(b, y, c.out(0).shape), out), reshape(b, mean, c.out(1).shape),
          reshape(b, rstd, c.out(2).shape)};
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group, output_mask)
std::vector<Value> native_group_norm_backward(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(1);
  DType acc = opmath(x.dtype());
  int64_t N = c.int_arg(5), C = c.int_arg(6), HW = c.int_arg(7), G = c.int_arg(8);
  int64_t Cg = C / G, D = Cg * HW;
  std::vector<int64_t> s4{N, G, Cg, HW};
  Value xg = reshape(b, convert(b, x, acc), s4);
  Value g = reshape(b, convert(b, c.tensor(0), acc), s4);
  auto stat = [&](size_t i) {
    return broadcast_in_dim(b, reshape(b, convert(b, c.tensor(i), acc), {N, G}), s4, {0, 1});
  };
  Value rstd = stat(3);
  Value x_hat = mul(b, sub(b, xg, stat(2)), rstd);
  Value gw = g;
  if (c.has(4)) gw = mul(b, g, broadcast_in_dim(b, reshape(b, convert(b, c.tensor(4), acc), {G, Cg}), s4, {1, 2}));
  auto mean_over = [&](Value v) {
    Value s = reduce(b, v, {2, 3}, "add");
    s = div(b, s, constant(b, static_cast<double>(D), acc, s.shape()));
    return broadcast_in_dim(b, s, s4, {0, 1});
  };
  Value gi = mul(b, rstd, sub(b, sub(b, gw, mean_over(gw)), mul(b, x_hat, mean_over(mul(b, gw, x_hat)))));
  Value grad_input = reshape(b, gi, x.shape());
  Value grad_weight = reshape(b, reduce(b, mul(b, g, x_hat), {0, 3}, "add"), {C});
  Value grad_bias = reshape(b, reduce(b, g, {0, 3}, "add"), {C});
  return {grad_input, grad_weight, grad_bias};
}

const Registrar registrar({
    {"convolution", convolution},
    {"_convolution", underscore_convolution},
    {"convolution_backward", convolution_backward},
    {"max_pool2d_with_indices", max_pool2d_with_indices},
    {"max_pool2d_with_indices_backward", max_pool2d_with_indices_backward},
    {"max_pool2d_with_indices_backward.grad_input", max_pool2d_with_indices_backward},
    {"avg_pool2d", avg_pool2d},
    {"avg_pool2d_backward", avg_pool2d_backward},
    {"avg_pool2d_backward.grad_input", avg_pool2d_backward},
    {"_adaptive_avg_pool2d", adaptive_avg_pool2d},
    {"_adaptive_avg_pool2d_backward", adaptive_avg_pool2d_backward},
    {"native_group_norm", native_group_norm},
    {"native_group_norm_backward", native_group_norm_backward},
    {"upsample_nearest2d", upsample_rule(0)},
    {"upsample_nearest2d_backward", upsample_backward_rule(0)},
    {"upsample_nearest2d_backward.grad_input", upsample_backward_rule(0)},
    {"upsample_bilinear2d", upsample_rule(1)},
    {"upsample_bilinear2d_backward", upsample_backward_rule(1)},
    {"upsample_bilinear2d_backward.grad_input", upsample_backward_rule(1)},
});

}  // namespace
}  // namespace tpu::lowering
