#include "engine/eager/fallback_guards.h"

#include <c10/util/Exception.h>

#include <string>
#include <vector>

namespace tpu::engine {
namespace {

// The argument positions of the lists that hold one tensor per parameter (argument 0); an
// empty optional list (momentum buffers, max_exp_avg_sqs) is allowed.
std::vector<size_t> per_parameter_lists(const std::string& name) {
  if (name.rfind("aten::_fused_adam", 0) == 0) return {1, 2, 3, 4};  // also _fused_adamw
  if (name.rfind("aten::_fused_sgd", 0) == 0) return {1, 2};
  if (name.rfind("aten::_fused_adagrad", 0) == 0) return {1, 2};
  return {};
}

// The FFT kernels write their result type into out= unchecked (a float out of _fft_r2c.out
// crashed the CPU kernel): out must hold the type the op produces.
void check_fft_out_dtype(const std::string& label, const std::string& name, const torch::jit::Stack& stack,
                         size_t first, size_t count) {
  const at::Tensor& self = stack[first].toTensor();
  const at::Tensor& out = stack[first + count - 1].toTensor();
  at::ScalarType want = name == "aten::_fft_r2c"   ? c10::toComplexType(self.scalar_type())
                        : name == "aten::_fft_c2r" ? c10::toRealValueType(self.scalar_type())
                                                   : self.scalar_type();
  TORCH_CHECK(out.scalar_type() == want, label, ": expected out tensor to have dtype ", want, ", but got ",
              out.scalar_type(), " instead");
}

// _weight_norm_interface's CPU kernel reads g with v.size(dim) elements unchecked (heap damage
// with a smaller g); the message is the lowering rule's, which checks the same.
void check_weight_norm_g(const torch::jit::Stack& stack, size_t first) {
  const at::Tensor& v = stack[first].toTensor();
  const at::Tensor& g = stack[first + 1].toTensor();
  int64_t dim = stack[first + 2].toInt();
  if (v.dim() == 0) return;
  int64_t d = dim < 0 ? dim + v.dim() : dim;
  if (d != 0 && d != v.dim() - 1) return;  // the kernel's own dim check raises
  // Its kernels divide by v.size(dim) or by the other dims' product: SIGFPE for an empty v.
  TORCH_CHECK(v.numel() > 0, "weight norm: v of shape ", v.sizes(), " has no elements");
  int64_t expected = v.size(d);
  TORCH_CHECK(g.numel() == expected, "weight norm: g has ", g.numel(), " elements, expected v.size(", d, ") = ",
              expected);
}

// embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq): with
// scale_grad_by_freq the CPU kernel counts indices in a num_weights-long buffer unchecked (heap
// corruption for an index out of range, seen as a later malloc abort).
void check_embedding_backward_indices(const std::string& label, const torch::jit::Stack& stack, size_t first) {
  if (!stack[first + 4].toBool()) return;
  const at::Tensor& indices = stack[first + 1].toTensor();
  if (indices.numel() == 0) return;
  int64_t num_weights = stack[first + 2].toInt();
  at::Tensor host = indices.to(at::kCPU, at::kLong);
  int64_t lo = host.min().item<int64_t>(), hi = host.max().item<int64_t>();
  TORCH_CHECK_INDEX(lo >= 0 && hi < num_weights, label, ": index ", lo < 0 ? lo : hi,
                    " is out of range for num_weights ", num_weights);
}

}  // namespace

void check_before_cpu_fallback(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const c10::OperatorName& name = op.schema().operator_name();
  size_t count = op.schema().arguments().size();
  size_t first = stack.size() - count;
  std::string label = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
  if (name.overload_name == "out" &&
      (name.name == "aten::_fft_r2c" || name.name == "aten::_fft_c2r" || name.name == "aten::_fft_c2c")) {
    check_fft_out_dtype(label, name.name, stack, first, count);
    return;
  }
  if (name.name == "aten::embedding_dense_backward") {
    check_embedding_backward_indices(label, stack, first);
    return;
  }
  if (name.name == "aten::_weight_norm_interface") {
    check_weight_norm_g(stack, first);
    return;
  }
  std::vector<size_t> lists = per_parameter_lists(name.name);
  if (lists.empty()) return;
  std::vector<at::Tensor> params = stack[first].toTensorList().vec();
  for (size_t a : lists) {
    std::vector<at::Tensor> l = stack[first + a].toTensorList().vec();
    if (l.empty() && a != 1) continue;
    TORCH_CHECK_VALUE(l.size() == params.size(), label, ": argument ", a, " has ", l.size(), " tensors for ",
                      params.size(), " parameters");
    for (size_t i = 0; i < l.size(); ++i) {
      TORCH_CHECK_VALUE(l[i].sizes() == params[i].sizes(), label, ": tensor ", i, " of argument ", a,
                        " has shape ", l[i].sizes(), ", its parameter ", params[i].sizes());
    }
  }
}

}  // namespace tpu::engine
