// Hand-encoded xla.CompileOptionsProto bytes (never empty: XLA aborts on 0 replicas).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpu::pjrt {

struct CompileOptions {
  int num_replicas = 1;
  int num_partitions = 1;
  bool use_spmd_partitioning = false;
  // One PJRT device id per partition (1 replica), or per replica (num_replicas > 1, 1 partition);
  // empty means the plugin's default assignment.
  std::vector<int64_t> device_assignment;
  // Compile without binding to a device (run with an explicit execute_device).
  bool portable = false;

  std::string encode() const;
};

}  // namespace tpu::pjrt
