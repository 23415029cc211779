// libtpu's verdict on one module (engine/compile/aot_check.h), as the executable cache hands
// it to whoever compiled the module.
#pragma once

#include <cstdint>
#include <string>

namespace tpu::engine {

struct AotResult {
  std::string label;  // the op whose module this is
  bool accepted = false;
  std::string message;  // first line of libtpu's error when rejected
  double compile_seconds = 0;
  // libtpu's cost analysis (per device); -1 when absent.
  double flops = -1;
  double bytes_accessed = -1;
  double optimal_seconds = -1;  // with libtpu's -1 per uncosted custom call added back
  int64_t uncosted_custom_calls = 0;  // those calls (counted only where optimal_seconds read negative)
  // max(flops / peak flop rate, bytes / peak bandwidth) of the topology's chip; -1 if unknown.
  double roofline_seconds = -1;
  bool cached = false;  // written to the AOT cache directory
};

}  // namespace tpu::engine
