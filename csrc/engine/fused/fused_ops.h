// The per-signature half of fused eager: what recording a call needs (its outputs and rule),
// prepared once per call signature the way a strict plan is, but without a compile.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/call/op_call.h"
#include "engine/eager/op_outputs.h"
#include "lowering/registry.h"

namespace tpu::engine {

// What recording a call signature needs: its outputs and rule. Built once per signature.
struct FusedOp {
  std::string label;  // "add.Tensor"
  OpOutputs outputs;
  const lowering::Rule* rule = nullptr;
  // Why the signature runs strict (an in-place write to an empty argument; the default: no
  // lowering, the CPU runs it), or nullptr: it is recorded.
  const char* not_recordable_because = "not lowered";
  bool draws_random = false;  // takes a key from its generator (drawn when recorded)
};

// The signature's FusedOp, or null.
std::shared_ptr<const FusedOp> find_fused_op(const std::vector<int64_t>& key);
// Builds it the way a strict plan is built (op_outputs, float8 check) and assembles the op alone
// once, so that a rule's error surfaces at the op's call; throws what build_plan throws.
std::shared_ptr<const FusedOp> build_fused_op(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                              size_t num_args, const OpCall& call, const std::string& rule_name);
void insert_fused_op(const std::vector<int64_t>& key, std::shared_ptr<const FusedOp> op);

// Why this call cannot be recorded (it runs strict), or nullptr when it can. Calls over a
// runtime length (engine/growing) are recorded: their module text depends on the capacity only.
const char* why_not_recorded(const OpCall& call, const FusedOp& op);

}  // namespace tpu::engine
