#include "engine/sync.h"

#include <cstdlib>
#include <map>
#include <mutex>

namespace tpu::engine {
namespace {
std::mutex g_mu;
std::map<int, std::weak_ptr<pjrt::Buffer>> g_newest;
}  // namespace

void note_pending(int device, const std::shared_ptr<pjrt::Buffer>& newest_output) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_newest[device] = newest_output;
}

void synchronize_device(int device) {
  std::shared_ptr<pjrt::Buffer> newest;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_newest.find(device);
    if (it == g_newest.end()) return;
    newest = it->second.lock();
  }
  if (newest && !newest->is_deleted()) newest->await_ready();
}

void synchronize_all() {
  std::vector<int> devices;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (auto& [d, _] : g_newest) devices.push_back(d);
  }
  for (int d : devices) synchronize_device(d);
}

bool launch_blocking() {
  static const bool enabled = [] {
    const char* v = std::getenv("TPU_LAUNCH_BLOCKING");
    return v != nullptr && std::string(v) == "1";
  }();
  return enabled;
}

}  // namespace tpu::engine
