// How an OpCall meets a Program: its storages become slots and its tensors views when a driver
// assembles a module, and the call's bindings become the module's arguments when it runs.
#pragma once

#include <memory>
#include <vector>

#include "engine/call/op_call.h"
#include "pjrt/buffer.h"
#include "program/program.h"

namespace tpu::engine {

// The Program slot of a bound storage, and the Program view of a bound tensor (its offset a
// runtime parameter with binding `offset_binding` when it has one).
program::StorageSlot slot_of(const StorageRef& storage, int binding);
program::View view_of(const TensorRef& tensor, int offset_binding);

// The generator a random call draws from: its own, or the device's default one.
at::Generator generator_of(const OpCall& call);

// The buffer each parameter is bound to for this call. An RngKey parameter takes
// `random_draws` consecutive keys of the call's generator (the device's default one if none).
std::vector<std::shared_ptr<pjrt::Buffer>> bind_params(const std::vector<program::Param>& params,
                                                       const OpCall& call, uint64_t random_draws);

}  // namespace tpu::engine
