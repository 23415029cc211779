#include "engine/device/sync.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <vector>
#include <map>
#include <mutex>

namespace tpu::engine {
namespace {
std::mutex g_mu;
std::map<int, std::shared_ptr<pjrt::Event>> g_newest;
std::vector<std::pair<std::shared_ptr<pjrt::Buffer>, std::string>> g_checks;
}  // namespace

// A program that never reads back would accumulate flags forever: past this many, read them.
constexpr size_t kMaxPendingChecks = 1024;

void note_check(std::shared_ptr<pjrt::Buffer> failed_flag, std::string message) {
  size_t pending;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_checks.emplace_back(std::move(failed_flag), std::move(message));
    pending = g_checks.size();
  }
  if (pending > kMaxPendingChecks) raise_failed_checks();
}

void raise_failed_checks() {
  std::vector<std::pair<std::shared_ptr<pjrt::Buffer>, std::string>> checks;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    checks.swap(g_checks);
  }
  for (const auto& [flag, message] : checks) {
    uint8_t failed = 0;
    flag->to_host(&failed, 1);
    // Integer division by zero raises PyTorch's CPU error (a RuntimeError); the rest are indices.
    // So do checks whose message says "RuntimeError:" (binary_cross_entropy's input range).
    TORCH_CHECK(!failed || (message.find("ZeroDivisionError") == std::string::npos &&
                            message.find("RuntimeError:") == std::string::npos), message,
                " (detected on the device; reported at the next host sync)");
    TORCH_CHECK_INDEX(!failed, message, " (detected on the device; reported at the next host "
                      "sync - run with TPU_LAUNCH_BLOCKING=1 to stop at the op)");
  }
}

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
  raise_failed_checks();
}

void synchronize_all() {
  raise_failed_checks();
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
