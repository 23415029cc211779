#include "engine/eager/plan.h"

#include "engine/call/target_modules.h"
#include "engine/eager/eager_program.h"
#include "lowering/registry.h"

namespace tpu::engine {

std::string op_label(const c10::OperatorHandle& op) {
  const auto& schema = op.schema();
  return schema.operator_name().name.substr(6) +
         (schema.overload_name().empty() ? "" : "." + schema.overload_name());
}

namespace {

bool touches_float8(const OpCall& call, const OpOutputs& outputs) {
  auto f8 = [](c10::ScalarType t) { return t == c10::kFloat8_e4m3fn || t == c10::kFloat8_e5m2; };
  for (const TensorRef& t : call.tensors) {
    if (t.tensor.defined() && f8(t.tensor.scalar_type())) return true;
  }
  for (const Target& t : outputs.targets) {
    if (!t.undefined && f8(t.dtype)) return true;
  }
  return false;
}

}  // namespace

OpOutputs plan_outputs(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t num_args,
                       const OpCall& call, const std::string& rule_name) {
  OpOutputs outputs = op_outputs(op, stack, num_args, call);
  // PyTorch's CPU kernels implement few ops for float8 and raise for the rest: only the rules
  // that move, convert or multiply float8 values take them; other calls run there.
  if (!lowering::lowers_float8(rule_name) && touches_float8(call, outputs)) {
    throw lowering::NotLowerable(rule_name + " of float8 values");
  }
  return outputs;
}

std::shared_ptr<Plan> build_plan(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                 size_t num_args, const OpCall& call, const std::string& rule_name) {
  auto plan = std::make_shared<Plan>();
  plan->module.label = op_label(op);
  plan->outputs = plan_outputs(op, stack, num_args, call, rule_name);
  const lowering::Rule* rule = lowering::find_rule(rule_name);
  TORCH_INTERNAL_ASSERT(rule != nullptr, "no lowering rule ", rule_name);
  compile_module(plan->module, assemble_for_targets([&] {
                   return assemble_op_program(op, stack, num_args, call, plan->outputs, *rule, plan->module.label);
                 }),
                 call.device, /*keep_text=*/false);
  return plan;
}

}  // namespace tpu::engine
