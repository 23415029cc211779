// Hand-written kernels: allocation, metadata-only views, resize/set_, and copies between
// host and device. Everything computational goes through the lowering table instead.
#include <ATen/EmptyTensor.h>
#include <ATen/Functions.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <torch/library.h>

#include <set>

#include "engine/call/math_bits.h"
#include "engine/compile/metrics.h"
#include "engine/device/allocator.h"
#include "engine/device/dtypes.h"
#include "engine/device/host_read_rate.h"
#include "engine/device/runtime.h"
#include "engine/device/pending_ops.h"
#include "engine/device/storage.h"
#include "engine/device/sync.h"
#include "engine/eager/boxed_kernel.h"
#include "engine/eager/fallback.h"
#include "engine/growing/growing_dims.h"

namespace tpu::engine {
namespace {

c10::DispatchKeySet tpu_keys() { return c10::DispatchKeySet(c10::DispatchKey::PrivateUse1); }

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout>, std::optional<c10::Device> device,
                               std::optional<bool>, std::optional<c10::MemoryFormat> memory_format) {
  c10::ScalarType t = dtype.value_or(c10::get_default_dtype_as_scalartype());
  to_hlo(t, "empty");
  c10::OptionalDeviceGuard guard(device);
  return at::detail::empty_generic(size, tpu_allocator(), tpu_keys(), t, memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout>,
                         std::optional<c10::Device> device, std::optional<bool>) {
  c10::ScalarType t = dtype.value_or(c10::get_default_dtype_as_scalartype());
  to_hlo(t, "empty_strided");
  c10::OptionalDeviceGuard guard(device);
  return at::detail::empty_strided_generic(size, stride, tpu_allocator(), tpu_keys(), t);
}

bool covers_storage(const at::Tensor& t) {
  return t.is_contiguous() && t.storage_offset() == 0 &&
         static_cast<size_t>(t.numel()) * t.element_size() == t.storage().nbytes();
}

// Device -> host: the tensor's elements, contiguous, in a new CPU tensor (with src's conj/neg
// bits, so CPU copies and ops read its values).
at::Tensor to_cpu(const at::Tensor& src) {
  if (has_math_bits(src)) {
    at::Tensor out = to_cpu(stored_elements(src));
    out._set_conj(src.is_conj());
    out._set_neg(src.is_neg());
    return out;
  }
  flush_pending_ops("host read");  // fused eager: recorded ops run, and their device assertions count
  raise_failed_checks();
  note_host_read(src.numel());
  StorageBuffer& storage = storage_buffer(src);
  if (storage.growable && storage.state() == StorageState::Ready && src.numel() > 0 && !covers_storage(src)) {
    // A view of a storage with spare capacity (engine/growing: a KV cache, generate()'s
    // input_ids) holds at least half of it: read the whole buffer (in memory order, as every
    // layout is) and take the view on the host, so reading it compiles nothing per length.
    at::Tensor host = at::empty({static_cast<int64_t>(storage.nbytes / src.element_size())},
                                src.options().device(c10::kCPU));
    read_buffer(storage, to_hlo(src.scalar_type()))->to_host(host.data_ptr(), host.nbytes());
    metrics().device_to_host_bytes += static_cast<int64_t>(host.nbytes());
    return host.as_strided(src.sizes(), src.strides(), src.storage_offset()).clone();
  }
  at::Tensor dense = covers_storage(src) ? src : src.contiguous();
  if (!covers_storage(dense)) dense = dense.clone();  // e.g. a contiguous slice of a bigger storage
  at::Tensor out = at::empty(dense.sizes(), dense.options().device(c10::kCPU));
  if (out.numel() == 0) return out;
  StorageBuffer& s = storage_buffer(dense);
  auto buffer = read_buffer(s, to_hlo(dense.scalar_type()));
  buffer->to_host(out.data_ptr(), out.nbytes());
  metrics().device_to_host_bytes += static_cast<int64_t>(out.nbytes());
  return out;
}

// Host bytes of a contiguous tensor into a new device buffer of shape `dims`.
std::shared_ptr<pjrt::Buffer> upload(const at::Tensor& host, hlo::DType dtype, const std::vector<int64_t>& dims, int device) {
  try {
    auto buffer = runtime().client().buffer_from_host(host.data_ptr(), to_pjrt(dtype), dims, device);
    metrics().host_to_device_bytes += static_cast<int64_t>(host.nbytes());
    return buffer;
  } catch (const pjrt::PjrtError& e) {
    raise_if_out_of_memory(e, device, "copy to tpu");
    throw;
  }
}

// Host -> device: `src` (already of dst's dtype and shape, contiguous) into a new tpu tensor.
at::Tensor to_device(const at::Tensor& src, int device) {
  at::Tensor host = src.contiguous();
  hlo::DType dtype = to_hlo(host.scalar_type(), "copy_");
  std::shared_ptr<pjrt::Buffer> buffer;
  std::vector<int64_t> dims = dense_layout(host.sizes());
  if (host.numel() > 0) {
    buffer = upload(host, dtype, dims, device);
  }
  return wrap_buffer(std::move(buffer), dtype, std::move(dims), host.sizes(), host.strides(),
                     host.scalar_type(), device);
}

// Device -> device on one device: the `copy_` lowering writes src into dst's view. Conj/neg
// bits: dst's stored elements become src's values under dst's bits (math_bits.h).
void device_copy(const at::Tensor& dst, const at::Tensor& src) {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::copy_", "");
  bool bits = has_math_bits(dst) || has_math_bits(src);
  torch::jit::Stack stack{bits ? stored_elements(dst) : dst, bits ? elements_for(dst, src) : src, false};
  run_op(op, &stack);
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool) {
  TORCH_CHECK(self.is_privateuseone() || dst.is_privateuseone(), "copy_: expected a tpu tensor");
  if (dst.numel() == 0) return dst;
  if (!self.is_privateuseone()) {  // host -> device
    TORCH_CHECK(self.device().is_cpu(), "copy_: cannot copy from ", self.device(), " to ", dst.device());
    at::Tensor host = self.to(dst.scalar_type()).expand(dst.sizes());
    if (has_math_bits(host) || has_math_bits(dst)) {
      host = elements_for(dst, host.resolve_conj().resolve_neg());  // on the CPU
      device_copy(stored_elements(dst), to_device(host.contiguous(), dst.device().index()));
      return dst;
    }
    host = host.contiguous();
    if (std::optional<int64_t> capacity = upload_bucket(dst)) {
      // A prompt's token ids: uploaded into a bucket, so what is computed from them runs over
      // the bucket with the length a runtime size (engine/growing/bucketed_ops.cc).
      std::vector<int64_t> dims = dense_layout(dst.sizes());
      int64_t length = dims.back();
      dims.back() = *capacity;
      at::Tensor padded = at::zeros(dims, host.options());
      padded.narrow(-1, 0, length).copy_(host);
      hlo::DType dtype = to_hlo(dst.scalar_type(), "copy_");
      at::Tensor whole = wrap_buffer(upload(padded, dtype, dims, dst.device().index()), dtype, dims, padded.sizes(),
                                     padded.strides(), dst.scalar_type(), dst.device().index());
      adopt_padded_storage(dst, whole, whole.dim() - 1);
      note_bucketed_length(dst, length, *capacity);
      return dst;
    }
    if (covers_storage(dst)) {
      StorageBuffer& s = storage_buffer(dst);
      hlo::DType dtype = to_hlo(dst.scalar_type(), "copy_");
      std::vector<int64_t> dims = dense_layout(dst.sizes());
      s.set(upload(host, dtype, dims, s.device), dtype, dims);
      return dst;
    }
    device_copy(dst, to_device(host, dst.device().index()));
    return dst;
  }
  if (!dst.is_privateuseone()) {  // device -> host
    TORCH_CHECK(dst.device().is_cpu(), "copy_: cannot copy from ", self.device(), " to ", dst.device());
    dst.copy_(to_cpu(self));
    return dst;
  }
  if (self.device() != dst.device()) {  // device -> other device
    if (has_math_bits(self)) {  // move the values; the copy on dst's device applies dst's bits
      return copy_from(at::empty_like(stored_elements(self)).copy_(self), dst, false);
    }
    at::Tensor dense = covers_storage(self) ? self : self.contiguous().clone();
    StorageBuffer& s = storage_buffer(dense);
    auto moved = read_buffer(s, to_hlo(dense.scalar_type()))
                     ->copy_to_device(runtime().client().devices().at(dst.device().index()).handle);
    at::Tensor on_dst = wrap_buffer(std::shared_ptr<pjrt::Buffer>(std::move(moved)),
                                    to_hlo(dense.scalar_type()), s.dims, dense.sizes(), dense.strides(),
                                    dense.scalar_type(), dst.device().index());
    device_copy(dst, on_dst);
    return dst;
  }
  device_copy(dst, self);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_output(dst, self.sizes());
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  at::Tensor host = to_cpu(self);
  return host.item();
}

// Grows the storage when needed, keeping its contents (like CPU/CUDA).
const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  size_t needed = at::detail::computeStorageNbytesContiguous(size, self.element_size(), self.storage_offset());
  if (needed > self.storage().nbytes()) resize_storage_bytes(self.storage(), needed);
  impl->set_sizes_contiguous(size);
  if (memory_format.has_value() && *memory_format != c10::MemoryFormat::Preserve) {
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, c10::SymInt offset,
                        c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_sizes_and_strides(c10::asIntArrayRefUnchecked(size), c10::asIntArrayRefUnchecked(stride),
                              offset.expect_int());
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.element_size());
  std::vector<c10::SymInt> size{n}, stride{1};
  return set_storage(self, std::move(source), 0, size, stride);
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return set_storage(self, source.storage(), source.sym_storage_offset(), source.sym_sizes(),
                     source.sym_strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, tpu_allocator()->allocate(0),
                       tpu_allocator(), true);
  std::vector<c10::SymInt> size{0}, stride{1};
  return set_storage(self, std::move(storage), 0, size, stride);
}

// copy_ between two tensors on one tpu device is lowered; anything crossing devices is a transfer.
void copy_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const at::Tensor dst = (*stack)[stack->size() - 3].toTensor();
  const at::Tensor src = (*stack)[stack->size() - 2].toTensor();
  bool same_device = src.device() == dst.device() || (src.device().is_cpu() && src.dim() == 0);
  if (same_device && !has_math_bits(src) && !has_math_bits(dst)) {
    // An empty copy of matching shapes writes nothing: no module (Qwen3.5's rotary writes an
    // empty [1, L, 0] slice once per prompt length).
    if ((dst.numel() == 0 && dst.sizes() == src.sizes()) || copy_over_capacity(dst, src)) {
      torch::jit::drop(*stack, 3);
      stack->push_back(dst);
      return;
    }
    run_op(op, stack);
    return;
  }
  torch::jit::drop(*stack, 3);
  copy_from(src, dst, false);
  stack->push_back(dst);
}

