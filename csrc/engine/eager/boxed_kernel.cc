#include "engine/eager/boxed_kernel.h"

#include <torch/library.h>

#include <map>
#include <mutex>
#include <set>

#include "engine/call/lowered_kernel.h"
#include "engine/call/math_bits.h"
#include "engine/call/op_call.h"
#include "engine/call/recompile_log.h"
#include "engine/call/user_errors.h"
#include "engine/device/sync.h"
#include "engine/eager/fallback.h"
#include "engine/eager/launch.h"
#include "engine/eager/op_adapters.h"
#include "engine/eager/plan.h"
#include "engine/eager/plan_cache.h"
#include "engine/fused/eager_mode.h"
#include "engine/fused/fused_stream.h"
#include "engine/growing/growing_dims.h"
#include "lowering/registry.h"

// The generic eager kernel: OpCall -> cached Plan (op_outputs -> Program -> compile) -> launch.
namespace tpu::engine {
namespace {

std::mutex g_plans_mu;              // guards the table below (PlanCache locks itself)
std::set<std::string> g_rules_used;  // every rule that built a plan in this process

// Explains why an op compiles again when it already had an executable.
RecompileLog& recompiles() {
  static RecompileLog log;
  return log;
}

PlanCache& plans() {
  static PlanCache cache(max_plans_from_env(), mapping_budget_from_env());
  return cache;
}

// Fused eager: records the call instead of launching it when its signature can be recorded.
// False leaves the call to the strict path (which also resizes out= tensors and falls back).
bool try_record(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t num_args, OpCall& call) {
  std::shared_ptr<const FusedOp> fused = find_fused_op(call.key);
  if (!fused) {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(std::max(call.device, 0))));
    try {
      fused = build_fused_op(op, *stack, num_args, call, rule_for(op.schema().operator_name()));
    } catch (const OutputsNeedResize&) {
      note_ran_strict(op_label(op), "outputs need a resize");
      return false;
    } catch (const lowering::NotLowerable&) {
      fused = std::make_shared<FusedOp>();  // the CPU runs it: not recordable
    } catch (...) {
      rethrow_as_user_error(c10::toString(op.schema().operator_name()));
    }
    insert_fused_op(call.key, fused);
  }
  if (const char* why = why_not_recorded(call, *fused)) {
    note_ran_strict(fused->label.empty() ? op_label(op) : fused->label, why);
    return false;
  }
  record_op(op, stack, num_args, std::move(call), std::move(fused));
  return true;
}

void remember_plan(const c10::OperatorHandle& op, const std::vector<int64_t>& key, const std::shared_ptr<Plan>& plan,
                   const std::string& rule) {
  plans().insert(key, plan);
  recompiles().note(&op.schema(), plan->module.label, key, KeyShape::of(op.schema()));
  std::lock_guard<std::mutex> lock(g_plans_mu);
  g_rules_used.insert(rule);
}

}  // namespace

void boxed_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  size_t num_args = op.schema().arguments().size();
  OpCall call;
  try {
    call = read_op_call(op, *stack, num_args, &takes_runtime_floats);
  } catch (const lowering::NotLowerable&) {
    cpu_fallback(op, stack);
    return;
  } catch (const MathBitsSet&) {
    // mm/dot/... (PyTorch lets conj views through to backends) or a conj/neg CPU scalar.
    if (resolve_math_bit_arguments(op, stack, num_args)) {
      boxed_kernel(op, ks, stack);
    } else {
      cpu_fallback(op, stack);  // an in-place op through a conj/neg view: rare; the CPU applies the bits
    }
    return;
  }
  // TPU_LAUNCH_BLOCKING=1 stops at the op that fails: nothing is recorded.
  if (eager_mode() == EagerMode::Fused && !launch_blocking() && try_record(op, stack, num_args, call)) return;
  std::shared_ptr<Plan> plan = plans().find(call.key);
  if (!plan) {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(call.device)));
    std::string rule = rule_for(op.schema().operator_name());
    try {
      plan = build_plan(op, *stack, num_args, call, rule);
    } catch (const OutputsNeedResize& r) {
      // Empty out= tensors (what factories such as arange pass) resize silently, as in
      // at::native::resize_output; then the op runs again on the tpu. Others take the CPU
      // path, which resizes them with PyTorch's own warning.
      size_t first = stack->size() - num_args;
      auto target = [&](const OutputsNeedResize::Resize& rs) {
        const c10::IValue& v = (*stack)[first + rs.arg];
        return rs.elem < 0 ? v.toTensor() : v.toTensorList().get(rs.elem);
      };
      bool all_empty = true;
      for (const auto& rs : r.resizes) all_empty &= target(rs).numel() == 0;
      if (!all_empty) {
        cpu_fallback(op, stack);
        return;
      }
      for (const auto& rs : r.resizes) target(rs).resize_(rs.sizes);
      boxed_kernel(op, ks, stack);
      return;
    } catch (const lowering::NotLowerable&) {
      cpu_fallback(op, stack);
      return;
    } catch (...) {
      rethrow_as_user_error(c10::toString(op.schema().operator_name()));
    }
    remember_plan(op, call.key, plan, rule);
  }
  launch(*plan, op, stack, num_args, call);
}

