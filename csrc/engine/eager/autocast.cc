// torch.autocast("tpu", dtype=...): the same cast policies PyTorch uses for CUDA (matmuls and
// convolutions in the autocast dtype, reductions and losses in float32, mixed inputs promoted).
#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include "engine/torch_compat.h"

namespace tpu::engine {
namespace {

using at::Tensor;
using at::Scalar;
using at::ScalarType;
using at::IntArrayRef;
#if !TORCH_TPU_TORCH_AT_LEAST(2, 13)
using at::DimnameList;  // torch < 2.13 lists named-tensor overloads in autocast's signature lists
#endif
using namespace at::autocast;

#define TPU_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define TPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define TPU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define TPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(TPU_LOWER_PRECISION)
  AT_FORALL_FP32(TPU_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(TPU_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(TPU_PROMOTE)
}

}  // namespace
}  // namespace tpu::engine
