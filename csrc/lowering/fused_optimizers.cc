// Fused optimizer steps (torch.optim.Adam/AdamW/SGD/Adagrad with fused=True): one module updates every
// parameter, gradient and state tensor of the group.
//
// The in-place ops (_fused_adamw_, ...) return () and write their mutable lists, in schema
// order: params, grads (unscaled by grad_scale), then the state lists. Their `float` arguments
// (lr, betas, eps, weight decay, momentum) are runtime values (the op adapter table,
// engine/eager/op_adapters.cc), so a learning-rate schedule never recompiles. Element-wise math
// runs in the opmath type, like PyTorch's fused kernels; with found_inf == 1 (AMP found an
// inf/NaN gradient) nothing is written, as in those kernels.
#include <cmath>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

const std::vector<Value>& list(Context& c, size_t a) { return c.arg(a).tensors; }

// Every list the op updates holds one tensor per parameter, of the parameter's shape (some ops
// have no meta kernel to check this).
void check_lists(Context& c, const char* op, std::initializer_list<size_t> lists) {
  const auto& params = list(c, 0);
  for (size_t a : lists) {
    const auto& l = list(c, a);
    if (l.empty() && a != 1) continue;  // optional state (momentum buffers, max_exp_avg_sqs)
    if (l.size() != params.size()) {
      throw std::invalid_argument(std::string(op) + ": argument " + std::to_string(a) + " has " +
                                  std::to_string(l.size()) + " tensors for " + std::to_string(params.size()) + " parameters");
    }
    for (size_t i = 0; i < l.size(); ++i) {
      if (l[i].shape() != params[i].shape()) {
        throw std::invalid_argument(std::string(op) + ": tensor " + std::to_string(i) + " of argument " +
                                    std::to_string(a) + " has shape " + shape_str(l[i].shape()) + ", its parameter " +
                                    shape_str(params[i].shape()));
      }
    }
  }
}

// A runtime scalar argument (or a 0-d tensor: tensor_lr, state_steps[i]) broadcast to `x`.
// A one-element tensor of any rank serves, as the CPU kernels read it with .item().
Value scalar(Context& c, Value v, Value x) {
  if (v.rank() > 0) {
    if (v.type.numel() != 1) {
      throw InvalidCall("a Tensor with " + std::to_string(v.type.numel()) + " elements cannot be converted to Scalar");
    }
    v = reshape(c.b, v, {});
  }
  return broadcast_in_dim(c.b, convert(c.b, v, x.dtype()), x.shape(), {});
}

// The common prologue of the fused kernels: unscale (grad_scale), negate (maximize).
struct Prologue {
  Value unscaled;  // written back to the grads
  Value grad;      // used by the update (negated with maximize)
  Value skip;      // found_inf == 1, broadcast to the element shape (or unset)
};

// grad_scale / found_inf as the CPU kernels read them: their first element, whatever their shape
// (AMP passes 1-element tensors).
Value first_element(Context& c, size_t a, const char* name) {
  Value v = c.tensor(a);
  int64_t n = v.type.numel();
  if (n == 0) throw InvalidCall(std::string("fused optimizer: ") + name + " has no elements");
  if (v.rank() == 0) return v;
  Value flat = reshape(c.b, v, {n});
  return reshape(c.b, n == 1 ? flat : slice(c.b, flat, {0}, {1}, {1}), {});
}

Prologue prologue(Context& c, Value grad, DType t, bool maximize, size_t grad_scale, size_t found_inf) {
  Prologue p;
  p.unscaled = convert(c.b, grad, t);
  // The CPU kernels read grad_scale per element: a parameter without elements never reads it.
  if (c.has(grad_scale) && grad.type.numel() > 0) p.unscaled = div(c.b, p.unscaled, scalar(c, first_element(c, grad_scale, "grad_scale"), p.unscaled));
  p.grad = maximize ? hlo::unary(c.b, Unary::Negate, p.unscaled) : p.unscaled;
  if (c.has(found_inf)) {
    Value inf = convert(c.b, first_element(c, found_inf, "found_inf"), t);
    // PyTorch's fused kernels (CPU and CUDA) skip the step only when found_inf == 1.
    p.skip = broadcast_in_dim(c.b, compare(c.b, reshape(c.b, inf, {}), constant(c.b, 1, t), Direction::EQ), p.grad.shape(), {});
  }
  return p;
}

