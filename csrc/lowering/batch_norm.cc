// Eager batch norm: native_batch_norm / _native_batch_norm_legit (what F.batch_norm runs outside
// graphs) and native_batch_norm_backward.
//
// In training the running statistics are updated in place, though native_batch_norm's schema
// does not say so: the engine lists running_mean/var as written targets after the three
// returns (eager/op_adapters.cc, unannotated_writes), and the rule then returns their new
// values as results 3 and 4 (PyTorch's rule: unbiased variance into running_var). Graphs use
// _native_batch_norm_legit_functional (norm.cc) instead.
//
// Statistics are computed in the opmath type (f32 for bf16/f16 inputs).
#include <cmath>
#include <stdexcept>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

struct Channels {
  std::vector<int64_t> dims;  // every dim but 1
  int64_t n = 1;              // elements per channel
  int64_t channels = 0;
};

Channels channels_of(const Value& x) {
  // The CPU kernel reads the channel count as input.size(1): its IndexError for a 1-D input.
  if (x.rank() < 2) {
    throw std::out_of_range("Dimension out of range (expected to be in range of [" + std::to_string(-std::max<int64_t>(x.rank(), 1)) +
                            ", " + std::to_string(std::max<int64_t>(x.rank(), 1) - 1) + "], but got 1)");
  }
  Channels ch;
  ch.channels = x.shape()[1];
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i == 1) continue;
    ch.dims.push_back(i);
    ch.n *= x.shape()[i];
  }
  return ch;
}

// (input 0, weight? 1, bias? 2, running_mean? 3, running_var? 4, training 5, momentum 6, eps 7)
std::vector<Value> native_batch_norm(Context& c) {
  Builder& b = c.b;
  DType acc = opmath(c.out(0).dtype);
  Value x = convert(b, c.tensor(0), acc);
  Channels ch = channels_of(x);
  bool training = c.bool_arg(5);
  double momentum = c.double_arg(6), eps = c.double_arg(7);
  // torch.batch_norm's size checks (the CPU kernel reads per-channel tensors out of bounds); a
  // 0-d tensor serves one channel.
  for (const auto& [arg, name] : {std::pair<size_t, const char*>{1, "weight"}, {2, "bias"}, {3, "running_mean"},
                                  {4, "running_var"}}) {
    if (c.has(arg) && c.tensor(arg).type.numel() != ch.channels) {
      throw InvalidCall(std::string(name) + " should contain " + std::to_string(ch.channels) + " elements not " +
                        std::to_string(c.tensor(arg).type.numel()));
    }
  }
  auto per_channel = [&](Value v) { return broadcast_in_dim(b, reshape(b, v, {ch.channels}), x.shape(), {1}); };
  auto vec = [&](double v) { return constant(b, v, acc, {ch.channels}); };
  Value mean, var;
  if (training) {
    double n = static_cast<double>(ch.n);
    mean = div(b, reduce(b, x, ch.dims, "add"), vec(n));
    Value d = sub(b, x, per_channel(mean));
    var = div(b, reduce(b, mul(b, d, d), ch.dims, "add"), vec(n));
  } else {
    if (!c.has(3) || !c.has(4)) {
      throw std::runtime_error("running_mean and running_var must be defined in evaluation mode");
    }
    mean = convert(b, c.tensor(3), acc);
    var = convert(b, c.tensor(4), acc);
  }
  Value invstd = training ? batch_norm_invstd(b, var, eps) : unary(b, Unary::Rsqrt, add(b, var, vec(eps)));
  Value y = mul(b, sub(b, x, per_channel(mean)), per_channel(invstd));
  if (c.has(1)) y = mul(b, y, per_channel(convert(b, c.tensor(1), acc)));
  if (c.has(2)) y = add(b, y, per_channel(convert(b, c.tensor(2), acc)));
  std::vector<Value> results{convert(b, y, c.out(0).dtype)};
  for (size_t i : {1, 2}) {  // save_mean, save_invstd: empty outside training
    const Type& t = c.out(i);
    results.push_back(training && t.numel() == ch.channels ? convert(b, reshape(b, i == 1 ? mean : invstd, t.shape), t.dtype)
                                                           : zeros(b, t));
  }
  if (c.out_types.size() == 5) {  // training with running statistics (the engine's targets)
    Value keep = vec(1 - momentum), m = vec(momentum);
    double unbias = ch.n > 1 ? static_cast<double>(ch.n) / static_cast<double>(ch.n - 1) : 1.0;
    Value rm = add(b, mul(b, keep, convert(b, c.tensor(3), acc)), mul(b, m, mean));
    Value rv = add(b, mul(b, keep, convert(b, c.tensor(4), acc)), mul(b, m, mul(b, var, vec(unbias))));
    results.push_back(reshape(b, convert(b, rm, c.out(3).dtype), c.out(3).shape));
    results.push_back(reshape(b, convert(b, rv, c.out(4).dtype), c.out(4).shape));
  }
  return results;
}

