// _ctc_loss.Tensor / _ctc_loss_backward.Tensor: the lengths arrive as tensors. The lowered rules
// take them as compile-time int lists (lowering/ctc_loss.cc), so these kernels read them to the
// host (one sync, as PyTorch's own ctc_loss.Tensor does) and call the int-list overloads.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <vector>

namespace tpu::engine {
namespace {

std::vector<int64_t> host_lengths(const at::Tensor& lengths, const char* name) {
  TORCH_CHECK(at::isIntegralType(lengths.scalar_type(), /*includeBool=*/false), name, " must be integral");
  at::Tensor host = lengths.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(host.const_data_ptr<int64_t>(), host.const_data_ptr<int64_t>() + host.numel());
}

std::tuple<at::Tensor, at::Tensor> ctc_loss_tensor(const at::Tensor& log_probs, const at::Tensor& targets,
                                                   const at::Tensor& input_lengths, const at::Tensor& target_lengths,
                                                   int64_t blank, bool zero_infinity) {
  return at::_ctc_loss(log_probs, targets, host_lengths(input_lengths, "input_lengths"),
                       host_lengths(target_lengths, "target_lengths"), blank, zero_infinity);
}

at::Tensor ctc_loss_backward_tensor(const at::Tensor& grad, const at::Tensor& log_probs, const at::Tensor& targets,
                                    const at::Tensor& input_lengths, const at::Tensor& target_lengths,
                                    const at::Tensor& neg_log_likelihood, const at::Tensor& log_alpha, int64_t blank,
                                    bool zero_infinity) {
  return at::_ctc_loss_backward(grad, log_probs, targets, host_lengths(input_lengths, "input_lengths"),
                                host_lengths(target_lengths, "target_lengths"), neg_log_likelihood, log_alpha, blank,
                                zero_infinity);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_ctc_loss.Tensor", ctc_loss_tensor);
  m.impl("_ctc_loss_backward.Tensor", ctc_loss_backward_tensor);
}

}  // namespace
}  // namespace tpu::engine
