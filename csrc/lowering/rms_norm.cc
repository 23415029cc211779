// _fused_rms_norm_backward: the gradients of y = x * rstd * weight over the normalized trailing
// dims (PyTorch has no CPU kernel for it; the forward is a composite of lowered ops).
//   d_input  = (g*w - x_hat * mean(x_hat * g*w)) * rstd,   x_hat = x * rstd
//   d_weight = sum over the leading dims of g * x_hat
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// _fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight?, output_mask)
std::vector<Value> rms_norm_backward(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(1);
  const auto& normalized = c.ints(2);
  const auto& mask = c.arg(5).ints;  // bool[2] arrives as a list of 0/1
  bool want_input = mask.size() > 0 && mask[0] != 0, want_weight = mask.size() > 1 && mask[1] != 0;
  int64_t axis = x.rank() - static_cast<int64_t>(normalized.size());
  if (axis < 0) throw InvalidCall("_fused_rms_norm_backward: input of rank " + std::to_string(x.rank()) +
                                  " for normalized_shape of rank " + std::to_string(normalized.size()));
  DType t = opmath(x.dtype());
  std::vector<int64_t> inner, outer;
  int64_t n = 1;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d >= axis) {
      inner.push_back(d);
      n *= x.shape()[d];
    } else {
      outer.push_back(d);
    }
  }
  std::vector<Value> result(2);
  bool has_weight = c.has(4);
  if (x.type.numel() == 0) {
    if (want_input) result[0] = zeros(b, c.out(0));
    if (want_weight) result[1] = zeros(b, c.out(1));  // PyTorch returns zeros even without a weight
    return result;
  }
  Value xf = convert(b, x, t), g = convert(b, c.tensor(0), t);
  // rstd keeps the normalized dims as 1s: drop them and broadcast back over them.
  std::vector<int64_t> outer_shape(x.shape().begin(), x.shape().begin() + axis);
  Value rstd = broadcast_in_dim(b, reshape(b, convert(b, c.tensor(3), t), outer_shape), x.shape(), outer);
  Value x_hat = mul(b, xf, rstd);
  if (want_input) {
    Value gw = g;
    if (has_weight) gw = mul(b, g, broadcast_in_dim(b, convert(b, c.tensor(4), t), x.shape(), inner));
    Value s = broadcast_in_dim(b, reduce(b, mul(b, x_hat, gw), inner, "add"), x.shape(), outer);
    Value r = mul(b, sub(b, gw, mul(b, div(b, x_hat, constant(b, static_cast<double>(n), t, x.shape())), s)), rstd);
    result[0] = convert(b, r, c.out(0).dtype);
  }
  if (want_weight && has_weight) {
    Value full = mul(b, g, x_hat);
    Value dw = outer.empty() ? full : reduce(b, full, outer, "add");
    result[1] = convert(b, reshape(b, dw, c.out(1).shape), c.out(1).dtype);
  }
  return result;
}

const Registrar registrar({
    {"_fused_rms_norm_backward", rms_norm_backward},
});

}  // namespace
}  // namespace tpu::lowering