// The value written to a state tensor: `updated` unless the step is skipped.
Value written(Context& c, const Prologue& p, Value updated, Value old, DType out) {
  Value v = p.skip.valid() ? select(c.b, p.skip, convert(c.b, old, updated.dtype()), updated) : updated;
  return convert(c.b, v, out);
}

// A `float` hyper-parameter as the double PyTorch passed, in type t: hi + lo (0-d values). The
// CPU computes 1 - beta and the bias corrections in double; from beta2 = 0.999 rounded to
// float32 alone, 1 - beta2 would be off by 1.3e-5 relative (registry.h, Arg::low).
struct Hyper {
  Value hi, lo;
};

Hyper hyper(Context& c, size_t a, DType t) {
  const Arg& arg = c.arg(a);
  if (arg.kind == Arg::Kind::Double) {  // a graph constant
    float hi = static_cast<float>(arg.d);
    double lo = t == DType::F64 || !std::isfinite(hi) ? 0.0 : arg.d - hi;
    return {constant(c.b, t == DType::F64 ? arg.d : hi, t), constant(c.b, lo, t)};
  }
  Value hi = convert(c.b, reshape(c.b, arg.tensor, {}), t);
  bool has_low = arg.low.valid() && t != DType::F64;
  return {hi, has_low ? convert(c.b, reshape(c.b, arg.low, {}), t) : constant(c.b, 0, t)};
}

Value one_minus(Builder& b, const Hyper& x) { return sub(b, sub(b, constant(b, 1, x.hi.dtype()), x.hi), x.lo); }

// 1 - beta^step, accurate to a few ulps for beta in [0, 1] as -expm1(step * log1p(-(1 - beta)));
// other betas (which torch.optim rejects) use the plain power.
Value bias_correction(Builder& b, const Hyper& beta, Value step) {
  DType t = beta.hi.dtype();
  Value accurate = hlo::unary(b, Unary::Negate, hlo::unary(b, Unary::ExponentialMinusOne,
      mul(b, step, hlo::unary(b, Unary::LogPlusOne, hlo::unary(b, Unary::Negate, one_minus(b, beta))))));
  Value plain = sub(b, constant(b, 1, t), hlo::binary(b, Binary::Power, beta.hi, step));
  Value in_range = hlo::binary(b, Binary::And, compare(b, beta.hi, constant(b, 0, t), Direction::GE),
                               compare(b, beta.hi, constant(b, 1, t), Direction::LE));
  return select(b, in_range, accurate, plain);
}

Value filled_like(Builder& b, Value scalar0d, Value x) { return broadcast_in_dim(b, scalar0d, x.shape(), {}); }

