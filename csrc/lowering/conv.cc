// Convolution (1-3D, groups, dilation, transposed) and its backward.
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

// Kernel gradient of a depthwise conv (groups == C == O) with a small kernel, as one
// multiply-and-reduce per kernel tap: grad_w[c, 0, k] = sum_{n,t} x_padded[n, c, t*stride + k*dil]
// * g[n, c, t]. XLA:CPU runs the batch-grouped convolution form of this ~100x slower (243 ms
// for Qwen3.5's causal conv1d of a tiny model); this form is memory-bound on every backend.
Value depthwise_weight_grad(Builder& b, Value x, Value g, const std::vector<int64_t>& kernel,
                            const std::vector<int64_t>& stride, const std::vector<int64_t>& pad,
                            const std::vector<int64_t>& dil, DType result) {
  int64_t nsp = x.rank() - 2, channels = x.shape()[1];
  DType acc = opmath(result);
  x = convert(b, x, acc), g = convert(b, g, acc);
  std::vector<int64_t> lo(x.rank(), 0), hi(x.rank(), 0), interior(x.rank(), 0);
  for (int64_t i = 0; i < nsp; ++i) {
    lo[2 + i] = pad[i];
    int64_t needed = (kernel[i] - 1) * dil[i] + (g.shape()[2 + i] - 1) * stride[i] + 1;
    hi[2 + i] = std::max<int64_t>(0, needed - x.shape()[2 + i] - pad[i]);
  }
  Value xp = hlo::pad(b, x, constant(b, 0, acc, {}), lo, hi, interior);
  std::vector<int64_t> reduced{0};
  for (int64_t i = 0; i < nsp; ++i) reduced.push_back(2 + i);
  int64_t taps = 1;
  for (int64_t k : kernel) taps *= k;
  std::vector<Value> per_tap;
  for (int64_t t = 0; t < taps; ++t) {
    std::vector<int64_t> start(x.rank(), 0), limit = xp.shape(), step(x.rank(), 1);
    for (int64_t i = nsp - 1, rest = t; i >= 0; --i, rest /= kernel[i + 1]) {  // row-major tap index
      start[2 + i] = rest % kernel[i] * dil[i];
      limit[2 + i] = start[2 + i] + (g.shape()[2 + i] - 1) * stride[i] + 1;
      step[2 + i] = stride[i];
    }
    Value window = slice(b, xp, start, limit, step);
    per_tap.push_back(reshape(b, reduce(b, mul(b, window, g), reduced, "add"), {channels, 1}));
  }
  std::vector<int64_t> shape{channels, 1};
  shape.insert(shape.end(), kernel.begin(), kernel.end());
  return convert(b, reshape(b, concatenate(b, per_tap, 1), shape), result);
}

// Gradient of a forward conv's kernel: input x [N, C, ...], grad g [N, O, ...] -> [O, C/g, k...].
Value conv_weight_grad(Builder& b, Value x, Value g, const std::vector<int64_t>& kernel,
                       const std::vector<int64_t>& stride, const std::vector<int64_t>& pad,
                       const std::vector<int64_t>& dil, int64_t groups, DType result) {
  int64_t nsp = x.rank() - 2, taps = 1;
  for (int64_t k : kernel) taps *= k;
  if (groups > 1 && groups == x.shape()[1] && groups == g.shape()[1] && taps <= 16) {
    return depthwise_weight_grad(b, x, g, kernel, stride, pad, dil, result);
  }
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
  // An empty result (the CPU returns one shaped like the input when it has no channels): nothing
  // to compute, whatever the convolution's own shape would be.
  if (c.out().numel() == 0) return {zeros(b, c.out())};
  w = convert(b, w, dt);
  // Half-precision operands accumulate into float32 (as the MXU does), the bias is added there
  // and the sum rounded once: the CPU rounds partial sums, we are at least as close.
  DType acc = opmath(dt);
  Value y;
  if (a.transposed) {
    y = conv_transpose(b, x, w, a.stride, a.pad, a.dil, a.out_pad, a.groups, acc);
  } else {
    ConvSpec s;
    s.strides = a.stride;
    s.pad_lo = a.pad;
    s.pad_hi = a.pad;
    s.lhs_dil = std::vector<int64_t>(nsp, 1);
    s.rhs_dil = a.dil;
    s.fgc = a.groups;
    y = conv(b, x, w, s, acc);
  }
  if (c.has(2)) y = add(b, y, broadcast_in_dim(b, convert(b, c.tensor(2), acc), y.shape(), {1}));
  return {convert(b, reshape(b, y, c.out().shape), dt)};
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

const Registrar registrar({
    {"convolution", convolution},
    {"_convolution", underscore_convolution},
    {"convolution_backward", convolution_backward},
});

}  // namespace
}  // namespace tpu::lowering
