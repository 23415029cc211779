// The eager plan cache: call key -> Plan, least recently used first out.
//
// Why bounded: every plan keeps a loaded executable, and a loaded executable holds process
// resources beyond its bytes. XLA:CPU maps three JIT regions per compiled kernel (3 for an
// element-wise op, 60+ for a while-loop decomposition) and Linux allows 65,530 mappings per
// process (vm.max_map_count): the full op suite crashed in the plugin when mmap failed. Two
// bounds: the TORCH_TPU_MAX_PLANS most recently used plans (default 4096), and a mapping budget
// (TORCH_TPU_MAX_MAPPINGS, default half of vm.max_map_count) checked every few inserts, over
// which the least recently used quarter of the plans is unloaded until the process is under it.
// An evicted signature is rebuilt on its next call, from the disk cache when that is on.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/call/op_call.h"
#include "engine/eager/plan.h"

namespace tpu::engine {

class PlanCache {
 public:
  // `mapping_budget` <= 0: no mapping budget.
  PlanCache(size_t capacity, int64_t mapping_budget) : capacity_(capacity), mapping_budget_(mapping_budget) {}

  // The plan for `key` (now the most recently used), or nullptr.
  std::shared_ptr<Plan> find(const std::vector<int64_t>& key);
  // Adds `plan` and evicts the least recently used plans beyond the capacity. An evicted plan
  // stays alive while a launch still holds it; its executable is destroyed after the last one.
  void insert(const std::vector<int64_t>& key, std::shared_ptr<Plan> plan);
  // Drops every plan and the run counts.
  void clear();

  size_t size() const;
  size_t capacity() const { return capacity_; }
  int64_t evictions() const;
  // Runs of every plan this cache has held, by op name (evicted plans included).
  std::map<std::string, int64_t> runs_by_op() const;

 private:
  using Entry = std::pair<std::vector<int64_t>, std::shared_ptr<Plan>>;
  // Moves the least recently used `n` plans into `out` (caller holds mu_).
  void evict_oldest(size_t n, std::vector<std::shared_ptr<Plan>>* out);
  // Unloads plans while the process is over the mapping budget (checked every few inserts).
  void trim_for_mappings();

  mutable std::mutex mu_;
  size_t capacity_;
  int64_t mapping_budget_;
  int inserts_since_check_ = 0;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<std::vector<int64_t>, std::list<Entry>::iterator, VecHash> index_;
  std::map<std::string, int64_t> evicted_runs_;
  int64_t evictions_ = 0;
};

// TORCH_TPU_MAX_PLANS (a positive integer), or 4096.
size_t max_plans_from_env();
// TORCH_TPU_MAX_MAPPINGS (a positive integer), or half of vm.max_map_count (-1 if unknown).
int64_t mapping_budget_from_env();

}  // namespace tpu::engine