// native_batch_norm_backward(grad_out 0, input 1, weight? 2, running_mean? 3, running_var? 4,
// save_mean? 5, save_invstd? 6, train 7, eps 8, output_mask 9) -> (grad_input, grad_weight, grad_bias)
std::vector<Value> native_batch_norm_backward(Context& c) {
  Builder& b = c.b;
  DType acc = opmath(c.tensor(1).dtype());
  Value x = convert(b, c.tensor(1), acc);
  Value g = convert(b, c.tensor(0), acc);
  Channels ch = channels_of(x);
  bool train = c.bool_arg(7);
  double eps = c.double_arg(8);
  auto per_channel = [&](Value v) { return broadcast_in_dim(b, v, x.shape(), {1}); };
  auto vec = [&](double v) { return constant(b, v, acc, {ch.channels}); };
  auto channel_vec = [&](size_t i) { return reshape(b, convert(b, c.tensor(i), acc), {ch.channels}); };
  Value mean, invstd;
  if (train) {
    if (!c.has(5) || !c.has(6)) throw std::runtime_error("batch_norm backward: training needs save_mean and save_invstd");
    mean = channel_vec(5);
    invstd = channel_vec(6);
  } else {
    if (!c.has(3) || !c.has(4)) throw std::runtime_error("batch_norm backward: evaluation needs running statistics");
    mean = channel_vec(3);
    invstd = unary(b, Unary::Rsqrt, add(b, channel_vec(4), vec(eps)));
  }
  Value w = c.has(2) ? channel_vec(2) : vec(1.0);
  Value x_hat = mul(b, sub(b, x, per_channel(mean)), per_channel(invstd));
  Value grad_bias = reduce(b, g, ch.dims, "add");
  Value grad_weight = reduce(b, mul(b, g, x_hat), ch.dims, "add");
  Value scale = per_channel(mul(b, w, invstd));
  Value gi;
  if (train) {
    double n = static_cast<double>(ch.n);
    Value mean_g = per_channel(div(b, grad_bias, vec(n)));
    Value mean_gx = per_channel(div(b, grad_weight, vec(n)));
    gi = mul(b, scale, sub(b, sub(b, g, mean_g), mul(b, x_hat, mean_gx)));
  } else {
    gi = mul(b, g, scale);
  }
  // An output masked off by output_mask has no type (the driver drops it): returned as computed.
  auto fit = [&](Value v, size_t i) {
    const Type& t = c.out(i);
    return t.numel() == v.type.numel() ? reshape(b, convert(b, v, t.dtype), t.shape) : v;
  };
  return {fit(gi, 0), fit(grad_weight, 1), fit(grad_bias, 2)};
}

const Registrar registrar({
    {"native_batch_norm", native_batch_norm},
    {"_native_batch_norm_legit", native_batch_norm},
    {"native_batch_norm_backward", native_batch_norm_backward},
});

}  // namespace
}  // namespace tpu::lowering
