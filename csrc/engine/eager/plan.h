// A Plan is what one compiled call signature needs at run time: the executable, what its
// parameters are bound to and what its results are (program::Module's layout), and where the
// results go (OpOutputs). build_plan composes OpCall -> op_outputs -> Program -> compile.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "engine/compile/aot_check.h"
#include "engine/eager/op_call.h"
#include "engine/eager/op_outputs.h"
#include "pjrt/executable.h"
#include "program/program.h"

namespace tpu::engine {

struct Plan {
  std::string op_name;
  std::shared_ptr<pjrt::Executable> exe;
  std::shared_ptr<const AotResult> aot;  // libtpu's verdict on the module (AOT check only)
  std::vector<program::Param> params;
  std::vector<program::Result> results;
  OpOutputs outputs;
  std::atomic<int64_t> runs{0};
};

// "add.Tensor"
std::string op_label(const c10::OperatorHandle& op);

// Lowers the call into a one-op Program and compiles it. Throws OutputsNeedResize,
// lowering::NotLowerable, or a user error (c10::Error).
std::shared_ptr<Plan> build_plan(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                 size_t num_args, const OpCall& call, const std::string& rule_name);

}  // namespace tpu::engine
