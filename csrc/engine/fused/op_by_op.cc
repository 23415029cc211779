#include "engine/fused/op_by_op.h"

#include "engine/call/target_modules.h"
#include "engine/compile/executable_cache.h"
#include "engine/compile/metrics.h"
#include "engine/eager/boxed_kernel.h"
#include "engine/eager/eager_program.h"
#include "lowering/registry.h"

namespace tpu::engine {
namespace {

// The strict plan of a recorded call, built from what was recorded (the arguments without their
// tensors, the call's metadata) exactly as fused assembly applies the op.
std::shared_ptr<Plan> plan_of(const RecordedOp& r, const OpCall& call) {
  return plan_for_call(*r.op, r.call.key, [&] {
    auto plan = std::make_shared<Plan>();
    plan->module.label = r.fused->label;
    plan->outputs = r.fused->outputs;
    compile_module(plan->module, assemble_for_targets([&] {
                     return assemble_op_program(*r.op, r.args, r.args.size(), call, plan->outputs, *r.fused->rule,
                                                plan->module.label);
                   }),
                   call.device, /*keep_text=*/false);
    return plan;
  });
}

}  // namespace

int64_t run_op_by_op(Stream& st, const std::vector<bool>& dead,
                     std::vector<std::unique_ptr<StorageBuffer>>& stand_ins) {
  // A dead intermediate still carries values between the ops of the stream: a stand-in holds it.
  for (size_t k = 0; k < st.storages.size(); ++k) {
    StreamStorage& s = st.storages[k];
    if (!dead[k] || !s.made_here) continue;
    stand_ins.push_back(stand_in_for(s, st.device));
    s.ref.buffer = stand_ins.back().get();
  }
  int64_t built_before = modules_built_on_this_thread();
  for (const RecordedOp& r : st.ops) {
    // The call as recorded (its keyed state: dtypes, unwritten flags), bound to the storages' holders now.
    OpCall call = r.call;
    if (r.rng_binding >= 0) call.drawn_keys = {st.keys[r.rng_binding]};
    for (size_t j = 0; j < call.storages.size(); ++j) {
      if (r.storage[j] >= 0) call.storages[j].buffer = st.storages[r.storage[j]].ref.buffer;
    }
    std::shared_ptr<Plan> plan = plan_of(r, call);
    const std::vector<std::thread::id> owner{st.threads[r.owner]};
    std::vector<OutputBuffer> made = run_module(plan->module, call, /*random_draws=*/1, r.made.size(), &owner);
    metrics().ops_run++;
    for (size_t t = 0; t < made.size(); ++t) {
      if (made[t].buffer == nullptr || r.made[t] < 0) continue;
      st.storages[r.made[t]].ref.buffer->set(std::move(made[t].buffer), made[t].dtype, std::move(made[t].dims));
    }
  }
  return modules_built_on_this_thread() - built_before;
}

}  // namespace tpu::engine
