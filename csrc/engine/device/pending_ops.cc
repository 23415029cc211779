#include "engine/device/pending_ops.h"

#include <atomic>

namespace tpu::engine {
namespace {
std::atomic<PendingFlusher> g_flusher{nullptr};
std::atomic<bool> g_pending{false};
}  // namespace

void install_pending_flusher(PendingFlusher flusher) { g_flusher.store(flusher); }
void set_ops_pending(bool pending) { g_pending.store(pending, std::memory_order_release); }
bool ops_pending() { return g_pending.load(std::memory_order_acquire); }

void flush_pending_ops(const char* reason) {
  if (!ops_pending()) return;
  PendingFlusher f = g_flusher.load();
  if (f != nullptr) f(reason);
}

}  // namespace tpu::engine
