#include "engine/allocator.h"

#include <c10/core/impl/GPUTrace.h>

#include <array>
#include <atomic>
#include <mutex>

#include "engine/guard.h"
#include "engine/storage.h"

namespace tpu::engine {
namespace {

constexpr int kMaxDevices = 64;
std::mutex g_mu;
std::array<DeviceMemoryCounters, kMaxDevices> g_counters;

// data_ptr() values are addresses in a private range that is never dereferenced: unique and
// non-overlapping across live storages, which safetensors/transformers rely on.
std::atomic<uintptr_t> g_next_address{uintptr_t(1) << 44};

void delete_storage(void* ctx) {
  auto* s = static_cast<StorageBuffer*>(ctx);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto& c = g_counters[s->device];
    c.allocated -= static_cast<int64_t>(s->nbytes);
    c.num_frees += 1;
  }
  delete s;
}

class TpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override { return allocate_on(current_device(), nbytes); }
  c10::DataPtr allocate_on(int device, size_t nbytes) {
    auto* s = new StorageBuffer();
    s->device = device;
    s->nbytes = nbytes;
    uintptr_t address = g_next_address.fetch_add(((nbytes + 255) & ~size_t(255)) + 256);
    {
      std::lock_guard<std::mutex> lock(g_mu);
      auto& c = g_counters[device];
      c.allocated += static_cast<int64_t>(nbytes);
      c.peak = std::max(c.peak, c.allocated);
      c.num_allocs += 1;
    }
    return c10::DataPtr(reinterpret_cast<void*>(address), s, &delete_storage,
                        c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)));
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void*, const void*, std::size_t) const override {
    TORCH_CHECK(false, "tpu: raw copy_data is not supported; use Tensor.copy_");
  }
  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {}
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    c10::CachingDeviceAllocator::DeviceStats stats;
    DeviceMemoryCounters c = memory_counters(device);
    auto& all = stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
    all.current = c.allocated;
    all.peak = c.peak;
    auto& reserved = stats.reserved_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
    reserved.current = c.allocated;
    reserved.peak = c.peak;
    return stats;
  }
  void resetAccumulatedStats(c10::DeviceIndex) override {}
  void resetPeakStats(c10::DeviceIndex device) override { reset_peak_memory(device); }
};

TpuAllocator g_allocator;

}  // namespace

DeviceMemoryCounters memory_counters(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_counters.at(device);
}

void reset_peak_memory(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_counters.at(device).peak = g_counters.at(device).allocated;
}

c10::DeviceAllocator* tpu_allocator() { return &g_allocator; }
c10::DataPtr allocate_on(int device, size_t nbytes) { return g_allocator.allocate_on(device, nbytes); }

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace tpu::engine
