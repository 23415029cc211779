#include "engine/eager/boxed_kernel.h"

#include <torch/library.h>

#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "engine/compile/metrics.h"
#include "engine/eager/fallback.h"
#include "engine/eager/launch.h"
#include "engine/eager/math_bits.h"
#include "engine/eager/op_adapters.h"
#include "engine/eager/op_call.h"
#include "engine/eager/plan.h"
#include "engine/eager/plan_cache.h"
#include "engine/growing/growing_dims.h"
#include "lowering/registry.h"

// The generic eager kernel: OpCall -> cached Plan (op_outputs -> Program -> compile) -> launch.
namespace tpu::engine {
namespace {

std::mutex g_plans_mu;              // guards the two tables below (PlanCache locks itself)
std::set<std::string> g_rules_used;  // every rule that built a plan in this process
// The key of each op's latest compiled signature, to explain the next recompile.
std::unordered_map<const c10::FunctionSchema*, std::vector<int64_t>> g_last_key;

// Records why this op compiles again when it already had an executable.
void note_compiled_signature(const c10::OperatorHandle& op, const std::vector<int64_t>& key) {
  const c10::FunctionSchema* schema = &op.schema();
  auto it = g_last_key.find(schema);
  if (it != g_last_key.end() && it->second == key) return;  // rebuilt after an eviction
  if (it != g_last_key.end()) {
    count_recompile(op_label(op), describe_key_change(op.schema(), it->second, key));
    it->second = key;
  } else {
    g_last_key.emplace(schema, key);
  }
}

PlanCache& plans() {
  static PlanCache cache(max_plans_from_env(), mapping_budget_from_env());
  return cache;
}

}  // namespace

void boxed_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  size_t num_args = op.schema().arguments().size();
  OpCall call;
  try {
    call = read_op_call(op, *stack, num_args);
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
    } catch (const lowering::InvalidCall& e) {
      TORCH_CHECK_NOT_IMPLEMENTED(!e.not_implemented, e.what());
      TORCH_CHECK(false, op.schema().operator_name(), ": ", e.what());
    } catch (const std::out_of_range& e) {
      TORCH_CHECK_INDEX(false, op.schema().operator_name(), ": ", e.what());
    } catch (const std::invalid_argument& e) {
      TORCH_CHECK_VALUE(false, op.schema().operator_name(), ": ", e.what());
    }
    plans().insert(call.key, plan);
    std::lock_guard<std::mutex> lock(g_plans_mu);
    g_rules_used.insert(rule);
    note_compiled_signature(op, call.key);
  }
  launch(*plan, op, stack, num_args, call);
}

namespace {
// The kernel registered for ops with an argument adapter (op_adapters.h).
template <PrepareFn prepare, OverCapacityFn over_capacity = nullptr>
void prepared_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  prepare(op, stack, op.schema().arguments().size());
  if constexpr (over_capacity != nullptr) {
    if (over_capacity(op, stack)) return;
  }
  boxed_kernel(op, ks, stack);
}

// The kernel of ops without an adapter that can run over a growing dim's capacity (engine/growing).
template <OverCapacityFn over_capacity>
void growing_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  if (over_capacity(op, stack)) return;
  boxed_kernel(op, ks, stack);
}

template <PrepareFn prepare, OverCapacityFn over_capacity = nullptr>
bool is(const OpAdapter* adapter) {
  return adapter != nullptr && adapter->prepare == prepare && adapter->over_capacity == over_capacity;
}
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
      auto kernel = torch::CppFunction::makeFromBoxedFunction<&boxed_kernel>();
      if (is<&move_cpu_indices, &index_over_capacity>(adapter)) {
        kernel = torch::CppFunction::makeFromBoxedFunction<&prepared_kernel<&move_cpu_indices, &index_over_capacity>>();
      } else if (is<&move_cpu_indices>(adapter)) {
        kernel = torch::CppFunction::makeFromBoxedFunction<&prepared_kernel<&move_cpu_indices>>();
      } else if (is<&check_float8_fill_values, &pad_over_capacity>(adapter)) {
        kernel = torch::CppFunction::makeFromBoxedFunction<
            &prepared_kernel<&check_float8_fill_values, &pad_over_capacity>>();
      } else if (is<&check_float8_fill_values>(adapter)) {
        kernel = torch::CppFunction::makeFromBoxedFunction<&prepared_kernel<&check_float8_fill_values>>();
      } else if (is<&resize_arange_out, &arange_over_capacity>(adapter)) {
        kernel = torch::CppFunction::makeFromBoxedFunction<&prepared_kernel<&resize_arange_out, &arange_over_capacity>>();
      } else if (is<&check_out_dtype_is_self_dtype>(adapter)) {
        kernel = torch::CppFunction::makeFromBoxedFunction<&prepared_kernel<&check_out_dtype_is_self_dtype>>();
      } else {
        TORCH_INTERNAL_ASSERT(adapter == nullptr || (adapter->prepare == nullptr && adapter->over_capacity == nullptr),
                              full, ": adapter kernel not registered");
        auto handle = c10::Dispatcher::singleton().findSchema(name);
        if (adapter == nullptr && handle &&
            takes_pointwise_growth(handle->schema(), handle->hasTag(at::Tag::pointwise))) {
          kernel = torch::CppFunction::makeFromBoxedFunction<&growing_kernel<&pointwise_over_capacity>>();
        } else if (adapter == nullptr && (full == "sum" || full == "all" || full == "any")) {
          kernel = torch::CppFunction::makeFromBoxedFunction<&growing_kernel<&reduction_over_capacity>>();
        } else if (adapter == nullptr && takes_bucketed_path(name)) {
          kernel = torch::CppFunction::makeFromBoxedFunction<&growing_kernel<&runs_over_capacity>>();
        }
      }
      lib->impl(full.c_str(), std::move(kernel));
      registered.push_back(full);
    }
    std::sort(registered.begin(), registered.end());
  });
  return registered;
}

std::vector<std::pair<std::string, int64_t>> plan_run_counts() {
  std::map<std::string, int64_t> by_op = plans().runs_by_op();
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
  std::lock_guard<std::mutex> lock(g_plans_mu);
  g_last_key.clear();
}

}  // namespace tpu::engine
