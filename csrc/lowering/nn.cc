// Neural-network ops: softmax family, nll/mse losses, dropout (layer and group norm are in
// norm.cc).
#include <cmath>
#include <limits>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// Softmax pieces: x - max and the sum of exponentials. A row whose max is +inf or -inf gives
// NaN everywhere, as on the CPU (inf - inf); fully masked attention rows are _safe_softmax's job.
std::pair<Value, Value> shifted(Builder& b, Value x, int64_t dim) {
  Value m = reduce_keep(b, x, dim, "max");
  Value s = sub(b, x, m);
  return {s, reduce_keep(b, unary(b, Unary::Exponential, s), dim, "add")};
}

Rule softmax_rule(bool log) {
  return [log](Context& c) {
    Value x = c.tensor(0);
    if (is_complex(x.dtype())) throw NotLowerable("complex softmax");
    require_dtype(is_float(x.dtype()), log ? "log_softmax" : "softmax", x.dtype());
    DType out = c.out().dtype;
    DType acc = opmath(out);
    x = convert(c.b, x, acc);
    if (x.rank() == 0) {
      wrap_dim(c.int_arg(1), 0);
      Value r = log ? sub(c.b, x, x) : div(c.b, unary(c.b, Unary::Exponential, sub(c.b, x, x)),
                                             unary(c.b, Unary::Exponential, sub(c.b, x, x)));
      return std::vector<Value>{convert(c.b, r, out)};
    }
    int64_t dim = wrap_dim(c.int_arg(1), x.rank());
    if (x.shape()[dim] == 0) return std::vector<Value>{convert(c.b, x, out)};
    auto [s, sum] = shifted(c.b, x, dim);
    Value r = log ? sub(c.b, s, unary(c.b, Unary::Log, sum))
                  : div(c.b, unary(c.b, Unary::Exponential, s), sum);
    return std::vector<Value>{convert(c.b, r, out)};
  };
}

// _softmax_backward_data(grad_output, output, dim, input_dtype)
Rule softmax_backward_rule(bool log) {
  return [log](Context& c) {
    DType out = c.out().dtype;
    if (c.out().numel() == 0) return std::vector<Value>{zeros(c.b, c.out())};
    // An integer result (the CPU's dtype for integer gradients) is computed in float32.
    DType acc = is_float(out) || is_complex(out) ? opmath(out) : DType::F32;
    Value g = convert(c.b, c.tensor(0), acc), y = convert(c.b, c.tensor(1), acc);
    // The CPU kernel reads `output` with grad's layout without checking (out of bounds when it
    // is smaller): a mismatch is an error here (docs/limits.md).
    if (g.shape() != y.shape()) {
      throw InvalidCall("output shape " + shape_str(y.shape()) + " must match grad_output shape " + shape_str(g.shape()));
    }
    // A 0-d softmax is one element along its dim: the same formula, as the CPU computes it.
    std::vector<int64_t> shape = g.shape();
    if (g.rank() == 0) {
      wrap_dim(c.int_arg(2), 0);
      g = reshape(c.b, g, {1});
      y = reshape(c.b, y, {1});
    }
    int64_t dim = wrap_dim(c.int_arg(2), g.rank());
    Value r;
    if (log) {
      r = sub(c.b, g, mul(c.b, unary(c.b, Unary::Exponential, y), reduce_keep(c.b, g, dim, "add")));
    } else {
      // (grad - sum(grad * output)) * output, grouped as the CPU kernel: with an infinite output
      // the distributed form gives inf - inf = NaN where the CPU's gives inf.
      Value s = reduce_keep(c.b, mul(c.b, g, y), dim, "add");
      r = mul(c.b, sub(c.b, g, s), y);
    }
    return std::vector<Value>{convert(c.b, reshape(c.b, r, shape), out)};
  };
}

// One-hot selection over the class dimension: target (N) or () against input (N, C) or (C).
struct NllParts {
  Value onehot;  // pred, shape of input
  Value weight;  // per-sample weight (with ignore mask applied), shape of target
};

