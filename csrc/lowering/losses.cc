// Loss functions beyond nn.cc's: binary_cross_entropy and nll_loss2d, forward and backward.
//
// reduction: 0 none, 1 mean, 2 sum (at::Reduction). Like PyTorch's CPU kernels:
// binary_cross_entropy clamps both logs at -100 and its backward divides by
// max(x (1 - x), 1e-12); nll_loss2d's mean divides by the summed weight of the kept targets
// and its total_weight output is 0 for reduction none.
#include <numeric>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

constexpr int64_t kNone = 0, kMean = 1;

std::vector<int64_t> all_dims(const Value& x) {
  std::vector<int64_t> d(x.rank());
  std::iota(d.begin(), d.end(), 0);
  return d;
}

Value sum_all(Builder& b, Value x) { return reduce(b, x, all_dims(x), "add"); }

// binary_cross_entropy(self, target, weight?, reduction)
std::vector<Value> binary_cross_entropy(Context& c) {
  Builder& b = c.b;
  DType out = c.out().dtype;
  if (!is_float(out)) throw NotLowerable("binary_cross_entropy of a non-float type");  // the CPU raises
  DType t = opmath(out);
  Value x = convert(b, c.tensor(0), t);
  const std::vector<int64_t>& shape = x.shape();
  Value y = cast_to(b, c.tensor(1), t, shape);
  int64_t reduction = c.int_arg(3);
  if (x.type.numel() > 0) {
    // The CPU raises for an input or target outside [0, 1] (NaN included).
    auto outside = [&](Value v) {
      Value inside = binary(b, Binary::And, compare(b, v, zeros(b, v.type), Direction::GE),
                            compare(b, v, scalar_like(b, 1, v), Direction::LE));
      return reduce(b, unary(b, Unary::Not, inside), all_dims(v), "or");
    };
    b.assert_false(outside(x), "all elements of input should be between 0 and 1", CheckKind::RuntimeError);
    b.assert_false(outside(y), "all elements of target should be between 0 and 1", CheckKind::RuntimeError);
  }
  Value floor = scalar_like(b, -100, x);
  Value log_x = max(b, unary(b, Unary::Log, x), floor);
  Value log_1mx = max(b, unary(b, Unary::LogPlusOne, neg(b, x)), floor);
  Value one = scalar_like(b, 1, x);
  Value loss = sub(b, mul(b, sub(b, y, one), log_1mx), mul(b, y, log_x));
  if (c.has(2)) loss = mul(b, loss, cast_to(b, c.tensor(2), t, shape));
  Value r = loss;
  if (reduction != kNone) {
    r = sum_all(b, loss);
    if (reduction == kMean) r = div(b, r, constant(b, static_cast<double>(x.type.numel()), t));
  }
  return {convert(b, reshape(b, r, c.out().shape), out)};
}

// binary_cross_entropy_backward(grad_output, self, target, weight?, reduction)
std::vector<Value> binary_cross_entropy_backward(Context& c) {
  Builder& b = c.b;
  DType out = c.out().dtype;
  if (!is_float(out)) throw NotLowerable("binary_cross_entropy_backward of a non-float type");
  DType t = opmath(out);
  Value x = convert(b, c.tensor(1), t);
  const std::vector<int64_t>& shape = x.shape();
  Value g = cast_to(b, c.tensor(0), t, shape);
  Value y = cast_to(b, c.tensor(2), t, shape);
  Value one = scalar_like(b, 1, x);
  Value denom = max(b, mul(b, sub(b, one, x), x), scalar_like(b, 1e-12, x));
  Value r = div(b, mul(b, g, sub(b, x, y)), denom);
  if (c.has(3)) r = mul(b, r, cast_to(b, c.tensor(3), t, shape));
  if (c.int_arg(4) == kMean) r = div(b, r, scalar_like(b, static_cast<double>(x.type.numel()), r));
  return {convert(b, r, out)};
}

// nll_loss2d: input (N, C, H, W) is moved to (N, H, W, C) and the class picked by a one-hot
// comparison with the target (N, H, W).
struct Nll2d {
  Value x;       // (N, H, W, C) in the accumulation type
  Value onehot;  // pred, (N, H, W, C)
  Value keep;    // pred, (N, H, W): target != ignore_index
  Value weight;  // (N, H, W): the target's class weight, 0 where ignored
};