// Module.to("tpu") converts parameters in place (param.data = converted, identity and weight
// ties preserved, as on CUDA) only if PyTorch deems CPU and tpu tensors shallow-copy
// compatible; its built-in list of dense backends leaves PrivateUse1 out and defers to this op.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == c10::kStrided && (t.is_cpu() || t.is_privateuseone());
  };
  return self.key_set() == from.key_set() || (dense(self) && dense(from));
}

// record_stream protects a caching allocator's block from reuse while another stream may read
// it. A tpu device runs everything in one order (every torch.tpu.Stream is that queue) and PJRT
// keeps a buffer alive until the work that reads it is done, so there is nothing to record;
// the op still checks that the stream is a tpu stream, as CUDA's checks for a CUDA one.
void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "record_stream: expected a tpu stream for a tensor on ", self.device(), ", got a stream on ",
              stream.device());
}

const std::set<std::string>& explicit_kernels() {
  static const std::set<std::string> names{
      "empty.memory_format", "empty_strided", "as_strided", "view", "_reshape_alias", "unfold",  // view: growing_view.cc
      "resize_", "set_.source_Storage", "set_.source_Storage_storage_offset",
      "set_.source_Tensor", "set_", "_copy_from", "_copy_from_and_resize",
      "_local_scalar_dense", "copy_", "nonzero", "nonzero.out", "masked_select", "_unique2",
      "_has_compatible_shallow_copy_type", "view_as_real", "view_as_complex", "record_stream",
      // engine/growing/growing_cat.cc (appends along a growing dim; the rest runs the cat rule)
      "cat",
      // host_read_ops.cc
      "equal", "bincount", "tril_indices", "triu_indices", "_efficientzerotensor"};
  return names;
}

}  // namespace

bool is_explicit_kernel(const c10::OperatorName& name) {
  std::string full = name.name.substr(name.name.find("::") + 2) +
                     (name.overload_name.empty() ? "" : "." + name.overload_name);
  return explicit_kernels().count(full) > 0;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
  m.impl("record_stream", record_stream);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  // Complex <-> (real, imag) pairs over one storage; reading it with the other element width
  // re-types the storage buffer (storage.cc, read_buffer).
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("unfold", at::native::unfold);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_", set_empty);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("copy_", torch::CppFunction::makeFromBoxedFunction<&copy_kernel>());
}

}  // namespace tpu::engine
