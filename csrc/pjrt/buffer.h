// RAII owner of a PJRT_Buffer (a device array).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "pjrt/api.h"

namespace tpu::pjrt {

class Device;

class Buffer {
 public:
  Buffer(std::shared_ptr<const Api> api, abi::Buffer* buffer)
      : api_(std::move(api)), buffer_(buffer) {}
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  abi::Buffer* raw() const { return buffer_; }
  abi::BufferType element_type() const;
  std::vector<int64_t> dimensions() const;
  size_t on_device_size_in_bytes() const;
  bool is_deleted() const;

  // Copies the whole buffer into `dst` (row-major, `size` bytes) and waits for it.
  void to_host(void* dst, size_t size) const;
  // Waits until the buffer's contents are computed; throws the producer's error, if any.
  void await_ready() const;
  std::unique_ptr<Buffer> copy_to_device(abi::Device* device) const;

 private:
  std::shared_ptr<const Api> api_;
  abi::Buffer* buffer_;
};

}  // namespace tpu::pjrt
