#include "engine/eager/op_adapters.h"

#include "engine/eager/fallback_guards.h"
#include "engine/growing/growing_dims.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/native/RangeUtils.h>
#include <ATen/native/Resize.h>

#include <algorithm>
#include <map>
#include <string>

namespace tpu::engine {

namespace {

bool is_mask(const at::Tensor& t) { return t.scalar_type() == at::kBool || t.scalar_type() == at::kByte; }

// A tpu boolean mask is lowered only where it has a static meaning (x[mask] = scalar is a
// select); elsewhere the result's size depends on the mask, so it becomes its coordinates
// through `nonzero` (one host sync to learn the count, as on CUDA), then a lowered gather.
bool expand_device_masks(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t first) {
  if (op.schema().name() == "aten::index") return true;
  const c10::IValue& values = stack[first + 2];
  return values.isTensor() && values.toTensor().numel() != 1;
}

// PyTorch's check: a mask covers the indexed dimensions it stands for, size for size (its
// coordinates would otherwise index silently within the wrong extents).
void check_mask_shape(const at::Tensor& self, const at::Tensor& mask, int64_t dim) {
  for (int64_t d = 0; d < mask.dim(); ++d) {
    TORCH_CHECK_INDEX(dim + d < self.dim() && mask.size(d) == self.size(dim + d), "The shape of the mask ",
                      mask.sizes(), " at index ", d, " does not match the shape of the indexed tensor ",
                      self.sizes(), " at index ", dim + d);
  }
}

}  // namespace

void move_cpu_indices(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t num_args) {
  size_t first = stack->size() - num_args;
  const c10::IValue& self = (*stack)[first];
  if (!self.isTensor() || !self.toTensor().is_privateuseone()) return;
  bool expand_masks = expand_device_masks(op, *stack, first);
  for (size_t a = 0; a < num_args; ++a) {
    c10::IValue& v = (*stack)[first + a];
    if (!v.isOptionalTensorList()) continue;
    c10::List<std::optional<at::Tensor>> moved;
    bool changed = false;
    const c10::Device device = self.toTensor().device();
    int64_t dim = 0;  // the indexed dimension the entry starts at
    for (const std::optional<at::Tensor> t : v.toOptionalTensorList()) {
      bool mask = t.has_value() && t->defined() && is_mask(*t);
      if (mask) check_mask_shape(self.toTensor(), *t, dim);
      dim += mask ? std::max<int64_t>(t->dim(), 1) : 1;
      bool defined = t.has_value() && t->defined() && t->dim() > 0;
      bool on_cpu = defined && t->device().is_cpu();
      bool device_mask = defined && mask && expand_masks && t->is_privateuseone();
      changed |= on_cpu || device_mask;
      if (!on_cpu && !device_mask) {
        moved.push_back(t);
      } else if (mask) {
        at::Tensor coords = t->nonzero();  // on the mask's device
        for (int64_t d = 0; d < t->dim(); ++d) moved.push_back(coords.select(1, d).to(device));
      } else {
        moved.push_back(t->to(device));
      }
    }
    if (changed) v = moved;
  }
}

void check_out_dtype_is_self_dtype(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t num_args) {
  if (op.operator_name().overload_name != "out") return;
  size_t first = stack->size() - num_args;
  const at::Tensor& self = (*stack)[first].toTensor();
  const at::Tensor& out = (*stack)[first + num_args - 1].toTensor();
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), op.operator_name(), ": expected scalar_type ",
              self.scalar_type(), " but found ", out.scalar_type());
}

namespace {

// native_batch_norm / _native_batch_norm_legit(input, weight, bias, running_mean, running_var,
// training, ...): the running statistics are written in training.
std::vector<int> batch_norm_running_stats(const torch::jit::Stack& stack, size_t first) {
  const c10::IValue& training = stack[first + 5];  // (the no_stats overload has eps there)
  if (!training.isBool() || !training.toBool()) return {};
  std::vector<int> args;
  for (int a : {3, 4}) {
    const c10::IValue& v = stack[first + a];
    if (v.isTensor() && v.toTensor().defined()) args.push_back(a);
  }
  return args.size() == 2 ? args : std::vector<int>{};
}

// threshold_backward(grad, self, threshold): a binary TensorIterator op on the CPU, so the
// result type is the promoted one (the meta kernel keeps grad's: int grads, float self).
c10::ScalarType promoted_grad_and_self(const torch::jit::Stack& stack, size_t first) {
  return at::result_type(stack[first].toTensor(), stack[first + 1].toTensor());
}

// _(log_)softmax_backward_data(grad, output, dim, input_dtype): grad's dtype, except a float
// grad of a half softmax (half_to_float) gives half; the meta kernel says input_dtype always.
c10::ScalarType softmax_grad_dtype(const torch::jit::Stack& stack, size_t first) {
  c10::ScalarType grad = stack[first].toTensor().scalar_type();
  c10::ScalarType input = static_cast<c10::ScalarType>(stack[first + 3].toInt());
  return grad == c10::kFloat && input == c10::kHalf ? c10::kHalf : grad;
}

// mse_loss_backward(grad, self, target, reduction): the CPU kernel writes into zeros_like(self),
// so the result has self's dtype (the meta kernel promotes grad, self and target).
c10::ScalarType self_dtype(const torch::jit::Stack& stack, size_t first) {
  return stack[first + 1].toTensor().scalar_type();
}

// The FFT out= overloads: PyTorch's meta kernel refuses a real out for a complex result (its
// "safe cast" check) where the CPU kernel copies the real parts into it. The functional meta
// kernel gives the result's shape; the out keeps its dtype (the rule converts).
void fft_out_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  c10::DispatchKeySet meta(c10::DispatchKey::Meta);
  if (op.schema().overload_name() != "out") {
    op.redispatchBoxed(meta, stack);
    return;
  }
  size_t num_args = op.schema().arguments().size();
  at::Tensor out = stack->back().toTensor();
  auto functional = c10::Dispatcher::singleton().findSchemaOrThrow(op.schema().name().c_str(), "");
  torch::jit::Stack call(stack->end() - num_args, stack->end() - 1);
  functional.redispatchBoxed(meta, &call);
  out.resize_(call.at(0).toTensor().sizes());
  torch::jit::drop(*stack, num_args);
  stack->push_back(out);
}

