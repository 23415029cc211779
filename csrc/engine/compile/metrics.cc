#include "engine/compile/metrics.h"

#include <cmath>
#include <mutex>

namespace tpu::engine {
namespace {
std::mutex g_mu;
std::map<std::string, int64_t> g_fallbacks;
std::map<std::string, int64_t> g_fallbacks_since_start;  // never reset (tests compare it)
std::map<std::string, int64_t> g_ops;
std::map<std::string, int64_t> g_recompiles;
std::map<std::string, AotOpTime> g_aot_op_times;
}  // namespace

Metrics& metrics() {
  static Metrics m;
  return m;
}

void count_fallback(const std::string& op) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_fallbacks[op];
  ++g_fallbacks_since_start[op];
}

void count_op(const std::string& op) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_ops[op];
}

void count_recompile(const std::string& op, const std::string& reason) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_recompiles[op + ": " + reason];
}

void count_aot_op_time(const std::string& op, double seconds) {
  std::lock_guard<std::mutex> lock(g_mu);
  AotOpTime& t = g_aot_op_times[op];
  ++t.launches;
  t.picoseconds += std::llround(seconds * 1e12);
}

std::map<std::string, AotOpTime> aot_op_times() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_aot_op_times;
}

std::map<std::string, int64_t> recompile_reasons() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_recompiles;
}

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_fallbacks;
}

std::map<std::string, int64_t> fallback_counts_since_start() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_fallbacks_since_start;
}

std::map<std::string, int64_t> op_counts() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_ops;
}

void reset_metrics() {
  Metrics& m = metrics();
  m.ops_run = 0; m.launches = 0; m.compiles = 0; m.compile_time_us = 0; m.memory_cache_hits = 0;
  m.disk_cache_hits = 0; m.disk_cache_writes = 0; m.disk_cache_corrupt = 0; m.host_to_device_bytes = 0;
  m.device_to_host_bytes = 0;
  m.aot_ops_run = 0; m.aot_ops_estimated = 0; m.aot_estimated_ps = 0; m.aot_roofline_ps = 0;
  m.aot_ops_roofline_only = 0; m.aot_roofline_only_ps = 0;
  m.aot_flops = 0; m.aot_bytes = 0;
  std::lock_guard<std::mutex> lock(g_mu);
  g_fallbacks.clear();
  g_ops.clear();
  g_recompiles.clear();
  g_aot_op_times.clear();
}

}  // namespace tpu::engine