Nll2d nll2d_parts(Context& c, size_t self_arg, size_t target_arg, size_t weight_arg, int64_t ignore, DType acc) {
  Builder& b = c.b;
  Value in = c.tensor(self_arg);
  if (in.rank() != 4) throw NotLowerable("nll_loss2d with input rank " + std::to_string(in.rank()));
  Value x = transpose(b, convert(b, in, acc), {0, 2, 3, 1});
  Value target = convert(b, c.tensor(target_arg), DType::S64);
  int64_t C = x.shape()[3];
  Value keep = compare(b, target, constant(b, static_cast<double>(ignore), DType::S64, target.shape()), Direction::NE);
  if (target.type.numel() > 0) {
    Value bad = binary(b, Binary::Or, compare(b, target, zeros(b, target.type), Direction::LT),
                       compare(b, target, constant(b, static_cast<double>(C), DType::S64, target.shape()), Direction::GE));
    b.assert_false(reduce(b, binary(b, Binary::And, bad, keep), all_dims(target), "or"),
                   "Target is out of bounds");
  }
  Value tb = broadcast_in_dim(b, target, x.shape(), {0, 1, 2});
  Value onehot = compare(b, iota(b, Type(DType::S64, x.shape()), 3), tb, Direction::EQ);
  Value w;
  if (c.has(weight_arg)) {
    Value wb = broadcast_in_dim(b, convert(b, c.tensor(weight_arg), acc), x.shape(), {3});
    w = reduce(b, select(b, onehot, wb, zeros(b, wb.type)), {3}, "add");
  } else {
    w = constant(b, 1, acc, target.shape());
  }
  w = select(b, keep, w, zeros(b, w.type));
  return {x, onehot, keep, w};
}

// nll_loss2d_forward(self, target, weight?, reduction, ignore_index) -> (output, total_weight)
std::vector<Value> nll_loss2d_forward(Context& c) {
  Builder& b = c.b;
  DType out = c.out(0).dtype;
  DType acc = opmath(out);
  int64_t reduction = c.int_arg(3);
  Nll2d p = nll2d_parts(c, 0, 1, 2, c.int_arg(4), acc);
  Value picked = reduce(b, select(b, p.onehot, p.x, zeros(b, p.x.type)), {3}, "add");
  Value loss = neg(b, mul(b, picked, p.weight));
  Value total = reduction == kNone ? constant(b, 0, acc) : sum_all(b, p.weight);
  Value r = loss;
  if (reduction != kNone) {
    r = sum_all(b, loss);
    if (reduction == kMean) r = div(b, r, total);
  }
  return {convert(b, reshape(b, r, c.out(0).shape), out),
          convert(b, reshape(b, total, c.out(1).shape), c.out(1).dtype)};
}

// nll_loss2d_backward(grad_output, self, target, weight?, reduction, ignore_index, total_weight)
std::vector<Value> nll_loss2d_backward(Context& c) {
  Builder& b = c.b;
  DType out = c.out().dtype;
  DType acc = opmath(out);
  int64_t reduction = c.int_arg(4);
  Nll2d p = nll2d_parts(c, 1, 2, 3, c.int_arg(5), acc);
  const std::vector<int64_t>& ts = p.weight.shape();
  Value g = convert(b, c.tensor(0), acc);
  Value scale;
  if (reduction == kNone) {
    scale = reshape(b, g, ts);
  } else {
    Value gs = reshape(b, g, {});
    if (reduction == kMean) gs = div(b, gs, reshape(b, convert(b, c.tensor(6), acc), {}));
    scale = broadcast_in_dim(b, gs, ts, {});
  }
  // Ignored targets get 0 even when grad / total_weight is inf or NaN.
  Value per = select(b, p.keep, neg(b, mul(b, p.weight, scale)), zeros(b, p.weight.type));
  Value pb = broadcast_in_dim(b, per, p.x.shape(), {0, 1, 2});
  Value r = select(b, p.onehot, pb, zeros(b, p.x.type));
  return {convert(b, transpose(b, r, {0, 3, 1, 2}), out)};
}

const Registrar registrar({
    {"binary_cross_entropy", binary_cross_entropy},
    {"binary_cross_entropy_backward", binary_cross_entropy_backward},
    {"binary_cross_entropy_backward.grad_input", binary_cross_entropy_backward},
    {"nll_loss2d_forward", nll_loss2d_forward},
    {"nll_loss2d_forward.output", nll_loss2d_forward},
    {"nll_loss2d_backward", nll_loss2d_backward},
    {"nll_loss2d_backward.grad_input", nll_loss2d_backward},
});

}  // namespace
}  // namespace tpu::lowering
