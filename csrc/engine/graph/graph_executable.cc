#include "engine/graph/graph_executable.h"

#include <ATen/Functions.h>

#include <sstream>

#include "engine/compile/aot_check.h"
#include "engine/compile/executable_cache.h"
#include "engine/compile/metrics.h"
#include "engine/device/allocator.h"
#include "engine/device/dtypes.h"
#include "engine/device/generator.h"
#include "engine/device/guard.h"
#include "engine/device/runtime.h"
#include "engine/device/scalar_buffers.h"
#include "engine/device/storage.h"
#include "engine/device/sync.h"
#include "engine/eager/math_bits.h"
#include "engine/graph/graph_program.h"
#include "lowering/registry.h"

namespace tpu::engine::graph {
namespace {

const char* access_name(program::Access a) {
  switch (a) {
    case program::Access::Empty: return "empty";
    case program::Access::Whole: return "whole";
    case program::Access::Box: return "box";
    case program::Access::Window: return "window";
    case program::Access::PaddedWindow: return "padded window";
    case program::Access::Gather: return "gather";
  }
  return "?";
}

// What part of input i's binding a key covers, in words (for recompile reasons).
std::string describe_input(const OpCall& call, size_t i) {
  const TensorRef& t = call.tensors.at(i);
  std::ostringstream s;
  s << t.tensor.scalar_type() << t.tensor.sizes() << " strides " << t.tensor.strides();
  if (t.storage >= 0) {
    s << ", " << access_name(t.access) << " of storage " << c10::IntArrayRef(call.storages[t.storage].buffer->dims);
  }
  return s.str();
}

}  // namespace

GraphExecutable::GraphExecutable(GraphSpec spec) : spec_(std::move(spec)), random_nodes_(count_random_nodes(spec_)) {}

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

std::shared_ptr<GraphPlan> GraphExecutable::plan_for(const OpCall& call) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find(call.key);
  if (it != plans_.end()) return it->second;

  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(call.device)));
  program::Module module;
  try {
    module = assemble_graph_program(spec_, call);
  } catch (const lowering::NotLowerable& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, spec_.name, ": cannot lower ", e.what());
  } catch (const program::ProgramError& e) {
    TORCH_CHECK(false, spec_.name, ": ", e.what());
  } catch (const lowering::InvalidCall& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(!e.not_implemented, spec_.name, ": ", e.what());
    TORCH_CHECK(false, spec_.name, ": ", e.what());
  }
  auto plan = std::make_shared<GraphPlan>();
  plan->params = std::move(module.params);
  plan->results = std::move(module.results);
  plan->module_text = std::move(module.text);
  pjrt::CompileOptions options;
  options.device_assignment = {runtime().client().devices().at(call.device).id};
  try {
    plan->exe = get_or_compile(plan->module_text, options, spec_.name, &plan->aot);
  } catch (const pjrt::PjrtError& e) {
    TORCH_CHECK(false, spec_.name, ": the PJRT plugin rejected the graph's module: ", e.what());
  }
  if (!plans_.empty()) {  // a new binding of the same graph (layout, view class): say which input
    std::string reason = "inputs changed";
    if (last_plan_ != nullptr) {
      for (size_t i = 0; i < call.tensors.size(); ++i) {
        std::string now = describe_input(call, i);
        if (i < last_inputs_.size() && last_inputs_[i] != now) {
          reason = "input " + std::to_string(i) + ": " + last_inputs_[i] + " -> " + now;
          break;
        }
      }
    }
    count_recompile(spec_.name, reason);
  }
  last_inputs_.clear();
  for (size_t i = 0; i < call.tensors.size(); ++i) last_inputs_.push_back(describe_input(call, i));
  compiles_++;
  plans_.emplace(call.key, plan);
  last_plan_ = plan;
  return plan;
}

void GraphExecutable::prepare(const std::vector<at::Tensor>& inputs) { plan_for(bind(inputs)); }

std::vector<at::Tensor> GraphExecutable::run(const std::vector<at::Tensor>& inputs) {
  OpCall call = bind(inputs);
  std::shared_ptr<GraphPlan> plan = plan_for(call);

  std::vector<std::shared_ptr<pjrt::Buffer>> keep_alive;
  std::vector<pjrt::abi::Buffer*> args;
  keep_alive.reserve(plan->params.size());
  for (const program::Param& p : plan->params) {
    switch (p.kind) {
      case program::Param::Kind::Storage:
        keep_alive.push_back(read_buffer(*call.storages[p.binding].buffer, p.dtype));
        break;
      case program::Param::Kind::Offset:
        keep_alive.push_back(scalar_buffer(call.device, DType::S64, c10::Scalar(call.tensors[p.binding].tensor.storage_offset())));
        break;
      case program::Param::Kind::Scalar:
        keep_alive.push_back(scalar_buffer(call.device, p.dtype, call.scalars[p.binding].value));
        break;
      case program::Param::Kind::RngKey: {
        auto key = default_generator(call.device).get<TpuGenerator>()->next_keys(random_nodes_);
        keep_alive.push_back(key_buffer(call.device, key.first, key.second));
        break;
      }
    }
    args.push_back(keep_alive.back()->raw());
  }
  std::shared_ptr<pjrt::Event> done;
  std::vector<std::unique_ptr<pjrt::Buffer>> outs;
  try {
    outs = plan->exe->execute(args, &done);
  } catch (const pjrt::PjrtError& e) {
    raise_if_out_of_memory(e, call.device, spec_.name);
    throw;
  }
  note_pending(call.device, done);
  if (launch_blocking()) done->await(spec_.name.c_str());
  {
    std::lock_guard<std::mutex> lock(mu_);
    runs_++;
  }
  if (plan->aot) aot_count_run(*plan->aot);

  std::vector<at::Tensor> produced(spec_.outputs.size());
  bool any_check = false;
  for (size_t i = 0; i < plan->results.size(); ++i) {
    const program::Result& r = plan->results[i];
    std::shared_ptr<pjrt::Buffer> buffer(std::move(outs[i]));
    switch (r.kind) {
      case program::Result::Kind::Output: {
        const ValueMeta& m = spec_.values[spec_.outputs[r.binding]];
        std::vector<int64_t> strides = program::memory_order(m.sizes, m.strides).empty()
                                           ? program::row_major_strides(m.sizes) : m.strides;
        produced[r.binding] = wrap_buffer(std::move(buffer), r.dtype, r.layout.dims, m.sizes, strides,
                                          to_torch(m.dtype), call.device);
        break;
      }
      case program::Result::Kind::Storage:
        call.storages[r.binding].buffer->set(std::move(buffer), r.dtype, r.layout.dims);
        break;
      case program::Result::Kind::Assertion:
        note_check(std::move(buffer), r.message, r.check_kind);
        any_check = true;
        break;
    }
  }
  if (launch_blocking() && any_check) raise_failed_checks();
  return produced;
}

std::string GraphExecutable::last_module() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_plan_ ? last_plan_->module_text : "";
}

std::shared_ptr<const AotResult> GraphExecutable::last_aot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_plan_ ? last_plan_->aot : nullptr;
}

}  // namespace tpu::engine::graph
