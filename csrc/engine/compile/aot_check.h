// AOT check: every module the engine compiles for its plugin is also compiled by libtpu for a
// TPU topology (TORCH_TPU_AOT_CHECK=v6e:1x1), on a host without a TPU. The result is a report,
// never an error for the user's op: which modules libtpu accepts or rejects (and why), its
// compile time, cost analysis and estimated device time. Optionally the accepted executables
// are written to a disk cache under the key a TPU VM running the same libtpu would look up
// (torch_tpu.aot). libtpu is loaded on first use, never when the check is off.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/compile/aot_result.h"
#include "pjrt/compile_options.h"

namespace tpu::engine {

struct AotConfig {
  std::string topology;     // "v6e:1x1"; empty turns the check off
  std::string libtpu_path;  // libtpu.so (the `libtpu` package)
  std::string cache_dir;    // where accepted executables are written; empty: not written
};

// Replaces the configuration; results of earlier modules are dropped (libtpu stays loaded).
// While a topology is set, the check observes every compile of the executable cache.
void aot_configure(const AotConfig& config);
bool aot_check_enabled();
// Compiles the module for the topology once per distinct (options, module); later calls return
// the recorded result. nullptr when the check is off or libtpu could not be set up.
std::shared_ptr<const AotResult> aot_check(const std::string& module_text,
                                           const pjrt::CompileOptions& options,
                                           const std::string& label);
// Adds one execution of a module with this result to the metrics (estimated device time).
void aot_count_run(const AotResult& result);

struct AotChip {
  double peak_flops = -1;           // per second (bf16 matrix unit)
  double peak_bytes_per_second = -1;  // HBM bandwidth
};
// Published peaks for the topology's generation ("v6e:..." -> 918 TFLOP/s, 1638 GB/s).
AotChip aot_chip(const std::string& topology);

struct AotStats {
  std::string topology;
  std::string error;             // why libtpu could not be set up; empty when it was
  std::string fingerprint;       // plugin fingerprint of libtpu (the cache key's first part)
  std::string cache_dir;
  AotChip chip;
  std::vector<std::shared_ptr<const AotResult>> modules;  // in compile order
};
AotStats aot_stats();

}  // namespace tpu::engine
