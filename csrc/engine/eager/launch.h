// launch: binds a Plan's parameters from an OpCall, executes, and routes the results by the
// plan's result layout (new tensors, written storages, device assertions), then leaves the
// op's returns on the stack.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "engine/eager/op_call.h"
#include "engine/eager/plan.h"

namespace tpu::engine {

void launch(Plan& plan, const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t num_args,
            const OpCall& call);

}  // namespace tpu::engine
