// One module per compiler where a rule's form depends on it (lowering/target.h): the module is
// lowered for the plugin that runs it and, when the AOT check compiles for a TPU from another
// plugin, once more for libtpu, so the check sees the module a TPU would run rather than the
// exact form the CPU plugin runs.
#pragma once

#include <functional>

#include "lowering/target.h"
#include "program/program.h"

namespace tpu::engine {

// The target of the modules the plugin runs: Tpu on libtpu and Exact on every other plugin, unless
// TORCH_TPU_LOWERING_TARGET (read once) says `exact` or `tpu`, which then holds for the AOT check
// too (unset, the AOT check always sees the Tpu form).
lowering::Target running_target();

// `assemble` lowers the module under the running target; when a rule asked for the target, the
// AOT check is on and its target differs, it lowers again under that one and the result's
// `tpu_text` holds that text. `assemble` must not change state the driver keeps.
program::Module assemble_for_targets(const std::function<program::Module()>& assemble);

}  // namespace tpu::engine
