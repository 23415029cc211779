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

std::atomic<FusedCompile>& compile_when() {
  static std::atomic<FusedCompile> w{[] {
    const char* env = std::getenv("TORCH_TPU_FUSED_COMPILE");
    return env == nullptr || *env == '\0' ? FusedCompile::Inline : parse_fused_compile(env);
  }()};
  return w;
}

}  // namespace

FusedCompile fused_compile() { return compile_when().load(std::memory_order_relaxed); }
void set_fused_compile(FusedCompile when) { compile_when().store(when); }

std::string fused_compile_name(FusedCompile when) {
  return when == FusedCompile::Inline ? "inline" : "background";
}

FusedCompile parse_fused_compile(const std::string& name) {
  if (name == "background") return FusedCompile::Background;
  if (name == "inline") return FusedCompile::Inline;
  TORCH_CHECK_VALUE(false, "TORCH_TPU_FUSED_COMPILE must be 'background' or 'inline', got '", name, "'");
}

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
