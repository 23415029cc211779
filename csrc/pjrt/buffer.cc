#include "pjrt/buffer.h"

#include "pjrt/event.h"

namespace tpu::pjrt {

Buffer::~Buffer() {
  if (buffer_ == nullptr) return;
  abi::Buffer_Destroy_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Buffer_Destroy_Args, buffer);
  args.buffer = buffer_;
  try {
    api_->call(abi::kBuffer_Destroy, &args, "PJRT_Buffer_Destroy");
  } catch (...) {
  }
}

abi::BufferType Buffer::element_type() const {
  abi::Buffer_ElementType_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Buffer_ElementType_Args, type);
  args.buffer = buffer_;
  api_->call(abi::kBuffer_ElementType, &args, "PJRT_Buffer_ElementType");
  return args.type;
}

std::vector<int64_t> Buffer::dimensions() const {
  abi::Buffer_Dimensions_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Buffer_Dimensions_Args, num_dims);
  args.buffer = buffer_;
  api_->call(abi::kBuffer_Dimensions, &args, "PJRT_Buffer_Dimensions");
  return std::vector<int64_t>(args.dims, args.dims + args.num_dims);
}

size_t Buffer::on_device_size_in_bytes() const {
  abi::Buffer_OnDeviceSizeInBytes_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Buffer_OnDeviceSizeInBytes_Args, on_device_size_in_bytes);
  args.buffer = buffer_;
  api_->call(abi::kBuffer_OnDeviceSizeInBytes, &args, "PJRT_Buffer_OnDeviceSizeInBytes");
  return args.on_device_size_in_bytes;
}

bool Buffer::is_deleted() const {
  abi::Buffer_IsDeleted_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Buffer_IsDeleted_Args, is_deleted);
  args.buffer = buffer_;
  api_->call(abi::kBuffer_IsDeleted, &args, "PJRT_Buffer_IsDeleted");
  return args.is_deleted;
}

void Buffer::to_host(void* dst, size_t size) const {
  abi::Buffer_ToHostBuffer_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Buffer_ToHostBuffer_Args, event);
  args.src = buffer_;
  args.dst = dst;
  args.dst_size = size;
  api_->call(abi::kBuffer_ToHostBuffer, &args, "PJRT_Buffer_ToHostBuffer");
  Event(api_, args.event).await("device-to-host copy");
}

void Buffer::await_ready() const {
  abi::Buffer_ReadyEvent_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Buffer_ReadyEvent_Args, event);
  args.buffer = buffer_;
  api_->call(abi::kBuffer_ReadyEvent, &args, "PJRT_Buffer_ReadyEvent");
  Event(api_, args.event).await("device computation");
}

std::unique_ptr<Buffer> Buffer::copy_to_device(abi::Device* device) const {
  abi::Buffer_CopyToDevice_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Buffer_CopyToDevice_Args, dst_buffer);
  args.buffer = buffer_;
  args.dst_device = device;
  api_->call(abi::kBuffer_CopyToDevice, &args, "PJRT_Buffer_CopyToDevice");
  return std::make_unique<Buffer>(api_, args.dst_buffer);
}

}  // namespace tpu::pjrt
