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

struct PendingCheck {
  std::shared_ptr<pjrt::Buffer> flag;
  std::string message;
  hlo::CheckKind kind;
};
thread_local std::vector<PendingCheck> t_checks;  // this thread's unread flags
}  // namespace

// A program that never reads back would accumulate flags forever: past this many, read them.
constexpr size_t kMaxPendingChecks = 1024;

void note_check(std::shared_ptr<pjrt::Buffer> failed_flag, std::string message, hlo::CheckKind kind) {
  t_checks.push_back({std::move(failed_flag), std::move(message), kind});
  if (t_checks.size() > kMaxPendingChecks) raise_failed_checks();
}

void raise_failed_checks() {
  std::vector<PendingCheck> checks;
  checks.swap(t_checks);
  for (const PendingCheck& check : checks) {
    uint8_t failed = 0;
    check.flag->to_host(&failed, 1);
    if (!failed) continue;
    const char* where = " (detected on the device; reported at the next host sync - run with "
                        "TPU_LAUNCH_BLOCKING=1 to stop at the op)";
    if (check.kind == hlo::CheckKind::RuntimeError) TORCH_CHECK(false, check.message, where);
    TORCH_CHECK_INDEX(false, check.message, where);
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
