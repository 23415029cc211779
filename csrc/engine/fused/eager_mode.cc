#include "engine/fused/eager_mode.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>

#include "engine/device/pending_ops.h"
#include "engine/device/sync.h"

namespace tpu::engine {
namespace {

std::atomic<EagerMode>& mode() {
  static std::atomic<EagerMode> m{[] {
    const char* env = std::getenv("TORCH_TPU_EAGER_MODE");
    EagerMode start = env == nullptr || *env == '\0' ? EagerMode::Strict : parse_eager_mode(env);
    if (start == EagerMode::Debug) set_launch_blocking(true);
    return start;
  }()};
  return m;
}

}  // namespace

EagerMode eager_mode() { return mode().load(std::memory_order_relaxed); }

void set_eager_mode(EagerMode m) {
  flush_pending_ops("mode change");
  EagerMode old = mode().exchange(m);
  if (m == EagerMode::Debug) set_launch_blocking(true);
  if (old == EagerMode::Debug && m != EagerMode::Debug) set_launch_blocking(false);
}

std::string eager_mode_name(EagerMode m) {
  switch (m) {
    case EagerMode::Strict: return "strict";
    case EagerMode::Fused: return "fused";
    case EagerMode::Debug: return "debug";
  }
  return "strict";
}

EagerMode parse_eager_mode(const std::string& name) {
  if (name == "strict") return EagerMode::Strict;
  if (name == "fused") return EagerMode::Fused;
  if (name == "debug") return EagerMode::Debug;
  TORCH_CHECK_VALUE(false, "eager mode must be 'strict', 'fused' or 'debug' (TORCH_TPU_EAGER_MODE or "
                    "torch.tpu.set_eager_mode), got '", name, "'");
}

}  // namespace tpu::engine
