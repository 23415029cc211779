// Compiles fused programs on a worker thread, so that a stream whose program is new runs op by op
// (op_by_op.h) instead of waiting for the compile: fused eager's compiles stay off the critical
// path. One worker: the caller's own work (strict plans, the device) keeps the other cores.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/call/compiled_module.h"
#include "program/program.h"

namespace tpu::engine {

// What one compile_module call cost on its thread: executables compiled, and loaded from the disk
// cache (both 0: found in memory), and the time it took.
struct CompileCost {
  int64_t compiled = 0;
  int64_t loaded = 0;
  int64_t time_us = 0;
};
CompileCost compile_measured(CompiledModule& module, program::Module assembled, int device);

struct BackgroundCompile {
  std::shared_ptr<CompiledModule> module;
  std::atomic<bool> done{false};  // set after the fields below
  std::string error;              // the compile's error ("" if it succeeded)
  CompileCost cost;

  bool ready() const { return done.load(std::memory_order_acquire) && error.empty(); }
  bool failed() const { return done.load(std::memory_order_acquire) && !error.empty(); }
};

// Queues the compile of an assembled module for `device` into `module`.
std::shared_ptr<BackgroundCompile> compile_in_background(std::shared_ptr<CompiledModule> module,
                                                         program::Module assembled, int device);

// Blocks until every queued compile has finished (tests, benchmarks, process exit).
void wait_for_background_compiles();

}  // namespace tpu::engine
