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

const Registrar registrar({
    {"convolution", convolution},
    {"_convolution", underscore_convolution},
    {"convolution_backward", convolution_backward},
});

}  // namespace
}  // namespace tpu::lowering
