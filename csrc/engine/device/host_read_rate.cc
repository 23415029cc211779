#include "engine/device/host_read_rate.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>

namespace tpu::engine {
namespace {

// Reads of at most this many elements count: loss.item(), a step counter, a stopping flag.
// Copying a whole result back once is not what the hint is about.
constexpr int64_t kSmallRead = 16;

int64_t reads_per_second_that_warn() {
  static const int64_t limit = [] {
    const char* env = std::getenv("TORCH_TPU_WARN_HOST_READS");
    return env != nullptr && *env != '\0' ? std::strtoll(env, nullptr, 10) : int64_t(100);
  }();
  return limit;
}

std::atomic<bool> g_warned{false};
std::mutex g_mu;
std::chrono::steady_clock::time_point g_window_start;
int64_t g_in_window = 0;

}  // namespace

void note_host_read(int64_t numel) {
  if (numel > kSmallRead || g_warned.load(std::memory_order_relaxed)) return;
  int64_t limit = reads_per_second_that_warn();
  if (limit <= 0) return;
  auto now = std::chrono::steady_clock::now();
  int64_t count = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (now - g_window_start > std::chrono::seconds(1)) {
      g_window_start = now;
      g_in_window = 0;
    }
    count = ++g_in_window;
  }
  if (count <= limit || g_warned.exchange(true)) return;
  TORCH_WARN("torch-tpu: more than ", limit, " small host reads (.item(), .tolist(), printing or .cpu() of a "
             "few values) within one second. Each waits for everything queued on the device and copies "
             "the value back, so a loop that reads every step leaves the device idle. Keep such values "
             "on the device (accumulate into a tensor, compare with torch.where) and read them once, "
             "outside the loop. TORCH_TPU_WARN_HOST_READS sets the rate that warns (0: never).");
}

}  // namespace tpu::engine
