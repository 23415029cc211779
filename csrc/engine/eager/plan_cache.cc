#include "engine/eager/plan_cache.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace tpu::engine {

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
    while (order_.size() > capacity_) {
      Entry& last = order_.back();
      evicted_runs_[last.second->op_name] += last.second->runs;
      evicted.push_back(std::move(last.second));
      index_.erase(last.first);
      order_.pop_back();
      ++evictions_;
    }
  }
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
  for (const Entry& e : order_) runs[e.second->op_name] += e.second->runs;
  return runs;
}

size_t max_plans_from_env() {
  const char* env = std::getenv("TORCH_TPU_MAX_PLANS");
  if (env == nullptr || *env == '\0') return 4096;
  char* end = nullptr;
  long long v = std::strtoll(env, &end, 10);
  if (*end != '\0' || v <= 0) {
    throw std::invalid_argument(std::string("TORCH_TPU_MAX_PLANS must be a positive integer, got '") + env + "'");
  }
  return static_cast<size_t>(v);
}

}  // namespace tpu::engine
