// Opens a Program for one eager op call: the call's storages become slots (with their layout),
// its tensors views, its Scalars and storage offsets runtime parameters; the rule is applied
// and its results become new dense outputs or are written back into the written arguments.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "engine/call/op_call.h"
#include "engine/eager/op_outputs.h"
#include "lowering/registry.h"
#include "program/program.h"

namespace tpu::engine {

program::Module assemble_op_program(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                    size_t num_args, const OpCall& call, const OpOutputs& outputs,
                                    const lowering::Rule& rule, const std::string& label);

}  // namespace tpu::engine
