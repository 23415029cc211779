// Meta kernels for ATen ops that PyTorch ships without one. The engine learns result shapes,
// dtypes and strides from the Meta dispatch key (op_outputs.cc); without a meta kernel an op
// with a lowering rule would still run on the CPU fallback.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace tpu::engine {
namespace {

// geqrf(A) -> (a, tau): a like A in batched column-major layout (as the CPU's LAPACK result),
// tau [..., min(m, n)].
std::tuple<at::Tensor, at::Tensor> geqrf_meta(const at::Tensor& self) {
  TORCH_CHECK(self.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  auto sizes = self.sizes().vec();
  int64_t m = sizes[sizes.size() - 2], n = sizes.back();
  std::vector<int64_t> strides(sizes.size());
  int64_t mat = m * n;
  strides[sizes.size() - 2] = 1;
  strides[sizes.size() - 1] = std::max<int64_t>(m, 1);
  int64_t stride = std::max<int64_t>(mat, 1);
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 3; i >= 0; --i) {
    strides[i] = stride;
    stride *= std::max<int64_t>(sizes[i], 1);
  }
  at::Tensor a = at::empty_strided(sizes, strides, self.options().device(c10::kMeta));
  std::vector<int64_t> tau_sizes(sizes.begin(), sizes.end() - 2);
  tau_sizes.push_back(std::min(m, n));
  return {a, at::empty(tau_sizes, self.options().device(c10::kMeta))};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("geqrf", geqrf_meta);
}

}  // namespace tpu::engine