// _fused_adam(w)_(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1,
// beta2, weight_decay, eps, amsgrad, maximize, grad_scale?, found_inf?)
Rule adam(bool decoupled_weight_decay) {
  return [decoupled_weight_decay](Context& c) {
    Builder& b = c.b;
    const auto &params = list(c, 0), &grads = list(c, 1), &m = list(c, 2), &v = list(c, 3), &vmax = list(c, 4);
    const auto& steps = list(c, 5);
    check_lists(c, "_fused_adam", {1, 2, 3, 4});
    bool amsgrad = c.bool_arg(11), maximize = c.bool_arg(12);
    size_t n = params.size();
    std::vector<Value> p_out, g_out, m_out, v_out, vmax_out;
    for (size_t i = 0; i < n; ++i) {
      DType t = opmath(params[i].dtype());
      Prologue pro = prologue(c, grads[i], t, maximize, 13, 14);
      Value param = convert(b, params[i], t), g = pro.grad;
      Hyper beta1 = hyper(c, 7, t), beta2 = hyper(c, 8, t);
      Value step = convert(b, reshape(b, steps[i], {}), t);
      // Per-tensor scalars first (0-d), then broadcast: the step size and the bias corrections.
      Value step_size = div(b, hyper(c, 6, t).hi, bias_correction(b, beta1, step));
      Value correction2_sqrt = hlo::unary(b, Unary::Sqrt, bias_correction(b, beta2, step));
      Value lr = filled_like(b, hyper(c, 6, t).hi, param), wd = filled_like(b, hyper(c, 9, t).hi, param),
            eps = filled_like(b, hyper(c, 10, t).hi, param);
      Value decays = compare(b, wd, zeros(b, wd.type), Direction::NE);  // skipped at 0: inf * 0 would be NaN
      Value decayed = param;
      if (decoupled_weight_decay) {
        decayed = select(b, decays, mul(b, param, sub(b, scalar_like(b, 1, param), mul(b, lr, wd))), param);
      } else {
        g = select(b, decays, add(b, g, mul(b, param, wd)), g);
      }
      Value exp_avg = add(b, mul(b, convert(b, m[i], t), filled_like(b, beta1.hi, g)),
                          mul(b, g, filled_like(b, one_minus(b, beta1), g)));
      Value exp_avg_sq = add(b, mul(b, convert(b, v[i], t), filled_like(b, beta2.hi, g)),
                             mul(b, mul(b, g, g), filled_like(b, one_minus(b, beta2), g)));
      Value second = exp_avg_sq;
      if (amsgrad) {
        second = max(b, convert(b, vmax.at(i), t), exp_avg_sq);
        vmax_out.push_back(written(c, pro, second, vmax[i], vmax[i].dtype()));
      }
      Value denom = add(b, div(b, hlo::unary(b, Unary::Sqrt, second), filled_like(b, correction2_sqrt, second)), eps);
      Value updated = sub(b, decayed, mul(b, filled_like(b, step_size, param), div(b, exp_avg, denom)));
      p_out.push_back(written(c, pro, updated, params[i], params[i].dtype()));
      g_out.push_back(written(c, pro, pro.unscaled, grads[i], grads[i].dtype()));
      m_out.push_back(written(c, pro, exp_avg, m[i], m[i].dtype()));
      v_out.push_back(written(c, pro, exp_avg_sq, v[i], v[i].dtype()));
    }
    std::vector<Value> out = p_out;
    for (const auto* l : {&g_out, &m_out, &v_out, &vmax_out}) out.insert(out.end(), l->begin(), l->end());
    return out;
  };
}