// The fused optimizers have no meta kernels. Their functional overloads (what functionalization
// makes of _fused_sgd_) return, for each list they update, new tensors shaped like it: return r
// is argument r. The in-place and out= overloads return nothing; the rule checks their lists.
void fused_optimizer_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  size_t num_args = op.schema().arguments().size();
  size_t num_returns = op.schema().returns().size();
  if (op.schema().overload_name().find("out") != std::string::npos) {
    // out= receives the parameters: resized to their shapes, as the CPU's generated kernel does
    // (the caller compares these meta sizes with the real outs).
    std::vector<at::Tensor> params = (*stack)[stack->size() - num_args].toTensorList().vec();
    std::vector<at::Tensor> outs = stack->back().toTensorList().vec();
    TORCH_CHECK(outs.size() == params.size(), op.schema().name(), ": out has ", outs.size(), " tensors for ",
                params.size(), " parameters");
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i].sizes() != params[i].sizes()) outs[i].resize_(params[i].sizes());
    }
  }
  std::vector<c10::IValue> returns;
  for (size_t r = 0; r < num_returns; ++r) {
    std::vector<at::Tensor> list;
    for (const at::Tensor& t : (*stack)[stack->size() - num_args + r].toTensorList().vec()) list.push_back(at::empty_like(t));
    returns.emplace_back(std::move(list));
  }
  torch::jit::drop(*stack, num_args);
  for (auto& v : returns) stack->push_back(std::move(v));
}

}  // namespace

void check_float8_fill_values(const c10::OperatorHandle&, torch::jit::Stack* stack, size_t num_args) {
  size_t first = stack->size() - num_args;
  const c10::IValue& self = (*stack)[first];
  if (!self.isTensor()) return;
  c10::ScalarType t = self.toTensor().scalar_type();
  for (size_t a = 1; a < num_args; ++a) {
    const c10::IValue& value = (*stack)[first + a];
    if (!value.isScalar()) continue;
    if (t == c10::kFloat8_e4m3fn) value.toScalar().to<c10::Float8_e4m3fn>();
    if (t == c10::kFloat8_e5m2) value.toScalar().to<c10::Float8_e5m2>();
  }
}

// arange.start_out: `out` is resized to the result's length (computed as the CPU kernel does,
// same checks and messages) before the call is read. The length depends on the scalar
// arguments, which are runtime values of the executable, so it must be part of the call's
// shapes: a plan found for an empty out= would otherwise serve every later arange (an
// arange(0) made all later int64 aranges empty). This also skips PyTorch's Python meta kernel
// (torch._refs.arange, ~0.1 ms) on every call; generate runs ~7 aranges per token.
void resize_arange_out(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t num_args) {
  if (op.schema().overload_name() != "start_out") return;
  size_t first = stack->size() - num_args;
  const c10::Scalar start = (*stack)[first].toScalar(), end = (*stack)[first + 1].toScalar(),
                    step = (*stack)[first + 2].toScalar();
  at::Tensor out = stack->back().toTensor();
  int64_t size = 0;
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "arange", [&] {
    size = at::native::compute_arange_size<scalar_t>(start, end, step);
  });
  // resize_output: silent for an empty out (what torch.arange passes), PyTorch's warning else.
  at::native::resize_output(out, {size});
}

