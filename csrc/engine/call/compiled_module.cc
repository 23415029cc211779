#include "engine/call/compiled_module.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "engine/call/program_binding.h"
#include "engine/compile/aot_check.h"
#include "engine/compile/executable_cache.h"
#include "engine/compile/metrics.h"
#include "engine/device/allocator.h"
#include "engine/device/pending_ops.h"
#include "engine/device/runtime.h"
#include "engine/device/storage.h"
#include "engine/device/sync.h"

namespace tpu::engine {

void compile_module(CompiledModule& out, program::Module module, int device, bool keep_text) {
  out.params = std::move(module.params);
  out.results = std::move(module.results);
  pjrt::CompileOptions options;
  options.device_assignment = {runtime().client().devices().at(device).id};
  try {
    out.exe = get_or_compile(module.text, options, out.label, &out.aot, module.tpu_text);
  } catch (const pjrt::PjrtError& e) {
    TORCH_CHECK(false, out.label, ": the PJRT plugin rejected the lowered module: ", e.what(),
                "\n--- module ---\n", module.text);
  }
  if (keep_text) out.text = std::move(module.text);
}

std::vector<OutputBuffer> run_module(CompiledModule& m, const OpCall& call, uint64_t random_draws,
                                     size_t num_outputs, const std::vector<std::thread::id>* check_owners) {
  // Ops recorded by fused eager run first: this launch may read or donate what they read.
  flush_pending_ops("strict launch");
  std::vector<std::shared_ptr<pjrt::Buffer>> bound = bind_params(m.params, call, random_draws);
  std::vector<pjrt::abi::Buffer*> args;
  args.reserve(bound.size());
  for (const auto& b : bound) args.push_back(b->raw());
  std::shared_ptr<pjrt::Event> done;
  std::vector<std::unique_ptr<pjrt::Buffer>> outs;
  try {
    outs = m.exe->execute(args, &done);
  } catch (const pjrt::PjrtError& e) {
    raise_if_out_of_memory(e, call.device, m.label);
    throw;
  }
  note_pending(call.device, done);
  if (launch_blocking()) done->await(m.label.c_str());
  m.runs++;
  metrics().launches++;
  if (m.aot) aot_count_run(*m.aot);

  std::vector<OutputBuffer> produced(num_outputs);
  bool any_check = false;
  for (size_t i = 0; i < m.results.size(); ++i) {
    const program::Result& r = m.results[i];
    std::shared_ptr<pjrt::Buffer> buffer(std::move(outs[i]));
    switch (r.kind) {
      case program::Result::Kind::Output:
        produced.at(r.binding) = OutputBuffer{std::move(buffer), r.dtype, r.layout.dims};
        break;
      case program::Result::Kind::Storage:
        call.storages[r.binding].buffer->set(std::move(buffer), r.dtype, r.layout.dims);
        break;
      case program::Result::Kind::Assertion:
        if (check_owners != nullptr && !check_owners->empty()) {
          note_check_for(check_owners->at(std::max(r.owner, 0)), std::move(buffer), r.message, r.check_kind);
        } else {
          note_check(std::move(buffer), r.message, r.check_kind);
        }
        any_check = true;
        break;
    }
  }
  if (launch_blocking() && any_check) raise_failed_checks();
  return produced;
}

}  // namespace tpu::engine
