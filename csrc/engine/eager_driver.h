// The eager driver's public face (implemented in engine/eager/): registering the generic kernel
// for every ATen op that has a lowering rule, and the per-signature plan statistics the Python
// metrics read. Everything else in engine/eager/ is the driver's own.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tpu::engine {

// Registers the boxed kernel for every ATen op that has a rule; returns their names.
std::vector<std::string> register_lowered_ops();

// Per-signature plans that ran, by op: {op name -> runs}.
std::vector<std::pair<std::string, int64_t>> plan_run_counts();
size_t plan_cache_size();
size_t plan_cache_capacity();  // TORCH_TPU_MAX_PLANS (eager/plan_cache.h)
int64_t plan_cache_evictions();
// Lowering rules that have built at least one plan in this process (not reset by metrics).
std::vector<std::string> rules_used();
// Drops every plan (and its run count): the next call of each signature builds its module and
// goes through get_or_compile again (used by torch_tpu.aot to see every module of a workload).
void clear_plan_cache();

}  // namespace tpu::engine