const OpAdapter* find_adapter(const c10::OperatorName& name) {
  // Each adapter names the fields it sets (OpAdapter's are all optional).
  static const OpAdapter cpu_indices = [] { OpAdapter a; a.prepare = &move_cpu_indices; return a; }();
  static const OpAdapter index = [] {
    OpAdapter a;
    a.prepare = &move_cpu_indices;
    a.over_capacity = &index_over_capacity;
    return a;
  }();
  static const OpAdapter same_dtype_out = [] { OpAdapter a; a.prepare = &check_out_dtype_is_self_dtype; return a; }();
  static const OpAdapter random_bits = [] { OpAdapter a; a.draws_random_bits = true; return a; }();
  static const OpAdapter adam = [] {
    OpAdapter a;
    a.runtime_floats = true;
    a.meta = &fused_optimizer_meta;
    a.before_cpu_fallback = &check_adam_state_shapes;
    return a;
  }();
  static const OpAdapter sgd_adagrad = [] {
    OpAdapter a;
    a.runtime_floats = true;
    a.meta = &fused_optimizer_meta;
    a.before_cpu_fallback = &check_sgd_adagrad_state_shapes;
    return a;
  }();
  static const OpAdapter batch_norm = [] { OpAdapter a; a.unannotated_writes = &batch_norm_running_stats; return a; }();
  static const OpAdapter threshold_grad = [] { OpAdapter a; a.result_dtype = &promoted_grad_and_self; return a; }();
  static const OpAdapter softmax_grad = [] { OpAdapter a; a.result_dtype = &softmax_grad_dtype; return a; }();
  static const OpAdapter self_typed_grad = [] { OpAdapter a; a.result_dtype = &self_dtype; return a; }();
  static const OpAdapter float8_fill = [] { OpAdapter a; a.prepare = &check_float8_fill_values; return a; }();
  static const OpAdapter pad = [] {
    OpAdapter a;
    a.prepare = &check_float8_fill_values;
    a.over_capacity = &pad_over_capacity;
    return a;
  }();
  static const OpAdapter fft = [] {
    OpAdapter a;
    a.meta = &fft_out_meta;
    a.before_cpu_fallback = &check_fft_out_dtype;
    return a;
  }();
  static const OpAdapter weight_norm = [] { OpAdapter a; a.before_cpu_fallback = &check_weight_norm_g; return a; }();
  static const OpAdapter embedding_grad = [] {
    OpAdapter a;
    a.before_cpu_fallback = &check_embedding_backward_indices;
    return a;
  }();
  static const OpAdapter arange = [] {
    OpAdapter a;
    a.prepare = &resize_arange_out;
    a.over_capacity = &arange_over_capacity;
    return a;
  }();
  static const OpAdapter convolution = [] { OpAdapter a; a.over_capacity = &convolution_over_capacity; return a; }();
  static const OpAdapter scaled_mm = [] { OpAdapter a; a.meta = &scaled_mm_meta; return a; }();
  static const OpAdapter scaled_mm_v2 = [] { OpAdapter a; a.meta = &scaled_mm_v2_meta; return a; }();
  static const std::map<std::string, const OpAdapter*> table{
      {"aten::index", &index},
      {"aten::index_put", &cpu_indices},
      {"aten::index_put_", &cpu_indices},
      {"aten::_index_put_impl", &cpu_indices},
      {"aten::_index_put_impl_", &cpu_indices},
      {"aten::native_dropout", &random_bits},
      {"aten::_fused_adam", &adam},
      {"aten::_fused_adam_", &adam},
      {"aten::_fused_adamw", &adam},
      {"aten::_fused_adamw_", &adam},
      {"aten::_fused_sgd", &sgd_adagrad},
      {"aten::_fused_sgd_", &sgd_adagrad},
      {"aten::_fused_adagrad", &sgd_adagrad},
      {"aten::_fused_adagrad_", &sgd_adagrad},
      {"aten::_weight_norm_interface", &weight_norm},
      {"aten::embedding_dense_backward", &embedding_grad},
      {"aten::native_batch_norm", &batch_norm},
      {"aten::_native_batch_norm_legit", &batch_norm},
      {"aten::threshold_backward", &threshold_grad},
      {"aten::mse_loss_backward", &self_typed_grad},
      {"aten::_logcumsumexp", &same_dtype_out},
      {"aten::_softmax_backward_data", &softmax_grad},
      {"aten::_log_softmax_backward_data", &softmax_grad},
      {"aten::arange", &arange},
      {"aten::_fft_r2c", &fft},
      {"aten::_fft_c2r", &fft},
      {"aten::_fft_c2c", &fft},
      {"aten::_scaled_mm", &scaled_mm},
      {"aten::_scaled_mm_v2", &scaled_mm_v2},
      {"aten::fill", &float8_fill},
      {"aten::fill_", &float8_fill},
      {"aten::constant_pad_nd", &pad},
      {"aten::convolution", &convolution},
  };
  auto it = table.find(name.name);
  return it == table.end() ? nullptr : it->second;
}

void check_before_cpu_fallback(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const OpAdapter* adapter = find_adapter(op.operator_name());
  if (adapter != nullptr && adapter->before_cpu_fallback != nullptr) adapter->before_cpu_fallback(op, stack);
}

bool takes_runtime_floats(const c10::OperatorHandle& op) {
  const OpAdapter* adapter = find_adapter(op.operator_name());
  return adapter != nullptr && adapter->runtime_floats;
}

}  // namespace tpu::engine
