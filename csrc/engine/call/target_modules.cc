#include "engine/call/target_modules.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <string>

#include "engine/compile/aot_check.h"
#include "engine/device/runtime.h"

namespace tpu::engine {

namespace {

struct Targets {
  lowering::Target run;  // the module the plugin compiles
  lowering::Target aot;  // the module the AOT check compiles
};

const Targets& targets() {
  static const Targets chosen = [] {
    const char* env = std::getenv("TORCH_TPU_LOWERING_TARGET");
    const std::string name = env ? env : "";
    if (name == "tpu") return Targets{lowering::Target::Tpu, lowering::Target::Tpu};
    if (name == "exact") return Targets{lowering::Target::Exact, lowering::Target::Exact};
    TORCH_CHECK(name.empty(), "TORCH_TPU_LOWERING_TARGET must be `exact` or `tpu`, not `", name, "`");
    const bool on_tpu = runtime().client().platform_name() == "tpu";
    return Targets{on_tpu ? lowering::Target::Tpu : lowering::Target::Exact, lowering::Target::Tpu};
  }();
  return chosen;
}

}  // namespace

lowering::Target running_target() { return targets().run; }

program::Module assemble_for_targets(const std::function<program::Module()>& assemble) {
  const Targets& t = targets();
  bool consulted = false;
  program::Module module;
  {
    lowering::TargetScope scope(t.run);
    module = assemble();
    consulted = scope.consulted();
  }
  if (consulted && t.aot != t.run && aot_check_enabled()) {
    lowering::TargetScope scope(t.aot);
    module.tpu_text = assemble().text;
  }
  return module;
}

}  // namespace tpu::engine
