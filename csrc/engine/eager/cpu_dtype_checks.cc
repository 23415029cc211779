#include "engine/eager/cpu_dtype_checks.h"

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/native/TypeProperties.h>
#include <c10/util/Exception.h>

#include <functional>
#include <mutex>
#include <set>
#include <string>

namespace tpu::engine {
namespace {

bool is_out_arg(const c10::Argument& a) {
  return a.kwarg_only() && a.alias_info() != nullptr && a.alias_info()->isWrite();
}

void each_tensor(const c10::IValue& v, const std::function<void(const at::Tensor&)>& f) {
  if (v.isTensor()) {
    if (v.toTensor().defined()) f(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) {
      if (t.defined()) f(t);
    }
  } else if (v.isOptionalTensorList()) {
    for (const std::optional<at::Tensor> t : v.toOptionalTensorList()) {
      if (t.has_value() && t->defined()) f(*t);
    }
  }
}

bool is_matrix_product(const std::string& name) {
  static const std::set<std::string> names{"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm",
                                           "aten::mv", "aten::addmv", "aten::dot", "aten::vdot", "aten::addr",
                                           "aten::_addmm_activation", "aten::matmul"};
  return names.count(name) != 0;
}

bool is_subtraction(const std::string& name) {
  static const std::set<std::string> names{"aten::sub", "aten::sub_", "aten::rsub", "aten::subtract",
                                           "aten::subtract_"};
  return names.count(name) != 0;
}

bool needs_check(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t first, size_t num_args) {
  const auto& args = op.schema().arguments();
  const std::string& name = op.schema().name();
  at::native::ResultTypeState state;
  std::set<c10::ScalarType> input_dtypes, out_dtypes;
  bool any_input = false, any_bool = false, promotes = true;
  auto take = [&](auto&& value) {
    try {
      state = at::native::update_result_type_state(value, state);
    } catch (const c10::Error&) {
      promotes = false;  // float8 with another type: PyTorch promotes neither way (op_outputs.cc)
    }
    any_input = true;
  };
  for (size_t a = 0; a < num_args && a < args.size(); ++a) {
    const c10::IValue& v = stack[first + a];
    if (is_out_arg(args[a])) {
      each_tensor(v, [&](const at::Tensor& t) { out_dtypes.insert(t.scalar_type()); });
      continue;
    }
    if (v.isScalar()) {
      take(v.toScalar());
      any_bool |= v.toScalar().isBoolean();
    }
    each_tensor(v, [&](const at::Tensor& t) {
      take(t);
      input_dtypes.insert(t.scalar_type());
      any_bool |= t.scalar_type() == at::kBool;
    });
  }
  if (is_subtraction(name) && any_bool) return true;
  if (is_matrix_product(name) && input_dtypes.size() > 1) return true;
  if (out_dtypes.empty() || !any_input || !promotes) return false;
  try {
    c10::ScalarType promoted = at::native::result_type(state);
    return out_dtypes.size() > 1 || *out_dtypes.begin() != promoted;
  } catch (const c10::Error&) {
    return false;
  }
}

// A CPU tensor standing in for `t`: one zero element per dim (empty for an out= tensor, which the
// kernel then resizes silently). CPU 0-d tensors pass as they are: a wrapped Python number
// promotes as a number.
at::Tensor stand_in(const at::Tensor& t, bool out) {
  if (!t.defined()) return t;
  if (t.dim() == 0) return t.is_cpu() ? t : at::zeros({}, t.options().device(at::kCPU));
  if (out) return at::empty({0}, t.options().device(at::kCPU));
  return at::zeros(std::vector<int64_t>(t.dim(), 1), t.options().device(at::kCPU));
}

c10::IValue stand_in(const c10::IValue& v, bool out) {
  if (v.isTensor()) return stand_in(v.toTensor(), out);
  if (v.isTensorList()) {
    std::vector<at::Tensor> list;
    for (const at::Tensor& t : v.toTensorVector()) list.push_back(stand_in(t, out));
    return list;
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> list;
    for (const std::optional<at::Tensor> t : v.toOptionalTensorList()) {
      list.push_back(t.has_value() ? std::optional<at::Tensor>(stand_in(*t, out)) : std::nullopt);
    }
    return list;
  }
  return v;
}

bool is_dtype_error(const std::string& message) {
  for (const char* words : {"dtype", "scalar type", "scalar_type", "can't be cast", "with a bool tensor"}) {
    if (message.find(words) != std::string::npos) return true;
  }
  return false;
}

class SilentWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning&) override {}
};

}  // namespace

void check_dtypes_like_cpu(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t num_args) {
  size_t first = stack.size() - num_args;
  if (!needs_check(op, stack, first, num_args)) return;
  const auto& args = op.schema().arguments();
  torch::jit::Stack cpu;
  for (size_t a = 0; a < num_args; ++a) cpu.push_back(stand_in(stack[first + a], a < args.size() && is_out_arg(args[a])));
  SilentWarnings silent;
  c10::WarningUtils::WarningHandlerGuard quiet(&silent);  // the stand-in call's warnings are not the user's
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  // A random op's stand-in draws from the CPU's default generator: the user's CPU stream is kept.
  at::Generator cpu_generator = at::detail::getDefaultCPUGenerator();
  c10::intrusive_ptr<c10::TensorImpl> rng_state;
  {
    std::lock_guard<std::mutex> lock(cpu_generator.mutex());
    rng_state = cpu_generator.get_state().getIntrusivePtr();
  }
  auto restore_rng = [&] {
    std::lock_guard<std::mutex> lock(cpu_generator.mutex());
    cpu_generator.set_state(at::Tensor(rng_state));
  };
  try {
    op.callBoxed(&cpu);
  } catch (const c10::Error& e) {
    restore_rng();
    if (is_dtype_error(e.what_without_backtrace())) throw;
    return;
  } catch (const std::exception&) {
    // the stand-in's shapes or values, not its dtypes
  }
  restore_rng();
}

}  // namespace tpu::engine
