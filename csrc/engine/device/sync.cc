#include "engine/device/sync.h"

#include "engine/device/pending_ops.h"

#include <c10/util/Exception.h>

#include <atomic>
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
// Each thread's unread flags. A table rather than thread_local storage: a fused program run by
// one thread may hold the checks of ops another thread recorded.
std::mutex g_checks_mu;
std::map<std::thread::id, std::vector<PendingCheck>> g_checks;
}  // namespace

// A program that never reads back would accumulate flags forever: past this many, read them.
constexpr size_t kMaxPendingChecks = 1024;

void note_check_for(std::thread::id owner, std::shared_ptr<pjrt::Buffer> failed_flag, std::string message,
                    hlo::CheckKind kind) {
  size_t pending = 0;
  {
    std::lock_guard<std::mutex> lock(g_checks_mu);
    auto& checks = g_checks[owner];
    checks.push_back({std::move(failed_flag), std::move(message), kind});
    pending = checks.size();
  }
  if (pending > kMaxPendingChecks && owner == std::this_thread::get_id()) raise_failed_checks();
}

void note_check(std::shared_ptr<pjrt::Buffer> failed_flag, std::string message, hlo::CheckKind kind) {
  note_check_for(std::this_thread::get_id(), std::move(failed_flag), std::move(message), kind);
}

void raise_failed_checks() {
  std::vector<PendingCheck> checks;
  {
    std::lock_guard<std::mutex> lock(g_checks_mu);
    auto it = g_checks.find(std::this_thread::get_id());
    if (it == g_checks.end()) return;
    checks.swap(it->second);
    g_checks.erase(it);
  }
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
  flush_pending_ops("synchronize");
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
  flush_pending_ops("synchronize");
  raise_failed_checks();
  std::vector<int> devices;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (auto& [d, _] : g_newest) devices.push_back(d);
  }
  for (int d : devices) synchronize_device(d);
}

namespace {
std::atomic<bool>& blocking() {
  static std::atomic<bool> enabled{[] {
    const char* v = std::getenv("TPU_LAUNCH_BLOCKING");
    return v != nullptr && std::string(v) == "1";
  }()};
  return enabled;
}
}  // namespace

bool launch_blocking() { return blocking().load(std::memory_order_relaxed); }

void set_launch_blocking(bool enabled) {
  // Leaving the debug mode keeps TPU_LAUNCH_BLOCKING=1 when the environment asked for it.
  const char* v = std::getenv("TPU_LAUNCH_BLOCKING");
  blocking().store(enabled || (v != nullptr && std::string(v) == "1"));
}

}  // namespace tpu::engine