// _fused_sgd_(self, grads, momentum_buffer_list, *, weight_decay, momentum, lr, dampening,
// nesterov, maximize, is_first_step, grad_scale?, found_inf?)
std::vector<Value> sgd(Context& c) {
  Builder& b = c.b;
  const auto &params = list(c, 0), &grads = list(c, 1), &bufs = list(c, 2);
  check_lists(c, "_fused_sgd", {1, 2});
  bool nesterov = c.bool_arg(7), maximize = c.bool_arg(8), first_step = c.bool_arg(9);
  std::vector<Value> p_out, g_out, buf_out;
  for (size_t i = 0; i < params.size(); ++i) {
    DType t = opmath(params[i].dtype());
    Prologue pro = prologue(c, grads[i], t, maximize, 10, 11);
    Value param = convert(b, params[i], t), g = pro.grad;
    Value wd = filled_like(b, hyper(c, 3, t).hi, param), momentum = filled_like(b, hyper(c, 4, t).hi, param),
          lr = filled_like(b, hyper(c, 5, t).hi, param);
    g = select(b, compare(b, wd, zeros(b, wd.type), Direction::NE), add(b, g, mul(b, wd, param)), g);
    if (!bufs.empty()) {  // PyTorch passes momentum buffers only when momentum != 0
      Value buf = first_step ? g
                             : add(b, mul(b, momentum, convert(b, bufs[i], t)),
                                   mul(b, filled_like(b, one_minus(b, hyper(c, 6, t)), g), g));
      buf_out.push_back(written(c, pro, buf, bufs[i], bufs[i].dtype()));
      g = nesterov ? add(b, g, mul(b, momentum, buf)) : buf;
    }
    p_out.push_back(written(c, pro, sub(b, param, mul(b, lr, g)), params[i], params[i].dtype()));
    g_out.push_back(written(c, pro, pro.unscaled, grads[i], grads[i].dtype()));
  }
  std::vector<Value> out = p_out;
  out.insert(out.end(), g_out.begin(), g_out.end());
  out.insert(out.end(), buf_out.begin(), buf_out.end());
  return out;
}

// _fused_adagrad_(self, grads, state_sums, state_steps, *, lr, lr_decay, weight_decay, eps,
// maximize, grad_scale?, found_inf?). The steps were already incremented by the optimizer; the
// float-lr schema marks them written, so they are written back unchanged (the tensor_lr one does not).
Rule adagrad(bool writes_steps) {
  return [writes_steps](Context& c) {
    Builder& b = c.b;
    const auto &params = list(c, 0), &grads = list(c, 1), &sums = list(c, 2), &steps = list(c, 3);
    check_lists(c, "_fused_adagrad", {1, 2});
    bool maximize = c.bool_arg(8);
    std::vector<Value> p_out, g_out, sum_out;
    for (size_t i = 0; i < params.size(); ++i) {
      DType t = opmath(params[i].dtype());
      Prologue pro = prologue(c, grads[i], t, maximize, 9, 10);
      Value param = convert(b, params[i], t), g = pro.grad;
      Value lr = scalar(c, c.tensor(4), param), lr_decay = scalar(c, c.tensor(5), param),
            wd = scalar(c, c.tensor(6), param), eps = scalar(c, c.tensor(7), param), step = scalar(c, steps.at(i), param);
      Value one = scalar_like(b, 1, param);
      g = select(b, compare(b, wd, zeros(b, wd.type), Direction::NE), add(b, g, mul(b, param, wd)), g);
      Value clr = div(b, lr, add(b, one, mul(b, sub(b, step, one), lr_decay)));
      Value sum = add(b, convert(b, sums[i], t), mul(b, g, g));
      Value std_ = add(b, hlo::unary(b, Unary::Sqrt, sum), eps);
      Value updated = sub(b, param, mul(b, clr, div(b, g, std_)));
      p_out.push_back(written(c, pro, updated, params[i], params[i].dtype()));
      g_out.push_back(written(c, pro, pro.unscaled, grads[i], grads[i].dtype()));
      sum_out.push_back(written(c, pro, sum, sums[i], sums[i].dtype()));
    }
    std::vector<Value> out = p_out;
    for (const auto* l : {&g_out, &sum_out}) out.insert(out.end(), l->begin(), l->end());
    if (writes_steps) out.insert(out.end(), steps.begin(), steps.end());
    return out;
  };
}

const Registrar registrar({
    {"_fused_adam", adam(false)},
    {"_fused_adam.tensor_lr", adam(false)},
    {"_fused_adamw", adam(true)},
    {"_fused_adamw.tensor_lr", adam(true)},
    {"_fused_sgd", sgd},
    {"_fused_sgd.tensor_lr", sgd},
    {"_fused_adagrad", adagrad(true)},
    {"_fused_adagrad.tensor_lr", adagrad(false)},
});

}  // namespace
}  // namespace tpu::lowering