NllParts nll_parts(Context& c, Value x, Value target, bool has_weight, size_t weight_arg,
                   int64_t ignore_index, DType acc) {
  Builder& b = c.b;
  int64_t cdim = x.rank() - 1;
  if (x.rank() > 2 || x.rank() < 1) throw NotLowerable("nll_loss with input rank " + std::to_string(x.rank()));
  int64_t C = x.shape()[cdim];
  Value t = convert(b, target, DType::S64);
  std::vector<int64_t> tdims;
  for (int64_t i = 0; i < t.rank(); ++i) tdims.push_back(i);
  Value tb = broadcast_in_dim(b, t, x.shape(), tdims);
  Value onehot = compare(b, iota(b, Type(DType::S64, x.shape()), cdim), tb, Direction::EQ);
  Value w;
  if (has_weight) {
    Value wt = convert(b, c.tensor(weight_arg), acc);
    Value wb = broadcast_in_dim(b, wt, x.shape(), {cdim});
    w = reduce(b, select(b, onehot, wb, zeros(b, wb.type)), {cdim}, "add");
  } else {
    w = constant(b, 1, acc, t.shape());
  }
  Value keep = compare(b, t, constant(b, static_cast<double>(ignore_index), DType::S64, t.shape()), Direction::NE);
  // A target outside [0, C) that is not ignore_index: the CPU raises IndexError.
  if (t.type.numel() > 0) {
    Value low = compare(b, t, constant(b, 0, DType::S64, t.shape()), Direction::LT);
    Value high = compare(b, t, constant(b, static_cast<double>(C), DType::S64, t.shape()), Direction::GE);
    Value bad = binary(b, Binary::And, keep, binary(b, Binary::Or, low, high));
    std::vector<int64_t> all(t.rank());
    for (int64_t i = 0; i < t.rank(); ++i) all[i] = i;
    b.assert_false(reduce(b, bad, all, "or"), "Target is out of bounds (classes: " + std::to_string(C) + ")");
  }
  w = select(b, keep, w, zeros(b, w.type));
  return {onehot, w};
}

// nll_loss_forward(self, target, weight?, reduction, ignore_index) -> (output, total_weight)
std::vector<Value> nll_loss_forward(Context& c) {
  Builder& b = c.b;
  DType out = c.out(0).dtype;
  DType acc = opmath(out);
  Value x = convert(b, c.tensor(0), acc);
  int64_t reduction = c.int_arg(3), ignore = c.int_arg(4);
  NllParts p = nll_parts(c, x, c.tensor(1), c.has(2), 2, ignore, acc);
  int64_t cdim = x.rank() - 1;
  Value picked = reduce(b, select(b, p.onehot, x, zeros(b, x.type)), {cdim}, "add");
  Value loss = neg(b, mul(b, picked, p.weight));
  std::vector<int64_t> all;
  for (int64_t i = 0; i < loss.rank(); ++i) all.push_back(i);
  // The CPU kernel leaves total_weight 0 for a batch with reduction none (a 1-D input takes the
  // reducing path and reports its target's weight).
  Value total = reduction == 0 && x.rank() == 2 ? constant(b, 0, acc) : reduce(b, p.weight, all, "add");
  Value result;
  if (reduction == 0) {
    result = loss;
  } else {
    result = reduce(b, loss, all, "add");
    if (reduction == 1) result = div(b, result, total);
  }
  return {convert(b, reshape(b, result, c.out(0).shape), out),
          convert(b, reshape(b, total, c.out(1).shape), c.out(1).dtype)};
}

