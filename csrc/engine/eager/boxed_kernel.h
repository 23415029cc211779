// The generic eager kernel: one boxed function runs every op that has a lowering rule.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>
#include <vector>

namespace tpu::engine {

void boxed_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack);
// Runs `op` through the engine (used by copy_/fill paths that build their own stacks).
void run_op(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// The lowering rule name serving an ATen op ("add_.Tensor" -> "add.Tensor"), or "".
std::string rule_for(const c10::OperatorName& name);
// Registers the boxed kernel for every ATen op that has a rule; returns their names.
std::vector<std::string> register_lowered_ops();

// Per-signature plans that ran, by op: {op name -> runs}.
std::vector<std::pair<std::string, int64_t>> plan_run_counts();
size_t plan_cache_size();
size_t plan_cache_capacity();  // TORCH_TPU_MAX_PLANS (plan_cache.h)
int64_t plan_cache_evictions();
// Lowering rules that have built at least one plan in this process (not reset by metrics).
std::vector<std::string> rules_used();
// Drops every plan (and its run count): the next call of each signature builds its module and
// goes through get_or_compile again (used by torch_tpu.aot to see every module of a workload).
void clear_plan_cache();

}  // namespace tpu::engine
