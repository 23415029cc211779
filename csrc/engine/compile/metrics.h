// Counters behind torch.tpu._get_cache_stats() and torch_tpu.metrics.report().
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace tpu::engine {

struct Metrics {
  std::atomic<int64_t> ops_run{0};
  std::atomic<int64_t> launches{0};  // executables launched (an op in strict eager, a graph, a fused program)
  std::atomic<int64_t> compiles{0};
  std::atomic<int64_t> compile_time_us{0};
  std::atomic<int64_t> memory_cache_hits{0};
  std::atomic<int64_t> disk_cache_hits{0};
  std::atomic<int64_t> disk_cache_writes{0};
  std::atomic<int64_t> disk_cache_corrupt{0};  // entries that failed their checks: recompiled
  std::atomic<int64_t> host_to_device_bytes{0};
  std::atomic<int64_t> device_to_host_bytes{0};
  // AOT check (engine/aot_check.h): executed ops and libtpu's estimates of their modules.
  std::atomic<int64_t> aot_ops_run{0};
  std::atomic<int64_t> aot_ops_estimated{0};  // ops whose module has libtpu's optimal_seconds
  std::atomic<int64_t> aot_estimated_ps{0};    // sum of optimal_seconds, in picoseconds
  std::atomic<int64_t> aot_roofline_ps{0};     // sum of roofline bounds of those ops, picoseconds
  // Ops libtpu accepts but does not model (negative optimal_seconds): their roofline bounds, so a
  // whole step's estimate need not silently leave them out.
  std::atomic<int64_t> aot_ops_roofline_only{0};
  std::atomic<int64_t> aot_roofline_only_ps{0};
  std::atomic<int64_t> aot_flops{0};
  std::atomic<int64_t> aot_bytes{0};
};

Metrics& metrics();
void count_fallback(const std::string& op);
void count_op(const std::string& op);
std::map<std::string, int64_t> fallback_counts();
// The same, counted since the process started: reset_metrics() leaves it alone, so a test that
// resets the metrics cannot hide a fallback from a fixture that compares before and after.
std::map<std::string, int64_t> fallback_counts_since_start();
std::map<std::string, int64_t> op_counts();
// A compile of an op that already had an executable, and which part of the call changed
// ("add.Tensor: argument 1 (other): shape [2, 8] -> [2, 9] (dim 1)").
void count_recompile(const std::string& op, const std::string& reason);
// The AOT check's figure for one launch of `op` (libtpu's estimate, or the roofline bound of a
// module it does not model), summed per op: where a step's estimated TPU time goes.
struct AotOpTime {
  int64_t launches = 0;
  int64_t picoseconds = 0;
};
void count_aot_op_time(const std::string& op, double seconds);
std::map<std::string, AotOpTime> aot_op_times();
std::map<std::string, int64_t> recompile_reasons();
void reset_metrics();

}  // namespace tpu::engine
