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

// Where one op call meets a Program it may share with other calls (fused eager): the program
// slot of each of the call's storages, and the bindings of its first tensor (offsets) and first
// scalar in the driver's call.
struct OpPlacement {
  std::vector<int> slots;
  int tensor_base = 0;
  int scalar_base = 0;
  int rng_binding = 0;  // a random op's key among the driver's drawn keys
};

// Applies the op's rule to `p`: reads the call's views, writes results that go to written
// arguments back, and returns every result (functional ones for the caller to place).
std::vector<program::Value> apply_op(program::Program& p, const c10::OperatorHandle& op,
                                     const torch::jit::Stack& stack, size_t num_args, const OpCall& call,
                                     const OpOutputs& outputs, const lowering::Rule& rule,
                                     const OpPlacement& placement);

program::Module assemble_op_program(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                    size_t num_args, const OpCall& call, const OpOutputs& outputs,
                                    const lowering::Rule& rule, const std::string& label);

}  // namespace tpu::engine
