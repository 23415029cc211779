// Normalization layers: layer norm, group norm and batch norm, and their backwards.
//
// Statistics are computed in the opmath type (f32 for bf16/f16 inputs).
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// ---- Layer norm ----

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd)
std::vector<Value> native_layer_norm(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  DType out = c.out(0).dtype;
  DType acc = opmath(out);
  x = convert(b, x, acc);
  int64_t k = static_cast<int64_t>(c.ints(1).size());
  int64_t axis = x.rank() - k;
  if (axis < 0) throw std::invalid_argument("normalized_shape has more dims than the input");
  std::vector<int64_t> dims, kept;
  int64_t n = 1;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i >= axis) {
      dims.push_back(i);
      n *= x.shape()[i];
    } else {
      kept.push_back(i);
    }
  }
  auto back = [&](Value r) { return broadcast_in_dim(b, r, x.shape(), kept); };
  Value sum = reduce(b, x, dims, "add");
  Value mean = div(b, sum, constant(b, static_cast<double>(n), acc, sum.shape()));
  Value d = sub(b, x, back(mean));
  Value var = div(b, reduce(b, mul(b, d, d), dims, "add"), constant(b, static_cast<double>(n), acc, mean.shape()));
  Value rstd = unary(b, Unary::Rsqrt, add(b, var, constant(b, c.double_arg(4), acc, var.shape())));
  Value y = mul(b, d, back(rstd));
  if (n > 1) {
    // The CPU's mean is a Welford update: after an infinite element, inf + (x - inf) / k = NaN
    // (an inf as the very last element of a short row stays ±inf there; rare, not reproduced).
    Value inf_mean = compare(b, unary(b, Unary::Abs, mean), constant(b, INFINITY, acc, mean.shape()), Direction::EQ);
    mean = select(b, inf_mean, constant(b, NAN, acc, mean.shape()), mean);
  }
  std::vector<int64_t> wdims;
  for (int64_t i = axis; i < x.rank(); ++i) wdims.push_back(i);
  if (c.has(2)) y = mul(b, y, broadcast_in_dim(b, convert(b, c.tensor(2), acc), x.shape(), wdims));
  if (c.has(3)) y = add(b, y, broadcast_in_dim(b, convert(b, c.tensor(3), acc), x.shape(), wdims));
  return {convert(b, y, out), reshape(b, mean, c.out(1).shape), reshape(b, rstd, c.out(2).shape)};
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?, bias?,
// output_mask[3]) -> (grad_input, grad_weight, grad_bias); masked-off outputs are undefined
// (the driver drops whatever is returned for them).
std::vector<Value> native_layer_norm_backward(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(1);
  DType acc = opmath(x.dtype());
  x = convert(b, x, acc);
  Value g = convert(b, c.tensor(0), acc);
  int64_t k = static_cast<int64_t>(c.ints(2).size());
  int64_t axis = x.rank() - k;
  std::vector<int64_t> dims, kept, wdims;
  int64_t n = 1;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i >= axis) {
      dims.push_back(i);
      wdims.push_back(i);
      n *= x.shape()[i];
    } else {
      kept.push_back(i);
    }
  }
  auto stat = [&](size_t i) {  // mean/rstd come shaped [batch..., 1...]
    Value v = convert(b, c.tensor(i), acc);
    std::vector<int64_t> batch;
    for (int64_t d : kept) batch.push_back(x.shape()[d]);
    return broadcast_in_dim(b, reshape(b, v, batch), x.shape(), kept);
  };
  auto mean_over = [&](Value v) {
    Value s = reduce(b, v, dims, "add");
    s = div(b, s, constant(b, static_cast<double>(n), acc, s.shape()));
    return broadcast_in_dim(b, s, x.shape(), kept);
  };
  Value rstd = stat(4);
  Value x_hat = mul(b, sub(b, x, stat(3)), rstd);
  Value gw = c.has(5) ? mul(b, g, broadcast_in_dim(b, convert(b, c.tensor(5), acc), x.shape(), wdims)) : g;
  Value grad_input = mul(b, rstd, sub(b, sub(b, gw, mean_over(gw)), mul(b, x_hat, mean_over(mul(b, gw, x_hat)))));
  Value grad_weight = reduce(b, mul(b, g, x_hat), kept, "add");
  Value grad_bias = reduce(b, g, kept, "add");
  return {grad_input, grad_weight, grad_bias};
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
  Value rstd = unary(b, Unary::Rsqrt, add(b, var, constant(b, eps, acc, {N, G})));
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

// ---- Batch norm ----

