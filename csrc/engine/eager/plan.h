// A Plan is what one compiled call signature needs at run time: the compiled module
// (engine/call) and where its results go (OpOutputs). build_plan composes
// OpCall -> op_outputs -> Program -> compile_module.
#pragma once

#include <memory>
#include <string>

#include "engine/call/compiled_module.h"
#include "engine/call/op_call.h"
#include "engine/eager/op_outputs.h"

namespace tpu::engine {

struct Plan {
  CompiledModule module;  // module.label: the op's name ("add.Tensor")
  OpOutputs outputs;
};

// "add.Tensor"
std::string op_label(const c10::OperatorHandle& op);

// The call's outputs (op_outputs), refusing float8 operands the rule does not lower (throws
// lowering::NotLowerable: they run on the CPU).
OpOutputs plan_outputs(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t num_args,
                       const OpCall& call, const std::string& rule_name);

// Lowers the call into a one-op Program and compiles it. Throws OutputsNeedResize,
// lowering::NotLowerable, the rule's errors (call/user_errors.h translates them) or a user
// error (c10::Error).
std::shared_ptr<Plan> build_plan(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                 size_t num_args, const OpCall& call, const std::string& rule_name);

}  // namespace tpu::engine
