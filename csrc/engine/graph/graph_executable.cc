#include "engine/graph/graph_executable.h"

#include <ATen/Functions.h>

#include "engine/call/math_bits.h"
#include "engine/call/recompile_log.h"
#include "engine/call/target_modules.h"
#include "engine/call/user_errors.h"
#include "engine/device/dtypes.h"
#include "engine/device/guard.h"
#include "engine/device/storage.h"
#include "engine/graph/graph_program.h"

namespace tpu::engine::graph {
namespace {

RecompileLog& recompiles() {
  static RecompileLog log;
  return log;
}

}  // namespace

GraphExecutable::GraphExecutable(GraphSpec spec) : spec_(std::move(spec)), random_nodes_(count_random_nodes(spec_)) {}

GraphExecutable::~GraphExecutable() { recompiles().forget(this); }

bool GraphExecutable::writes_input(size_t i) const {
  for (const Node& n : spec_.nodes) {
    if (n.writes_first_arg && !n.args.empty() && !n.args[0].refs.empty() && n.args[0].refs[0] == spec_.inputs[i]) return true;
  }
  return false;
}

OpCall GraphExecutable::bind(const std::vector<at::Tensor>& inputs) const {
  TORCH_CHECK(inputs.size() == spec_.inputs.size(), spec_.name, ": expected ", spec_.inputs.size(),
              " inputs, got ", inputs.size());
  OpCall call;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(inputs[i].defined(), spec_.name, ": input ", i, " is undefined");
    if (has_math_bits(inputs[i])) {  // a conj/neg view: the graph reads its values
      TORCH_CHECK(!writes_input(i), spec_.name, ": input ", i, " is a conjugate or negative view that the graph "
                  "writes to; call .resolve_conj()/.resolve_neg() on it first");
      at::Tensor values = at::empty_like(stored_elements(inputs[i])).copy_(inputs[i]);
      add_tensor(nullptr, call, values, static_cast<int>(i), -1);
      continue;
    }
    add_tensor(nullptr, call, inputs[i], static_cast<int>(i), -1);
  }
  if (call.device < 0) call.device = current_device();
  return call;
}

std::shared_ptr<CompiledModule> GraphExecutable::plan_for(const OpCall& call) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find(call.key);
  if (it != plans_.end()) return it->second;

  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(call.device)));
  auto plan = std::make_shared<CompiledModule>();
  plan->label = spec_.name;
  try {
    compile_module(*plan, assemble_for_targets([&] { return assemble_graph_program(spec_, call); }), call.device,
                   /*keep_text=*/true);
  } catch (...) {
    rethrow_as_user_error(spec_.name);
  }
  recompiles().note(this, spec_.name, call.key, KeyShape::of_inputs(call.tensors.size()));
  compiles_++;
  plans_.emplace(call.key, plan);
  last_plan_ = plan;
  return plan;
}

void GraphExecutable::prepare(const std::vector<at::Tensor>& inputs) { plan_for(bind(inputs)); }

std::vector<at::Tensor> GraphExecutable::run(const std::vector<at::Tensor>& inputs) {
  OpCall call = bind(inputs);
  std::shared_ptr<CompiledModule> plan = plan_for(call);

  std::vector<OutputBuffer> buffers = run_module(*plan, call, random_nodes_, spec_.outputs.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    runs_++;
  }
  std::vector<at::Tensor> produced(spec_.outputs.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].buffer == nullptr) continue;
    const ValueMeta& m = spec_.values[spec_.outputs[i]];
    std::vector<int64_t> strides = program::memory_order(m.sizes, m.strides).empty()
                                       ? program::row_major_strides(m.sizes) : m.strides;
    produced[i] = wrap_buffer(std::move(buffers[i].buffer), buffers[i].dtype, buffers[i].dims, m.sizes, strides,
                              to_torch(m.dtype), call.device);
  }
  return produced;
}

std::string GraphExecutable::last_module() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_plan_ ? last_plan_->text : "";
}

std::shared_ptr<const AotResult> GraphExecutable::last_aot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_plan_ ? last_plan_->aot : nullptr;
}

}  // namespace tpu::engine::graph