// Statistics per channel (dim 1) over every other dim. `stats`: index of running_mean (then
// running_var) or -1; `training`: batch statistics (else the running ones); with
// `update_stats` the running statistics come back updated as outputs 3 and 4 (the functional
// form AOTAutograd graphs use; the unbiased variance goes into running_var, as PyTorch does).
std::vector<Value> batch_norm(Context& c, int stats, bool training, double momentum, double eps, bool update_stats) {
  Builder& b = c.b;
  DType out = c.out(0).dtype;
  DType acc = opmath(out);
  Value x = convert(b, c.tensor(0), acc);
  // The CPU kernel reads the channel count as input.size(1): its IndexError for a 1-D input.
  if (x.rank() < 2) {
    throw std::out_of_range("Dimension out of range (expected to be in range of [" + std::to_string(-std::max<int64_t>(x.rank(), 1)) +
                            ", " + std::to_string(std::max<int64_t>(x.rank(), 1) - 1) + "], but got 1)");
  }
  int64_t channels = x.shape()[1];
  // torch.batch_norm's checks (the CPU kernels behind it make none and read out of bounds).
  auto check_size = [&](size_t arg, const char* name) {
    if (!c.has(arg)) return;
    int64_t n = c.tensor(arg).type.numel();
    if (n != channels) {
      throw InvalidCall(std::string(name) + " should contain " + std::to_string(channels) + " elements not " +
                        std::to_string(n));
    }
  };
  check_size(1, "weight");
  check_size(2, "bias");
  if (stats >= 0) {
    check_size(static_cast<size_t>(stats), "running_mean");
    check_size(static_cast<size_t>(stats) + 1, "running_var");
  }
  std::vector<int64_t> dims;
  int64_t n = 1;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i == 1) continue;
    dims.push_back(i);
    n *= x.shape()[i];
  }
  auto per_channel = [&](Value v) { return broadcast_in_dim(b, v, x.shape(), {1}); };
  // A per-channel argument as a (C,) vector: a 0-d weight of one channel is accepted too.
  auto channel_arg = [&](size_t i) { return reshape(b, convert(b, c.tensor(i), acc), {channels}); };
  auto vec = [&](double v) { return constant(b, v, acc, {channels}); };
  Value mean, var;
  if (training) {
    mean = div(b, reduce(b, x, dims, "add"), vec(static_cast<double>(n)));
    Value d = sub(b, x, per_channel(mean));
    var = div(b, reduce(b, mul(b, d, d), dims, "add"), vec(static_cast<double>(n)));
  } else {
    if (stats < 0) throw std::invalid_argument("batch_norm: evaluation needs running statistics");
    mean = channel_arg(static_cast<size_t>(stats));
    var = channel_arg(static_cast<size_t>(stats) + 1);
  }
  Value rstd = training ? batch_norm_invstd(b, var, eps) : unary(b, Unary::Rsqrt, add(b, var, vec(eps)));
  Value y = mul(b, sub(b, x, per_channel(mean)), per_channel(rstd));
  if (c.has(1)) y = mul(b, y, per_channel(channel_arg(1)));
  if (c.has(2)) y = add(b, y, per_channel(channel_arg(2)));
  std::vector<Value> results{convert(b, y, out)};
  for (size_t i : {1, 2}) {  // save_mean, save_rstd: empty outside training
    results.push_back(training ? convert(b, reshape(b, i == 1 ? mean : rstd, c.out(i).shape), c.out(i).dtype)
                               : zeros(b, c.out(i)));
  }
  if (update_stats) {
    Value rm = channel_arg(static_cast<size_t>(stats)), rv = channel_arg(static_cast<size_t>(stats) + 1);
    if (training) {
      Value keep = vec(1 - momentum), m = vec(momentum);
      rm = add(b, mul(b, keep, rm), mul(b, m, mean));
      Value unbiased = mul(b, var, vec(n > 1 ? static_cast<double>(n) / static_cast<double>(n - 1) : 1.0));
      rv = add(b, mul(b, keep, rv), mul(b, m, unbiased));
    }
    results.push_back(convert(b, reshape(b, rm, c.out(3).shape), c.out(3).dtype));
    results.push_back(convert(b, reshape(b, rv, c.out(4).shape), c.out(4).dtype));
  }
  return results;
}

const Registrar registrar({
    // (input, weight?, bias?, running_mean, running_var, training, momentum, eps)
    {"_native_batch_norm_legit_functional", [](Context& c) {
       return batch_norm(c, 3, c.bool_arg(5), c.double_arg(6), c.double_arg(7), true);
     }},
    // no_stats: (input, weight?, bias?, training, momentum, eps)
    {"_native_batch_norm_legit.no_stats", [](Context& c) {
       return batch_norm(c, -1, true, c.double_arg(4), c.double_arg(5), false);
     }},
    // (input, weight?, bias?, running_mean, running_var, momentum, eps)
    {"_native_batch_norm_legit_no_training", [](Context& c) {
       return batch_norm(c, 3, false, c.double_arg(5), c.double_arg(6), false);
     }},
    {"native_layer_norm", native_layer_norm},
    {"native_layer_norm_backward", native_layer_norm_backward},
    {"native_group_norm", native_group_norm},
    {"native_group_norm_backward", native_group_norm_backward},
});

// Layer norm divides by the normalized extent: exact while the padded dim is not normalized.
const PaddedOperandsRegistrar padded_operands({
    {"native_layer_norm", PaddedOperands::KeepsDim},
    {"native_layer_norm_backward", PaddedOperands::StatsKeepDim},
});

}  // namespace
}  // namespace tpu::lowering
