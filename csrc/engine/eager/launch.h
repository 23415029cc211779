// launch: runs a Plan's module for an OpCall (call/compiled_module.h binds, executes and routes
// written storages and device assertions), wraps the new tensors, and leaves the op's returns
// on the stack.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "engine/call/op_call.h"
#include "engine/eager/plan.h"

namespace tpu::engine {

// Replaces the op's arguments on the stack by its returns: `produced` holds the new tensor of
// each functional target (written arguments are returned as themselves).
void push_returns(const OpOutputs& outputs, const c10::OperatorHandle& op, torch::jit::Stack* stack,
                  size_t num_args, const OpCall& call, const std::vector<at::Tensor>& produced);

void launch(Plan& plan, const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t num_args,
            const OpCall& call);

}  // namespace tpu::engine