// nll_loss_backward(grad_output, self, target, weight?, reduction, ignore_index, total_weight)
std::vector<Value> nll_loss_backward(Context& c) {
  Builder& b = c.b;
  DType out = c.out().dtype;
  DType acc = opmath(out);
  Value x = convert(b, c.tensor(1), acc);
  int64_t reduction = c.int_arg(4), ignore = c.int_arg(5);
  NllParts p = nll_parts(c, x, c.tensor(2), c.has(3), 3, ignore, acc);
  Value g = convert(b, c.tensor(0), acc);
  Value scale;  // per-sample factor, shape of target
  if (reduction == 0) {
    scale = reshape(b, g, p.weight.shape());
  } else {
    Value gs = reshape(b, g, {});
    if (reduction == 1) gs = div(b, gs, reshape(b, convert(b, c.tensor(6), acc), {}));
    scale = broadcast_in_dim(b, gs, p.weight.shape(), {});
  }
  Value per = neg(b, mul(b, scale, p.weight));
  // Ignored targets get no gradient even when every target is ignored (scale = g / 0).
  Value counted = compare(b, p.weight, zeros(b, p.weight.type), Direction::NE);
  per = select(b, counted, per, zeros(b, per.type));
  std::vector<int64_t> tdims;
  for (int64_t i = 0; i < per.rank(); ++i) tdims.push_back(i);
  Value pb = broadcast_in_dim(b, per, x.shape(), tdims);
  return {convert(b, select(b, p.onehot, pb, zeros(b, x.type)), out)};
}

// mse_loss(self, target, reduction)
std::vector<Value> mse_loss(Context& c) {
  Builder& b = c.b;
  DType out = c.out().dtype;
  DType acc = opmath(out);
  std::vector<int64_t> shape = broadcast_shapes(c.tensor(0).shape(), c.tensor(1).shape());
  Value x = cast_to(b, c.tensor(0), acc, shape), y = cast_to(b, c.tensor(1), acc, shape);
  Value d = sub(b, x, y);
  Value l = mul(b, d, d);
  int64_t reduction = c.int_arg(2);
  if (reduction != 0) {
    std::vector<int64_t> all;
    for (int64_t i = 0; i < l.rank(); ++i) all.push_back(i);
    int64_t n = l.type.numel();
    l = reduce(b, l, all, "add");
    if (reduction == 1) l = div(b, l, constant(b, static_cast<double>(n), acc));
  }
  return {convert(b, reshape(b, l, c.out().shape), out)};
}

// mse_loss_backward(grad_output, self, target, reduction)
std::vector<Value> mse_loss_backward(Context& c) {
  Builder& b = c.b;
  DType out = c.out().dtype;
  // Integer operands are computed in their promoted integer type, the factor 2/n included
  // (truncated), as the CPU kernel does; an out= of another dtype receives the converted result.
  bool integral = is_integer(c.compute_dtype);
  DType acc = integral ? c.compute_dtype : opmath(out);
  const auto& shape = c.out().shape;
  Value x = cast_to(b, c.tensor(1), acc, shape), y = cast_to(b, c.tensor(2), acc, shape);
  Value g = cast_to(b, c.tensor(0), acc, shape);
  // The mean's count is self's elements, as on the CPU, even where grad_output or target
  // broadcast self to a larger gradient.
  int64_t n = c.tensor(1).type.numel();
  double k = c.int_arg(3) == 1 && n > 0 ? 2.0 / static_cast<double>(n) : 2.0;
  if (integral) k = std::trunc(k);
  Value r = mul(b, mul(b, constant(b, k, acc, shape), sub(b, x, y)), g);
  return {convert(b, r, out)};
}

// Uniform floats in [0, 1) from random bits (f32 mantissa construction).
Value uniform01(Builder& b, Value key, const std::vector<int64_t>& shape) {
  Value bits = rng_bit_generator(b, key, Type(DType::U32, shape)).at(1);
  Value m = binary(b, Binary::ShiftRightLogical, bits, constant(b, 9, DType::U32, shape));
  Value one_bits = binary(b, Binary::Or, m, constant(b, 0x3F800000u, DType::U32, shape));
  Value f = bitcast_convert(b, one_bits, DType::F32);
  return sub(b, f, constant(b, 1, DType::F32, shape));
}

