#include "engine/eager/plan_cache.h"

#include "engine/device/process_mappings.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace tpu::engine {
namespace {
constexpr int kInsertsPerMappingCheck = 16;  // a check reads /proc/self/maps: ~1 ms per 10k lines
constexpr size_t kMinPlansKept = 16;         // mappings held elsewhere must not empty the cache
}  // namespace

void PlanCache::evict_oldest(size_t n, std::vector<std::shared_ptr<Plan>>* out) {
  for (; n > 0 && !order_.empty(); --n) {
    Entry& last = order_.back();
    evicted_runs_[last.second->module.label] += last.second->module.runs;
    out->push_back(std::move(last.second));
    index_.erase(last.first);
    order_.pop_back();
    ++evictions_;
  }
}

void PlanCache::trim_for_mappings() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (mapping_budget_ <= 0 || ++inserts_since_check_ < kInsertsPerMappingCheck) return;
    inserts_since_check_ = 0;
  }
  for (int round = 0; round < 16; ++round) {
    int64_t mappings = process_mapping_count();
    if (mappings < 0 || mappings <= mapping_budget_) return;
    std::vector<std::shared_ptr<Plan>> evicted;  // destroyed after the lock: unloads, frees maps
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (order_.size() <= kMinPlansKept) return;
      evict_oldest(std::max<size_t>(1, (order_.size() - kMinPlansKept + 3) / 4), &evicted);
    }
  }
}

std::shared_ptr<Plan> PlanCache::find(const std::vector<int64_t>& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second);
  return it->second->second;
}

void PlanCache::insert(const std::vector<int64_t>& key, std::shared_ptr<Plan> plan) {
  std::vector<std::shared_ptr<Plan>> evicted;  // released after the lock: destroying waits
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {  // two threads built the same signature: keep the first
      order_.splice(order_.begin(), order_, it->second);
      return;
    }
    order_.emplace_front(key, std::move(plan));
    index_.emplace(key, order_.begin());
    if (order_.size() > capacity_) evict_oldest(order_.size() - capacity_, &evicted);
  }
  evicted.clear();
  trim_for_mappings();
}

void PlanCache::clear() {
  std::list<Entry> dropped;  // destroyed after the lock is released
  std::lock_guard<std::mutex> lock(mu_);
  dropped.swap(order_);
  index_.clear();
  evicted_runs_.clear();
}

size_t PlanCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return order_.size();
}

int64_t PlanCache::evictions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evictions_;
}

std::map<std::string, int64_t> PlanCache::runs_by_op() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, int64_t> runs = evicted_runs_;
  for (const Entry& e : order_) runs[e.second->module.label] += e.second->module.runs;
  return runs;
}

namespace {
// A positive integer from `name`, or `fallback` when unset.
int64_t positive_env(const char* name, int64_t fallback) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return fallback;
  char* end = nullptr;
  long long v = std::strtoll(env, &end, 10);
  if (*end != '\0' || v <= 0) {
    throw std::invalid_argument(std::string(name) + " must be a positive integer, got '" + env + "'");
  }
  return v;
}
}  // namespace

size_t max_plans_from_env() { return static_cast<size_t>(positive_env("TORCH_TPU_MAX_PLANS", 4096)); }

int64_t mapping_budget_from_env() {
  int64_t limit = process_mapping_limit();
  return positive_env("TORCH_TPU_MAX_MAPPINGS", limit > 0 ? limit / 2 : -1);
}

}  // namespace tpu::engine
