#include "engine/device/allocator.h"

#include <c10/core/impl/GPUTrace.h>

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>

#include "engine/device/guard.h"
#include "engine/device/runtime.h"
#include "engine/device/storage.h"

namespace tpu::engine {
namespace {

constexpr int kMaxDevices = 64;
std::mutex g_mu;
std::array<DeviceMemoryCounters, kMaxDevices> g_counters;
std::unordered_map<uintptr_t, StorageBuffer*> g_live;  // data_ptr() -> its storage, under g_mu

// data_ptr() values are addresses in a private range that is never dereferenced: unique and
// non-overlapping across live storages, which safetensors/transformers rely on.
std::atomic<uintptr_t> g_next_address{uintptr_t(1) << 44};

std::string human_bytes(int64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

int64_t host_physical_memory() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : INT64_MAX;
}

[[noreturn]] void out_of_memory(int device, int64_t requested, const std::string& what) {
  int64_t allocated = memory_counters(device).allocated;
  TORCH_CHECK_WITH(OutOfMemoryError, false, what, ": tpu out of memory. Tried to allocate ",
                   human_bytes(requested), " on tpu:", device, ", which has ", human_bytes(allocated),
                   " allocated by live tensors and a limit of ", human_bytes(device_memory_limit(device)),
                   ". Free tensors (del, torch.tpu.empty_cache()) or use smaller shapes; "
                   "TORCH_TPU_DEVICE_MEMORY_LIMIT sets the limit.");
}

void delete_storage(void* ctx) {
  auto* s = static_cast<StorageBuffer*>(ctx);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto& c = g_counters[s->device];
    c.allocated -= static_cast<int64_t>(s->nbytes);
    c.num_frees += 1;
    g_live.erase(s->address);
  }
  delete s;
}

class TpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override { return allocate_on(current_device(), nbytes); }
  c10::DataPtr allocate_on(int device, size_t nbytes) {
    TORCH_CHECK(device >= 0 && device < kMaxDevices, "tpu: invalid device index ", device);
    if (nbytes > 0 && static_cast<int64_t>(nbytes) > device_memory_limit(device) - memory_counters(device).allocated) {
      out_of_memory(device, static_cast<int64_t>(nbytes), "allocation");
    }
    auto* s = new StorageBuffer();
    s->device = device;
    s->nbytes = nbytes;
    uintptr_t address = g_next_address.fetch_add(((nbytes + 255) & ~size_t(255)) + 256);
    s->address = address;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_live[address] = s;
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

int64_t device_memory_limit(int device) {
  static const int64_t from_env = [] {
    const char* env = std::getenv("TORCH_TPU_DEVICE_MEMORY_LIMIT");
    return env != nullptr && *env != '\0' ? std::strtoll(env, nullptr, 10) : int64_t(-1);
  }();
  if (from_env >= 0) return from_env;
  static std::array<std::atomic<int64_t>, kMaxDevices> from_plugin{};  // 0: not asked yet
  if (runtime_initialized() && device < runtime().device_count()) {
    int64_t known = from_plugin[device].load();
    if (known == 0) {
      pjrt::MemoryStats stats = runtime().client().memory_stats(device);
      known = stats.supported && stats.bytes_limit > 0 ? stats.bytes_limit : -1;
      from_plugin[device].store(known);
    }
    if (known > 0) return known;
  }
  static const int64_t physical = host_physical_memory();
  return physical;
}

void raise_if_out_of_memory(const pjrt::PjrtError& error, int device, const std::string& what) {
  if (error.code() != pjrt::abi::kResourceExhausted) return;
  TORCH_CHECK_WITH(OutOfMemoryError, false, what, ": tpu out of memory on tpu:", device, " (",
                   human_bytes(memory_counters(device).allocated), " allocated by live tensors): ",
                   error.what());
}

c10::DeviceAllocator* tpu_allocator() { return &g_allocator; }

StorageBuffer* storage_at_address(const void* address) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_live.find(reinterpret_cast<uintptr_t>(address));
  return it == g_live.end() ? nullptr : it->second;
}
c10::DataPtr allocate_on(int device, size_t nbytes) { return g_allocator.allocate_on(device, nbytes); }

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace tpu::engine