// The per-op key: the generator's (seed, counter) spread so that successive ops' counter
// ranges do not overlap.
Value op_key(Builder& b, Value key) {
  Value seed = slice(b, key, {0}, {1}, {1});
  Value ctr = slice(b, key, {1}, {2}, {1});
  Value hi = binary(b, Binary::ShiftRightLogical, ctr, constant(b, 32, DType::U64, {1}));
  Value lo = binary(b, Binary::ShiftLeft, ctr, constant(b, 32, DType::U64, {1}));
  Value golden = b.emit1("stablehlo.constant", {}, Type(DType::U64, {1}),
                         "value = dense<11400714819323198485> : tensor<1xui64>");
  seed = add(b, seed, mul(b, hi, golden));
  return concatenate(b, {seed, lo}, 0);
}

// native_dropout(input, p, train?) -> (output, mask)
std::vector<Value> native_dropout(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  DType out = c.out(0).dtype;
  double p = c.double_arg(1);
  bool train = !c.has(2) || c.bool_arg(2);
  if (!train || x.type.numel() == 0) {
    return {x, constant(b, 1, DType::Pred, x.shape())};
  }
  if (!c.rng_key.valid()) throw NotLowerable("native_dropout without an rng key");
  Value u = uniform01(b, op_key(b, c.rng_key), x.shape());
  Value mask = compare(b, u, constant(b, 1.0 - p, DType::F32, x.shape()), Direction::LT);
  double scale = p >= 1.0 ? 0.0 : 1.0 / (1.0 - p);
  DType acc = opmath(out);
  Value xf = convert(b, x, acc);
  Value r = mul(b, select(b, mask, xf, zeros(b, xf.type)), constant(b, scale, acc, x.shape()));
  return {convert(b, r, out), mask};
}

// native_dropout_backward(grad_output, mask, scale)
std::vector<Value> native_dropout_backward(Context& c) {
  Builder& b = c.b;
  DType out = c.out().dtype;
  // grad and mask broadcast against each other, as the CPU's grad * mask * scale does.
  Value g = cast_to(b, c.tensor(0), opmath(out), c.out().shape);
  Value m = cast_to(b, c.tensor(1), DType::Pred, c.out().shape);
  // grad * mask * scale as on the CPU: a dropped inf or NaN gradient gives NaN (inf * 0).
  Value r = mul(b, select(b, m, g, mul(b, g, zeros(b, g.type))), scalar_like(b, c.double_arg(2), g));
  return {convert(b, r, out)};
}

const Registrar registrar({
    {"_softmax", softmax_rule(false)},
    {"_log_softmax", softmax_rule(true)},
    {"_softmax_backward_data", softmax_backward_rule(false)},
    {"_log_softmax_backward_data", softmax_backward_rule(true)},
    {"_softmax_backward_data.out", softmax_backward_rule(false)},
    {"_log_softmax_backward_data.out", softmax_backward_rule(true)},
    {"nll_loss_forward", nll_loss_forward},
    {"nll_loss_forward.output", nll_loss_forward},
    {"nll_loss_backward", nll_loss_backward},
    {"nll_loss_backward.grad_input", nll_loss_backward},
    {"mse_loss", mse_loss},
    {"mse_loss_backward", mse_loss_backward},
    {"mse_loss_backward.grad_input", mse_loss_backward},
    {"native_dropout", native_dropout},
    {"native_dropout_backward", native_dropout_backward},
});

// Softmax over a padded dim: the padder masks its max and sum (and the backward's sum).
// nll_loss over padded samples: the padder masks the loss's sum, the total weight it divides by
// and the out-of-range check; its backward is row-wise. Together they keep a causal LM's
// training loss (cross_entropy of a bucketed prompt's logits) and its gradients in the bucket.
const PaddedOperandsRegistrar padded_operands({
    {"_softmax", PaddedOperands::Exact},
    {"_log_softmax", PaddedOperands::Exact},
    {"_softmax_backward_data", PaddedOperands::Exact},
    {"_log_softmax_backward_data", PaddedOperands::Exact},
    {"nll_loss_forward", PaddedOperands::Exact},
    {"nll_loss_backward", PaddedOperands::Exact},
});

}  // namespace
}  // namespace tpu::lowering
