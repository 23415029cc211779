// PJRT copies host memory itself, so "pinned" memory is ordinary aligned memory that we track,
// which makes Tensor.pin_memory() / is_pinned() behave as on CUDA.
#include "engine/device/host_allocator.h"

#include <ATen/core/CachingHostAllocator.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace tpu::engine {
namespace {

std::mutex g_mu;
std::map<uintptr_t, size_t> g_blocks;  // start -> size

void free_block(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_blocks.erase(reinterpret_cast<uintptr_t>(ptr));
  }
  std::free(ptr);
}

struct TpuHostAllocator final : public at::HostAllocator {
  at::DataPtr allocate(size_t size) override {
    void* ptr = size == 0 ? nullptr : std::aligned_alloc(64, (size + 63) & ~size_t(63));
    TORCH_CHECK(size == 0 || ptr != nullptr, "tpu: out of host memory allocating ", size, " bytes");
    if (ptr != nullptr) {
      std::lock_guard<std::mutex> lock(g_mu);
      g_blocks[reinterpret_cast<uintptr_t>(ptr)] = size;
    }
    return {ptr, ptr, &free_block, at::DeviceType::CPU};
  }
  at::DeleterFnPtr raw_deleter() const override { return &free_block; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
  bool record_event(void*, void*, c10::Stream) override { return true; }
  void empty_cache() override {}
  at::HostStats get_stats() override { return {}; }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}
};

TpuHostAllocator g_host_allocator;
REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_host_allocator)

}  // namespace

bool is_pinned_host_ptr(const void* ptr) {
  auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_blocks.upper_bound(p);
  if (it == g_blocks.begin()) return false;
  --it;
  return p >= it->first && p < it->first + std::max<size_t>(it->second, 1);
}

}  // namespace tpu::engine