std::shared_ptr<Plan> plan_for_call(const c10::OperatorHandle& op, const std::vector<int64_t>& key,
                                    const std::function<std::shared_ptr<Plan>()>& build) {
  std::shared_ptr<Plan> plan = plans().find(key);
  if (plan) return plan;
  plan = build();
  remember_plan(op, key, plan, rule_for(op.schema().operator_name()));
  return plan;
}

namespace {

// The kernel registered for each lowered op: the op's argument adapter (op_adapters.h) and its
// path over a growing dim's capacity (engine/growing), then the generic kernel. Ops with
// neither pay one branch.
class LoweredOpKernel final : public c10::OperatorKernel {
 public:
  LoweredOpKernel(PrepareFn prepare, OverCapacityFn over_capacity) : prepare_(prepare), over_capacity_(over_capacity) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    if (prepare_ != nullptr) prepare_(op, stack, op.schema().arguments().size());
    if (over_capacity_ != nullptr && over_capacity_(op, stack)) return;
    boxed_kernel(op, ks, stack);
  }

 private:
  PrepareFn prepare_;
  OverCapacityFn over_capacity_;
};

// The growing-dim path of an op whose adapter has none: pointwise ops by their tag (only without
// an adapter, whose result dtype or checks the pointwise path would not apply), the others by how
// their rule declares it takes padded operands (lowering::PaddedOperands).
OverCapacityFn growth_path(const c10::OperatorName& name, const std::string& rule, bool has_adapter) {
  auto handle = c10::Dispatcher::singleton().findSchema(name);
  if (!has_adapter && handle && takes_pointwise_growth(handle->schema(), handle->hasTag(at::Tag::pointwise))) {
    return &pointwise_over_capacity;
  }
  if (!has_adapter && handle && takes_inplace_pointwise_growth(handle->schema(), handle->hasTag(at::Tag::pointwise))) {
    return &inplace_pointwise_over_capacity;
  }
  std::optional<lowering::PaddedOperands> how = lowering::padded_operands(rule);
  if (!how) return nullptr;
  if (*how != lowering::PaddedOperands::FullReduction) return &runs_over_capacity;
  return handle && !handle->schema().is_mutable() ? &reduction_over_capacity : nullptr;
}

const bool g_kernel_installed = (install_lowered_kernel(&run_op), true);

}  // namespace

void run_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  boxed_kernel(op, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
}

std::string rule_for(const c10::OperatorName& name) {
  return lowering::rule_for(name.name.substr(name.name.find("::") + 2), name.overload_name);
}

std::vector<std::string> register_lowered_ops() {
  static std::vector<std::string> registered;
  static std::once_flag once;
  std::call_once(once, [] {
    static auto* lib = new torch::Library(torch::Library::IMPL, "aten",
                                          c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
      if (name.name.rfind("aten::", 0) != 0 || is_explicit_kernel(name)) continue;
      std::string rule = rule_for(name);
      if (rule.empty() || lowering::is_graph_only_rule(rule)) continue;
      std::string full = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
      const OpAdapter* adapter = find_adapter(name);
      PrepareFn prepare = adapter != nullptr ? adapter->prepare : nullptr;
      OverCapacityFn over_capacity = adapter != nullptr && adapter->over_capacity != nullptr
                                         ? adapter->over_capacity
                                         : growth_path(name, rule, adapter != nullptr);
      auto kernel = prepare == nullptr && over_capacity == nullptr
                        ? torch::CppFunction::makeFromBoxedFunction<&boxed_kernel>()
                        : torch::CppFunction::makeFromBoxedFunctor(std::make_unique<LoweredOpKernel>(prepare, over_capacity));
      lib->impl(full.c_str(), std::move(kernel));
      registered.push_back(full);
    }
    std::sort(registered.begin(), registered.end());
  });
  return registered;
}

std::vector<std::pair<std::string, int64_t>> plan_run_counts() {
  std::map<std::string, int64_t> by_op = plans().runs_by_op();
  for (const auto& [op, runs] : fused_runs_by_op()) by_op[op] += runs;  // recorded by fused eager
  return {by_op.begin(), by_op.end()};
}

std::vector<std::string> rules_used() {
  std::lock_guard<std::mutex> lock(g_plans_mu);
  return {g_rules_used.begin(), g_rules_used.end()};
}

size_t plan_cache_size() { return plans().size(); }
size_t plan_cache_capacity() { return plans().capacity(); }
int64_t plan_cache_evictions() { return plans().evictions(); }

void clear_plan_cache() {
  plans().clear();
  recompiles().clear();
}

}  // namespace tpu::engine
