// Eager kernels that are not one lowered op: results read on the host (equal returns a
// Python bool), sizes that depend on the data (bincount: one host sync for the range, as
// nonzero in data_dependent.cc), factories whose size comes from their arguments
// (tril_indices / triu_indices allocate, then run their lowered out= rule) and
// _efficientzerotensor (a ZeroTensor: no storage). docs/limits.md lists the host syncs.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/TensorFactories.h>
#include <torch/library.h>

#include <algorithm>

#include "engine/device/allocator.h"

namespace tpu::engine {
namespace {

// torch.equal: same size and all elements equal (after type promotion; NaN != NaN).
bool equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), "Cannot compare two tensors on different devices. Got: ",
              self.device(), " and ", other.device());
  if (!self.is_same_size(other)) return false;
  if (self.numel() == 0) return true;
  return at::eq(self, other).all().item<bool>();  // one host read
}

// bincount: the CPU kernel's checks in its order, then one host read of (min, max) for the
// length, then a lowered index_add of ones (or the weights).
at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights_opt, int64_t minlength) {
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isIntegralType(self.scalar_type(), /*includeBool=*/false),
                              "\"bincount_cpu\" not implemented for '", self.scalar_type(), "'");
  const at::Tensor weights = weights_opt.has_value() ? *weights_opt : at::Tensor();
  if (self.dim() == 1 && self.numel() == 0) return at::zeros({minlength}, self.options().dtype(at::kLong));
  TORCH_CHECK(self.dim() == 1, "bincount only supports 1-d non-negative integral inputs.");
  at::Tensor values = self.to(at::kLong);
  at::Tensor range = at::stack({values.min(), values.max()}).cpu();  // the host sync
  int64_t lo = range[0].item<int64_t>(), hi = range[1].item<int64_t>();
  TORCH_CHECK(lo >= 0, "bincount only supports 1-d non-negative integral inputs.");
  TORCH_CHECK(!weights.defined() || (weights.dim() == 1 && weights.size(0) == self.size(0)),
              "weights should be 1-d and have the same length as input");
  int64_t length = std::max(minlength, hi + 1);
  if (!weights.defined()) {
    return at::zeros({length}, values.options()).index_add_(0, values, at::ones_like(values));
  }
  // float weights count in float; every other weight type in double, as on the CPU.
  at::ScalarType acc = weights.scalar_type() == at::kFloat ? at::kFloat : at::kDouble;
  at::Tensor w = weights.to(acc);
  return at::zeros({length}, w.options()).index_add_(0, values, w);
}

// tril_indices / triu_indices: the size from the meta kernel (which makes PyTorch's argument
// checks), then the lowered out= rule (lowering/tri_indices.cc) fills it.
template <bool lower>
at::Tensor tri_indices(int64_t row, int64_t col, int64_t offset, std::optional<at::ScalarType> dtype,
                       std::optional<at::Layout> layout, std::optional<at::Device> device,
                       std::optional<bool> pin_memory) {
  at::ScalarType t = dtype.value_or(at::kLong);
  const char* name = lower ? "tril_indices" : "triu_indices";
  TORCH_CHECK_NOT_IMPLEMENTED(t == at::kLong || t == at::kInt, "\"", name, "\" not implemented for '", t, "'");
  auto meta = lower ? at::tril_indices(row, col, offset, t, layout, at::kMeta, pin_memory)
                    : at::triu_indices(row, col, offset, t, layout, at::kMeta, pin_memory);
  at::Tensor out = at::empty(meta.sizes(), at::TensorOptions().dtype(t).device(device.value_or(
                                                   at::Device(c10::DeviceType::PrivateUse1, 0))));
  return lower ? at::tril_indices_out(out, row, col, offset) : at::triu_indices_out(out, row, col, offset);
}

// A ZeroTensor on the device: sizes and dtype, no storage (as PyTorch's CPU and CUDA kernels).
at::Tensor efficientzerotensor(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout>, std::optional<at::Device> device, std::optional<bool>) {
  at::Device d = device.value_or(at::Device(c10::DeviceType::PrivateUse1, 0));
  at::native::ZeroTensorAllocator allocator(d);
  auto keys = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1) | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(size, &allocator, keys, dtype.value_or(at::get_default_dtype_as_scalartype()),
                                   std::nullopt);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("equal", equal);
  m.impl("bincount", bincount);
  m.impl("tril_indices", tri_indices<true>);
  m.impl("triu_indices", tri_indices<false>);
  m.impl("_efficientzerotensor", efficientzerotensor);
}

}  // namespace
}  // namespace tpu::engine
