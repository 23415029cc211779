// One compiled StableHLO module as every driver holds and runs it (an eager op's signature, a
// compiled graph's signature): one compile function and one run function, so launching,
// out-of-memory translation, launch accounting, device assertions and result routing are
// written once.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/call/op_call.h"
#include "engine/compile/aot_result.h"
#include "pjrt/buffer.h"
#include "pjrt/executable.h"
#include "program/program.h"

namespace tpu::engine {

struct CompiledModule {
  std::string label;  // "add.Tensor", a graph's name: named in errors and metrics
  std::shared_ptr<pjrt::Executable> exe;
  std::shared_ptr<const AotResult> aot;  // libtpu's verdict on the module (AOT check only)
  std::vector<program::Param> params;
  std::vector<program::Result> results;
  std::string text;  // the module, when compile_module was asked to keep it (debug dumps)
  std::atomic<int64_t> runs{0};
};

// Compiles `module` for `device` through the executable cache (memory, disk, AOT check). A
// module the plugin rejects raises a RuntimeError naming the label, with the module's text.
void compile_module(CompiledModule& out, program::Module module, int device, bool keep_text);

// A new tensor's buffer from a run: result binding `binding`, in the module's dtype and layout.
struct OutputBuffer {
  std::shared_ptr<pjrt::Buffer> buffer;
  DType dtype = DType::F32;
  std::vector<int64_t> dims;
};

// Binds the call (program_binding.h), launches asynchronously, accounts the run, writes Storage
// results into the call's storages, hands device assertions to the checker (raised at the next
// sync, or now under TPU_LAUNCH_BLOCKING=1) and returns the Output results by binding
// (`num_outputs` entries; unfilled ones have no buffer). Device OOM raises
// torch.OutOfMemoryError naming the label.
// `check_owners`, when given, holds the thread of each assertion owner (Result::owner); a module
// without owners gives its assertions to the first.
std::vector<OutputBuffer> run_module(CompiledModule& module, const OpCall& call, uint64_t random_draws,
                                     size_t num_outputs, const std::vector<std::thread::id>* check_owners = nullptr);

}  // namespace tpu::engine
