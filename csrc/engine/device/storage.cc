#include "engine/device/storage.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/TensorImpl.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/device/allocator.h"
#include "engine/device/dtypes.h"
#include "engine/device/pending_ops.h"
#include "engine/device/runtime.h"

namespace tpu::engine {

const std::shared_ptr<pjrt::Buffer>& StorageBuffer::buffer() const {
  static const std::shared_ptr<pjrt::Buffer> none;
  return shards.empty() ? none : shards.front();
}

void StorageBuffer::set(std::shared_ptr<pjrt::Buffer> buffer, hlo::DType buffer_dtype,
                        std::vector<int64_t> buffer_dims) {
  // Recorded ops may read the old buffer: they run first (a no-op inside their own flush).
  flush_pending_ops("buffer replaced");
  pending = false;
  shards.clear();
  if (buffer) shards.push_back(std::move(buffer));
  dtype = buffer_dtype;
  dims = std::move(buffer_dims);
  layout_set = true;
}

StorageBuffer& storage_buffer(const c10::Storage& s) {
  auto* ctx = static_cast<StorageBuffer*>(s.data_ptr().get_context());
  if (ctx == nullptr && s.device_type() == c10::DeviceType::PrivateUse1) {
    ctx = storage_at_address(s.data_ptr().get());  // from_blob over a live storage
    if (ctx != nullptr && ctx->nbytes < s.nbytes()) ctx = nullptr;
  }
  TORCH_CHECK(ctx != nullptr, "tpu: tensor storage has no device buffer (was it created by torch-tpu?)");
  return *ctx;
}

StorageBuffer& storage_buffer(const at::Tensor& t) { return storage_buffer(t.storage()); }

program::LayoutPolicy layout_policy() {
  static const program::LayoutPolicy policy = [] {
    const char* env = std::getenv("TORCH_TPU_STORAGE_LAYOUT");
    if (env == nullptr || std::strcmp(env, "") == 0 || std::strcmp(env, "shaped") == 0) {
      return program::LayoutPolicy::Shaped;
    }
    TORCH_CHECK(std::strcmp(env, "flat") == 0, "TORCH_TPU_STORAGE_LAYOUT must be 'shaped' or 'flat', got '", env, "'");
    return program::LayoutPolicy::Flat;
  }();
  return policy;
}

std::vector<int64_t> dense_layout(c10::IntArrayRef sizes) {
  if (layout_policy() == program::LayoutPolicy::Flat) return {c10::multiply_integers(sizes)};
  return sizes.vec();
}

std::shared_ptr<pjrt::Buffer> read_buffer(StorageBuffer& s, hlo::DType dtype) {
  if (s.pending) flush_pending_ops("read");
  const auto& client = runtime().client();
  if (s.shards.empty()) {  // unwritten (a pending one only inside its own flush: its old state)
    std::vector<uint8_t> zeros(s.nbytes, 0);
    std::vector<int64_t> dims = s.layout_set ? s.dims : std::vector<int64_t>{s.numel_of(dtype)};
    if (program::Layout{dims}.numel() != s.numel_of(dtype)) dims = {s.numel_of(dtype)};
    s.set(client.buffer_from_host(zeros.data(), to_pjrt(dtype), dims, s.device), dtype, dims);
    return s.buffer();
  }
  if (s.dtype == dtype || hlo::bit_width(s.dtype) == hlo::bit_width(dtype)) return s.buffer();
  // Re-type through the host: a reinterpretation with another element width (rare).
  std::vector<uint8_t> bytes(s.nbytes);
  s.buffer()->to_host(bytes.data(), bytes.size());
  int64_t n = s.numel_of(dtype);
  s.set(client.buffer_from_host(bytes.data(), to_pjrt(dtype), {n}, s.device), dtype, {n});
  return s.buffer();
}

namespace {
// A new tpu tensor of `sizes`/`strides`/`dtype` over a new, unwritten storage of `nbytes`.
at::Tensor tensor_on_new_storage(size_t nbytes, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                                 c10::ScalarType dtype, int device) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, allocate_on(device, nbytes),
                       tpu_allocator(), /*resizable=*/true);
  auto t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage),
                                                    c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                    c10::scalarTypeToTypeMeta(dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides);
  return t;
}
}  // namespace

at::Tensor wrap_buffer(std::shared_ptr<pjrt::Buffer> buffer, hlo::DType buffer_dtype,
                       std::vector<int64_t> buffer_dims, c10::IntArrayRef sizes,
                       c10::IntArrayRef strides, c10::ScalarType dtype, int device) {
  size_t nbytes = 0;
  if (buffer) nbytes = static_cast<size_t>(program::Layout{buffer_dims}.numel()) * hlo::bit_width(buffer_dtype) / 8;
  at::Tensor t = tensor_on_new_storage(nbytes, sizes, strides, dtype, device);
  storage_buffer(t).set(std::move(buffer), buffer_dtype, std::move(buffer_dims));
  return t;
}

at::Tensor pending_tensor(hlo::DType buffer_dtype, std::vector<int64_t> buffer_dims, c10::IntArrayRef sizes,
                          c10::IntArrayRef strides, c10::ScalarType dtype, int device) {
  size_t nbytes = static_cast<size_t>(program::Layout{buffer_dims}.numel()) * hlo::bit_width(buffer_dtype) / 8;
  at::Tensor t = tensor_on_new_storage(nbytes, sizes, strides, dtype, device);
  StorageBuffer& s = storage_buffer(t);
  s.dtype = buffer_dtype;
  s.dims = std::move(buffer_dims);
  s.layout_set = true;
  s.pending = true;
  return t;
}

void resize_storage_bytes(const c10::Storage& storage, size_t nbytes) {
  StorageBuffer& old = storage_buffer(storage);
  if (nbytes == old.nbytes) return;
  // Recorded ops may read this storage's bytes (fused eager): they run before it is replaced. An
  // empty storage has none (an out= tensor an op is about to fill).
  if (old.nbytes > 0 || old.pending) flush_pending_ops("resize");
  size_t kept = std::min(nbytes, old.nbytes);
  // First the device allocation: past the device's memory it raises torch.OutOfMemoryError.
  c10::DataPtr data = allocate_on(old.device, nbytes);
  StorageBuffer& resized = *static_cast<StorageBuffer*>(data.get_context());
  // The element type survives when the new size holds whole elements of it.
  hlo::DType dtype = nbytes * 8 % hlo::bit_width(old.dtype) == 0 ? old.dtype : hlo::DType::U8;
  if (old.buffer() && kept > 0) {
    std::vector<uint8_t> previous, bytes;  // host staging of the kept bytes
    try {
      previous.resize(old.nbytes);
      bytes.assign(nbytes, 0);
    } catch (const std::bad_alloc&) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, "resize_: tpu out of memory: staging ", old.nbytes + nbytes,
                       " bytes on the host to resize a tpu storage failed");
    }
    old.buffer()->to_host(previous.data(), old.nbytes);
    std::memcpy(bytes.data(), previous.data(), kept);
    int64_t n = static_cast<int64_t>(nbytes * 8 / hlo::bit_width(dtype));
    resized.set(runtime().client().buffer_from_host(bytes.data(), to_pjrt(dtype), {n}, resized.device), dtype, {n});
  }
  c10::Storage target = storage;  // a handle to the same StorageImpl
  target.set_data_ptr_noswap(std::move(data));
  target.set_nbytes(nbytes);
}

}  // namespace tpu::engine
