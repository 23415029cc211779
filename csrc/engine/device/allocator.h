// The tpu DeviceAllocator: unique virtual addresses per storage, byte accounting.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

namespace tpu::engine {

struct DeviceMemoryCounters {
  int64_t allocated = 0;
  int64_t peak = 0;
  int64_t num_allocs = 0;
  int64_t num_frees = 0;
};

DeviceMemoryCounters memory_counters(int device);
void reset_peak_memory(int device);
c10::DeviceAllocator* tpu_allocator();

struct StorageBuffer;
// The live storage whose data_ptr() is `address`, or nullptr.
StorageBuffer* storage_at_address(const void* address);

}  // namespace tpu::engine

#include "pjrt/error.h"

namespace tpu::engine {
// Allocates storage bytes on an explicit device (the allocator interface uses the current one).
// Raises torch.OutOfMemoryError when the device's live storages would exceed its memory.
c10::DataPtr allocate_on(int device, size_t nbytes);
// The device's memory limit: TORCH_TPU_DEVICE_MEMORY_LIMIT (bytes) if set, else the plugin's
// bytes_limit when it reports one, else the host's physical memory (the CPU plugin).
int64_t device_memory_limit(int device);
// Turns a PJRT RESOURCE_EXHAUSTED error into torch.OutOfMemoryError naming `what`; returns
// for any other error.
void raise_if_out_of_memory(const pjrt::PjrtError& error, int device, const std::string& what);
}  // namespace tpu::engine
