#include "engine/boxed_kernel.h"

#include <torch/library.h>

#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "engine/aot_check.h"
#include "engine/dtypes.h"
#include "engine/fallback.h"
#include "engine/generator.h"
#include "engine/metrics.h"
#include "engine/plan.h"
#include "engine/scalar_buffers.h"
#include "engine/storage.h"
#include "engine/sync.h"
#include "lowering/registry.h"

// The generic eager kernel: signature -> cached plan -> execute (DESIGN.md section 3).
namespace tpu::engine {
namespace {

std::mutex g_plans_mu;
std::set<std::string> g_rules_used;  // every rule that built a plan in this process
std::unordered_map<std::vector<int64_t>, std::shared_ptr<Plan>, VecHash> g_plans;

void execute_plan(Plan& plan, const c10::OperatorHandle& op, torch::jit::Stack* stack,
                  size_t num_args, const Walk& w) {
  std::vector<std::shared_ptr<pjrt::Buffer>> keep_alive;
  std::vector<pjrt::abi::Buffer*> args;
  args.reserve(plan.params.size());
  for (const Param& p : plan.params) {
    std::shared_ptr<pjrt::Buffer> buf;
    switch (p.kind) {
      case ParamKind::Storage: {
        StorageBuffer& s = *static_cast<StorageBuffer*>(w.storages[p.index]->data_ptr().get_context());
        buf = read_buffer(s, p.dtype);
        break;
      }
      case ParamKind::Offset:
        buf = scalar_buffer(w.device, DType::S64, c10::Scalar(w.tensors[p.index].tensor.storage_offset()));
        break;
      case ParamKind::Scalar:
        buf = scalar_buffer(w.device, p.dtype, w.scalars[p.index].value);
        break;
      case ParamKind::RngKey: {
        at::Generator gen = w.generator.has_value() ? *w.generator : default_generator(w.device);
        auto key = gen.get<TpuGenerator>()->next_key();
        buf = key_buffer(w.device, key.first, key.second);
        break;
      }
    }
    args.push_back(buf->raw());
    keep_alive.push_back(std::move(buf));
  }
  std::shared_ptr<pjrt::Event> done;
  std::vector<std::unique_ptr<pjrt::Buffer>> outs = plan.exe->execute(args, &done);
  note_pending(w.device, done);
  if (launch_blocking()) done->await(plan.op_name.c_str());
  plan.runs++;
  metrics().ops_run++;
  if (plan.aot) aot_count_run(*plan.aot);

  size_t first = stack->size() - num_args;
  std::vector<c10::IValue> inputs(stack->begin() + first, stack->end());
  torch::jit::drop(*stack, num_args);

  std::vector<at::Tensor> produced;
  size_t out_index = 0;
  for (const Target& t : plan.targets) {
    if (!t.functional) continue;
    if (t.undefined) {
      produced.push_back(at::Tensor());
      continue;
    }
    std::shared_ptr<pjrt::Buffer> buffer(std::move(outs[out_index++]));
    produced.push_back(wrap_buffer(std::move(buffer), to_hlo(t.dtype), t.sizes, t.strides, t.dtype, w.device));
  }
  for (size_t k = 0; k < plan.written_storages.size(); ++k) {
    StorageBuffer& s = *static_cast<StorageBuffer*>(w.storages[plan.written_storages[k]]->data_ptr().get_context());
    s.buffer = std::shared_ptr<pjrt::Buffer>(std::move(outs[out_index++]));
    s.dtype = plan.written_dtypes[k];
  }

  for (const std::string& message : plan.check_messages) {
    note_check(std::shared_ptr<pjrt::Buffer>(std::move(outs[out_index++])), message);
  }
  if (launch_blocking() && !plan.check_messages.empty()) raise_failed_checks();

  if (plan.returns_written_args) return;
  const auto& returns = op.schema().returns();
  size_t functional_cursor = 0, target_cursor = 0;
  for (size_t r = 0; r < returns.size(); ++r) {
    int n = plan.return_sizes[r];
    const Target& first_target = plan.targets[target_cursor];
    if (!first_target.functional) {
      stack->push_back(inputs[w.tensors[first_target.tensor].arg]);
    } else if (plan.return_is_list[r]) {
      std::vector<at::Tensor> list(produced.begin() + functional_cursor, produced.begin() + functional_cursor + n);
      stack->push_back(list);
      functional_cursor += n;
    } else {
      stack->push_back(produced[functional_cursor++]);
    }
    target_cursor += n;
  }
}

}  // namespace

// Index tensors (`Tensor?[] indices` of index/index_put) may live on the CPU, as PyTorch
// allows for CUDA: they are copied to the device of the indexed tensor. A CPU boolean mask
// becomes its coordinates first (computed on the host, where the data already is).
void move_cpu_indices(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t num_args) {
  size_t first = stack->size() - num_args;
  const c10::IValue& self = (*stack)[first];
  if (!self.isTensor() || !self.toTensor().is_privateuseone()) return;
  for (size_t a = 0; a < num_args; ++a) {
    c10::IValue& v = (*stack)[first + a];
    if (!v.isOptionalTensorList()) continue;
    c10::List<std::optional<at::Tensor>> moved;
    bool changed = false;
    const c10::Device device = self.toTensor().device();
    for (const std::optional<at::Tensor> t : v.toOptionalTensorList()) {
      bool on_cpu = t.has_value() && t->defined() && t->device().is_cpu() && t->dim() > 0;
      changed |= on_cpu;
      if (!on_cpu) {
        moved.push_back(t);
      } else if (t->scalar_type() == at::kBool || t->scalar_type() == at::kByte) {
        at::Tensor coords = t->nonzero();
        for (int64_t d = 0; d < t->dim(); ++d) moved.push_back(coords.select(1, d).to(device));
      } else {
        moved.push_back(t->to(device));
      }
    }
    if (changed) v = moved;
  }
}

void boxed_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  size_t num_args = op.schema().arguments().size();
  move_cpu_indices(op, stack, num_args);
  Walk w;
  try {
    w = walk_arguments(op, *stack, num_args);
  } catch (const lowering::NotLowerable&) {
    cpu_fallback(op, stack);
    return;
  }
  std::shared_ptr<Plan> plan;
  {
    std::lock_guard<std::mutex> lock(g_plans_mu);
    auto it = g_plans.find(w.key);
    if (it != g_plans.end()) plan = it->second;
  }
  if (!plan) {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(w.device)));
    try {
      plan = build_plan(op, *stack, num_args, w, rule_for(op.schema().operator_name()));
    } catch (const OutputsNeedResize& r) {
      // Empty out= tensors (what factories such as arange pass) resize silently, as in
      // at::native::resize_output; then the op runs again on the tpu. Others take the CPU
      // path, which resizes them with PyTorch's own warning.
      size_t first = stack->size() - num_args;
      bool all_empty = true;
      for (const auto& [arg, sizes] : r.resizes) all_empty &= (*stack)[first + arg].toTensor().numel() == 0;
      if (!all_empty) {
        cpu_fallback(op, stack);
        return;
      }
      for (const auto& [arg, sizes] : r.resizes) (*stack)[first + arg].toTensor().resize_(sizes);
      boxed_kernel(op, ks, stack);
      return;
    } catch (const lowering::NotLowerable&) {
      cpu_fallback(op, stack);
      return;
    } catch (const std::out_of_range& e) {
      TORCH_CHECK_INDEX(false, op.schema().operator_name(), ": ", e.what());
    } catch (const std::invalid_argument& e) {
      TORCH_CHECK_VALUE(false, op.schema().operator_name(), ": ", e.what());
    }
    std::lock_guard<std::mutex> lock(g_plans_mu);
    g_plans.emplace(w.key, plan);
    g_rules_used.insert(rule_for(op.schema().operator_name()));
  }
  execute_plan(*plan, op, stack, num_args, w);
}

