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

}  // namespace tpu::engine

namespace tpu::engine {
// Allocates storage bytes on an explicit device (the allocator interface uses the current one).
c10::DataPtr allocate_on(int device, size_t nbytes);
}  // namespace tpu::engine
