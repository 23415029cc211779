// Fused eager: in the fused mode (eager_mode.h) lowered ops are recorded instead of launched.
// Their new tensors get Pending storages (device/storage.h), and the storages they write become
// Pending too. The recorded stream runs as one program - assembled from the same rules and
// Program as strict eager, compiled once per stream signature and cached - when something needs
// a value: a host read, a buffer replaced, a strict launch (an op that is not recorded, a
// compiled graph), a sync, a device change, a mode change, a size limit, a recurring step's
// pipelining point (pipelining.h: the device runs those ops while the host records the next
// ones), or the stream reaching a loop boundary (its first op's signature again), so a training
// or decode loop runs a few cached executables per iteration (after the pipelining cut, one per
// layer). Intermediates that died before the run are not written out. A stream whose program is
// not compiled yet runs op by op under the background compile policy (eager_mode.h, op_by_op.h,
// background_compiler.h).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/call/op_call.h"
#include "engine/fused/fused_ops.h"

namespace tpu::engine {

// Records the call and replaces its arguments on the stack by its returns.
void record_op(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t num_args, OpCall call,
               std::shared_ptr<const FusedOp> fused);

// TORCH_TPU_FUSED_TRACE=1: whether each stream run (and each op that runs strict in the fused
// mode, with why) gets a line on stderr.
bool fused_trace();
// A call the fused mode did not record (`label` runs strict because of `why`): counted in the
// stats, and a trace line.
void note_ran_strict(const std::string& label, const char* why);

// Runs the recorded ops now; `reason` is counted.
void flush_fused(const char* reason);

// Ops after which a recurring stream runs (TORCH_TPU_FUSED_PIPELINE_OPS, 0: never); setting it
// runs the stream first.
size_t fused_pipeline_ops();
void set_fused_pipeline_ops(int64_t n);

struct FusedStats {
  int64_t programs_run = 0;      // fused programs launched
  int64_t ops_recorded = 0;      // ops they ran
  int64_t assembled = 0;         // new stream signatures assembled into a module
  int64_t compiles = 0;          // of those, built by the plugin or loaded from disk (not the same
                                 // module already in memory: signatures can differ in fields the
                                 // module does not depend on)
  int64_t compile_time_us = 0;   // assembling and compiling
  int64_t cache_hits = 0;        // flushes that found their program compiled
  int64_t background_compiles = 0;  // programs queued on the compile worker
  int64_t background_failures = 0;  // of those, rejected (their streams keep running op by op)
  int64_t background_compiled = 0;  // executables the worker compiled, and loaded from the disk
  int64_t background_loaded = 0;    // cache (both in `compiles` too; no caller waited for them)
  int64_t op_by_op_runs = 0;     // flushes run op by op (their program not compiled yet)
  int64_t op_by_op_ops = 0;      // the ops they ran
  int64_t op_by_op_compiles = 0;  // strict plans those runs built (what strict eager compiles)
  int64_t dropped_results = 0;   // intermediates not written out (dead before the run)
  std::map<std::string, int64_t> flush_reasons;
  std::map<std::string, int64_t> ran_strict;  // "op: why" -> calls not recorded (they cut the stream)
};
FusedStats fused_stats();
// Recorded ops that ran, by op ("add.Tensor"), since the process started (as strict plans count).
std::map<std::string, int64_t> fused_runs_by_op();
void reset_fused_stats();
// Blocks until the fused programs compiling in the background are ready (tests, benchmarks).
void wait_for_fused_compiles();

}  // namespace tpu::engine
