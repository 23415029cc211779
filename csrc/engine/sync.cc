#include "engine/sync.h"

#include <cstdlib>
#include <map>
#include <mutex>

namespace tpu::engine {
namespace {
std::mutex g_mu;
std::map<int, std::shared_ptr<pjrt::Event>> g_newest;
}  // namespace

void note_pending(int device, std::shared_ptr<pjrt::Event> done) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_newest[device] = std::move(done);
}

void synchronize_device(int device) {
  std::shared_ptr<pjrt::Event> newest;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_newest.find(device);
    if (it == g_newest.end()) return;
    newest = it->second;
  }
  if (newest) newest->await("synchronize");
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