void run_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  boxed_kernel(op, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
}

std::string rule_for(const c10::OperatorName& name) {
  std::string base = name.name.substr(name.name.find("::") + 2);
  const std::string& overload = name.overload_name;
  auto full = [](const std::string& b, const std::string& o) { return o.empty() ? b : b + "." + o; };
  std::vector<std::string> candidates{full(base, overload)};
  bool inplace = base.size() > 1 && base.back() == '_' && base[base.size() - 2] != '_';
  std::string functional = inplace ? base.substr(0, base.size() - 1) : base;
  if (inplace) candidates.push_back(full(functional, overload));
  std::string stripped = overload;
  for (const char* token : {"_out", "out_", "out"}) {
    size_t pos = stripped.find(token);
    if (pos != std::string::npos) {
      stripped.erase(pos, std::string(token).size());
      candidates.push_back(full(functional, stripped));
      candidates.push_back(full(functional, stripped.empty() ? "Tensor" : "Tensor_" + stripped));
      break;
    }
  }
  for (const std::string& c : candidates) {
    if (lowering::find_rule(c) != nullptr) return c;
  }
  return "";
}

std::vector<std::string> register_lowered_ops() {
  static std::vector<std::string> registered;
  static std::once_flag once;
  std::call_once(once, [] {
    static auto* lib = new torch::Library(torch::Library::IMPL, "aten",
                                          c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
      if (name.name.rfind("aten::", 0) != 0 || is_explicit_kernel(name)) continue;
      if (rule_for(name).empty()) continue;
      std::string full = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
      lib->impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&boxed_kernel>());
      registered.push_back(full);
    }
    std::sort(registered.begin(), registered.end());
  });
  return registered;
}

std::vector<std::pair<std::string, int64_t>> plan_run_counts() {
  std::lock_guard<std::mutex> lock(g_plans_mu);
  std::map<std::string, int64_t> by_op;
  for (const auto& [_, plan] : g_plans) by_op[plan->op_name] += plan->runs;
  return {by_op.begin(), by_op.end()};
}

std::vector<std::string> rules_used() {
  std::lock_guard<std::mutex> lock(g_plans_mu);
  return {g_rules_used.begin(), g_rules_used.end()};
}

size_t plan_cache_size() {
  std::lock_guard<std::mutex> lock(g_plans_mu);
  return g_plans.size();
}

void clear_plan_cache() {
  std::lock_guard<std::mutex> lock(g_plans_mu);
  g_plans.clear();
}

}  // namespace tpu::engine
