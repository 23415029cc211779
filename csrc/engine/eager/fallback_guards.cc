#include "engine/eager/fallback_guards.h"

#include <c10/util/Exception.h>

#include <string>
#include <vector>

namespace tpu::engine {
namespace {

struct CallArgs {
  std::string label;  // "add.Tensor"
  size_t first;       // the first argument's stack position
  size_t count;
};

CallArgs call_args(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const c10::OperatorName& name = op.schema().operator_name();
  size_t count = op.schema().arguments().size();
  return {name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name), stack.size() - count,
          count};
}

// The lists at `positions` hold one tensor per parameter (argument 0), shaped like it; an empty
// optional list (momentum buffers, max_exp_avg_sqs) is allowed.
void check_per_parameter_lists(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                               const std::vector<size_t>& positions) {
  CallArgs c = call_args(op, stack);
  std::vector<at::Tensor> params = stack[c.first].toTensorList().vec();
  for (size_t a : positions) {
    std::vector<at::Tensor> l = stack[c.first + a].toTensorList().vec();
    if (l.empty() && a != 1) continue;
    TORCH_CHECK_VALUE(l.size() == params.size(), c.label, ": argument ", a, " has ", l.size(), " tensors for ",
                      params.size(), " parameters");
    for (size_t i = 0; i < l.size(); ++i) {
      TORCH_CHECK_VALUE(l[i].sizes() == params[i].sizes(), c.label, ": tensor ", i, " of argument ", a,
                        " has shape ", l[i].sizes(), ", its parameter ", params[i].sizes());
    }
  }
}

}  // namespace

void check_adam_state_shapes(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  check_per_parameter_lists(op, stack, {1, 2, 3, 4});  // grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs
}

void check_sgd_adagrad_state_shapes(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  check_per_parameter_lists(op, stack, {1, 2});  // grads, momentum buffers / state sums
}

void check_fft_out_dtype(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  if (op.schema().overload_name() != "out") return;
  CallArgs c = call_args(op, stack);
  const std::string& name = op.schema().name();
  const at::Tensor& self = stack[c.first].toTensor();
  const at::Tensor& out = stack[c.first + c.count - 1].toTensor();
  at::ScalarType want = name == "aten::_fft_r2c"   ? c10::toComplexType(self.scalar_type())
                        : name == "aten::_fft_c2r" ? c10::toRealValueType(self.scalar_type())
                                                   : self.scalar_type();
  TORCH_CHECK(out.scalar_type() == want, c.label, ": expected out tensor to have dtype ", want, ", but got ",
              out.scalar_type(), " instead");
}

void check_weight_norm_g(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  CallArgs c = call_args(op, stack);
  const at::Tensor& v = stack[c.first].toTensor();
  const at::Tensor& g = stack[c.first + 1].toTensor();
  int64_t dim = stack[c.first + 2].toInt();
  if (v.dim() == 0) return;
  int64_t d = dim < 0 ? dim + v.dim() : dim;
  if (d != 0 && d != v.dim() - 1) return;  // the kernel's own dim check raises
  // Its kernels divide by v.size(dim) or by the other dims' product: SIGFPE for an empty v.
  TORCH_CHECK(v.numel() > 0, "weight norm: v of shape ", v.sizes(), " has no elements");
  int64_t expected = v.size(d);
  TORCH_CHECK(g.numel() == expected, "weight norm: g has ", g.numel(), " elements, expected v.size(", d, ") = ",
              expected);
}

void check_embedding_backward_indices(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  CallArgs c = call_args(op, stack);
  if (!stack[c.first + 4].toBool()) return;
  const at::Tensor& indices = stack[c.first + 1].toTensor();
  if (indices.numel() == 0) return;
  int64_t num_weights = stack[c.first + 2].toInt();
  at::Tensor host = indices.to(at::kCPU, at::kLong);
  int64_t lo = host.min().item<int64_t>(), hi = host.max().item<int64_t>();
  TORCH_CHECK_INDEX(lo >= 0 && hi < num_weights, c.label, ": index ", lo < 0 ? lo : hi,
                    " is out of range for num_weights ", num_weights);
}

}  // namespace tpu::engine
