#include "engine/storage.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/TensorImpl.h>

#include <vector>

#include "engine/allocator.h"
#include "engine/dtypes.h"
#include "engine/runtime.h"

namespace tpu::engine {

StorageBuffer& storage_buffer(const c10::Storage& s) {
  auto* ctx = static_cast<StorageBuffer*>(s.data_ptr().get_context());
  TORCH_CHECK(ctx != nullptr, "tpu: tensor storage has no device buffer (was it created by torch-tpu?)");
  return *ctx;
}

StorageBuffer& storage_buffer(const at::Tensor& t) { return storage_buffer(t.storage()); }

std::shared_ptr<pjrt::Buffer> read_buffer(StorageBuffer& s, hlo::DType dtype) {
  const auto& client = runtime().client();
  if (!s.buffer) {
    s.dtype = dtype;
    std::vector<uint8_t> zeros(s.nbytes, 0);
    s.buffer = client.buffer_from_host(zeros.data(), to_pjrt(dtype), {s.numel()}, s.device);
    return s.buffer;
  }
  if (s.dtype == dtype || hlo::bit_width(s.dtype) == hlo::bit_width(dtype)) return s.buffer;
  // Re-type through the host: a reinterpretation with another element width (rare).
  std::vector<uint8_t> bytes(s.nbytes);
  s.buffer->to_host(bytes.data(), bytes.size());
  s.dtype = dtype;
  s.buffer = client.buffer_from_host(bytes.data(), to_pjrt(dtype), {s.numel()}, s.device);
  return s.buffer;
}

at::Tensor wrap_buffer(std::shared_ptr<pjrt::Buffer> buffer, hlo::DType buffer_dtype,
                       c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::ScalarType dtype,
                       int device) {
  size_t nbytes = 0;
  if (buffer) {
    int64_t n = 1;
    for (int64_t d : buffer->dimensions()) n *= d;
    nbytes = static_cast<size_t>(n) * hlo::bit_width(buffer_dtype) / 8;
  }
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, allocate_on(device, nbytes),
                       tpu_allocator(), /*resizable=*/true);
  StorageBuffer& s = storage_buffer(storage);
  s.buffer = std::move(buffer);
  s.dtype = buffer_dtype;
  auto t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage),
                                                    c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                    c10::scalarTypeToTypeMeta(dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides);
  return t;
}

}  // namespace tpu::engine
