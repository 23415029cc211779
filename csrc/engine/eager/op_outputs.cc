#include "engine/eager/op_outputs.h"

#include <ATen/Functions.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/Exceptions.h>

#include <algorithm>
#include <numeric>

#include "engine/call/promotion.h"
#include "engine/device/dtypes.h"
#include "engine/eager/cpu_dtype_checks.h"
#include "engine/eager/op_adapters.h"
#include "lowering/registry.h"
#include "program/layout.h"

namespace tpu::engine {
namespace {

at::Tensor to_meta(const at::Tensor& t) {
  if (!t.defined() || !t.is_privateuseone()) return t;
  int64_t storage_elems = static_cast<int64_t>(t.storage().nbytes() / t.element_size());
  return at::empty({storage_elems}, t.options().device(c10::kMeta))
      .as_strided(t.sizes(), t.strides(), t.storage_offset());
}

c10::IValue to_meta(const c10::IValue& v) {
  if (v.isTensor()) return to_meta(v.toTensor());
  if (v.isTensorList()) {
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(to_meta(t));
    return out;
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const std::optional<at::Tensor> t : v.toOptionalTensorList()) {
      out.push_back(t.has_value() ? std::optional<at::Tensor>(to_meta(*t)) : std::nullopt);
    }
    return out;
  }
  return v;
}

// Called in a catch block: rethrows Ctrl-C (KeyboardInterrupt, SystemExit, GeneratorExit) raised
// by a meta kernel written in Python; any other error returns to the caller's handling.
void rethrow_interrupt(const std::exception& e) {
  bool interrupt = false;
  if (const auto* p = dynamic_cast<const python_error*>(&e)) {
    pybind11::gil_scoped_acquire gil;
    interrupt = p->type != nullptr && !PyErr_GivenExceptionMatches(p->type, PyExc_Exception);
  } else if (const auto* p = dynamic_cast<const pybind11::error_already_set*>(&e)) {
    pybind11::gil_scoped_acquire gil;
    interrupt = !p->matches(PyExc_Exception);
  }
  if (interrupt) throw;
}

// Whether a meta kernel written in Python failed an `assert` on its arguments (batch norm in
// eval mode without running statistics): a call the CPU kernel also cannot run (that one reads
// the missing tensors and crashes), so it is raised, not sent to the CPU fallback.
bool python_assertion(const std::exception& e) {
  if (const auto* p = dynamic_cast<const python_error*>(&e)) {
    pybind11::gil_scoped_acquire gil;
    return p->type != nullptr && PyErr_GivenExceptionMatches(p->type, PyExc_AssertionError);
  }
  if (const auto* p = dynamic_cast<const pybind11::error_already_set*>(&e)) {
    pybind11::gil_scoped_acquire gil;
    return p->matches(PyExc_AssertionError);
  }
  return false;
}

bool is_write_arg(const c10::Argument& a) { return a.alias_info() && a.alias_info()->isWrite(); }

// torch.result_type of the inputs: every tensor and Scalar argument except out= tensors
// (in-place ops' self is both input and output and takes part).
DType promoted_dtype(const c10::FunctionSchema& schema, const OpCall& call) {
  Promotion promotion;
  for (const TensorRef& t : call.tensors) {
    const c10::Argument& a = schema.arguments()[t.arg];
    if (is_write_arg(a) && a.kwarg_only()) continue;
    promotion.add(t.tensor);
  }
  for (const ScalarRef& s : call.scalars) {
    if (s.from_cpu_tensor || s.runtime_size) continue;  // a tensor above / not an operand
    promotion.add(s.value);
  }
  return promotion.result();
}

// In-place ops write their result into self: like the CPU's TensorIterator, refuse a result type
// that cannot be cast to self's dtype (int.mul_(1.5)). PyTorch's meta kernels skip that check,
// so it is made here from the functional op's meta result (misses only: plans are cached).
void check_in_place_result_type(const c10::OperatorHandle& op, const torch::jit::Stack& meta_inputs) {
  const c10::OperatorName& name = op.schema().operator_name();
  if (name.name.empty() || name.name.back() != '_' || op.schema().arguments().empty() ||
      !is_write_arg(op.schema().arguments()[0]) || op.schema().returns().size() != 1) {
    return;
  }
  auto functional = c10::Dispatcher::singleton().findOp({name.name.substr(0, name.name.size() - 1), name.overload_name});
  if (!functional || functional->schema().arguments().size() != op.schema().arguments().size()) return;
  const at::Tensor& self = meta_inputs[0].toTensor();
  torch::jit::Stack stack = meta_inputs;
  try {
    functional->redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &stack);
  } catch (const std::exception& e) {
    rethrow_interrupt(e);
    return;  // no functional meta kernel: the in-place meta kernel's checks stand
  }
  if (stack.empty() || !stack[0].isTensor()) return;
  c10::ScalarType result = stack[0].toTensor().scalar_type();
  TORCH_CHECK(c10::canCast(result, self.scalar_type()), "result type ", result,
              " can't be cast to the desired output type ", self.scalar_type());
}

}  // namespace

OpOutputs op_outputs(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t num_args,
                     const OpCall& call) {
  const auto& schema = op.schema();
  OpOutputs out;
  torch::jit::Stack meta_stack;
  size_t first = stack.size() - num_args;
  for (size_t a = 0; a < num_args; ++a) meta_stack.push_back(to_meta(stack[first + a]));
  check_in_place_result_type(op, meta_stack);
  check_dtypes_like_cpu(op, stack, num_args);
  // Ops that return nothing (_foreach_X.out) resize their out= lists in the meta kernel too.
  std::vector<std::pair<int, c10::IValue>> written_lists;
  if (schema.returns().empty()) {
    for (size_t a = 0; a < num_args; ++a) {
      if (is_write_arg(schema.arguments()[a]) && meta_stack[a].isTensorList()) written_lists.emplace_back(static_cast<int>(a), meta_stack[a]);
    }
  }
  const OpAdapter* adapter = find_adapter(op.operator_name());
  try {
    if (adapter != nullptr && adapter->meta != nullptr) {
      adapter->meta(op, &meta_stack);
    } else {
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta_stack);
    }
  } catch (const c10::NotImplementedError& e) {
    // An op that returns nothing and only writes its arguments (_fused_sgd_) needs no output
    // metadata: its targets are those arguments. Its rule checks the shapes.
    if (!schema.returns().empty()) throw lowering::NotLowerable(std::string("no meta kernel: ") + e.what());
  } catch (const c10::Error&) {
    throw;  // a user error found by the meta kernel (shape mismatch...)
  } catch (const std::exception& e) {
    // Ctrl-C inside a Python meta kernel is the user's, never a reason to run on the CPU.
    rethrow_interrupt(e);
    if (python_assertion(e)) {
      std::string message = e.what();  // without the Python traceback pybind appends ("\n\nAt:\n ...")
      throw lowering::InvalidCall(message.substr(0, message.find("\n\nAt:")));
    }
    // A Python meta kernel that cannot run, e.g. nonzero for x[bool_mask] (data-dependent
    // shape): the CPU fallback computes it (or raises PyTorch's own error).
    throw lowering::NotLowerable(std::string("meta kernel failed: ") + e.what());
  }

  OutputsNeedResize resize;
  auto add_written_arg = [&](int arg) {
    int n = 0;
    for (size_t i = 0; i < call.tensors.size(); ++i) {
      const TensorRef& ref = call.tensors[i];
      if (ref.arg != arg) continue;
      Target t;
      t.functional = false;
      t.tensor = static_cast<int>(i);
      t.sizes = ref.tensor.sizes().vec();
      t.strides = ref.tensor.strides().vec();
      t.dtype = ref.tensor.scalar_type();
      out.targets.push_back(std::move(t));
      ++n;
    }
    return n;
  };
  const auto& returns = schema.returns();
  out.returns_written_args = returns.empty();
  if (returns.empty()) {
    const auto& args = schema.arguments();
    bool has_out = !args.empty() && args.back().kwarg_only() && is_write_arg(args.back()) && args.back().name() == "out";
    if (has_out && adapter != nullptr && adapter->runtime_floats) {
      // A fused optimizer's out= overload (_fused_sgd.out): `out` receives the new parameters (the
      // rule's first results); the grads and state lists its schema marks written keep their
      // values, as the CPU's generated kernel updates copies of them.
      int first_skipped = static_cast<int>(out.targets.size()) + add_written_arg(static_cast<int>(args.size() - 1));
      for (size_t a = 0; a + 1 < args.size(); ++a) {
        if (is_write_arg(args[a])) add_written_arg(static_cast<int>(a));
      }
      for (size_t t = first_skipped; t < out.targets.size(); ++t) out.targets[t].undefined = true;
    } else {
      for (size_t a = 0; a < args.size(); ++a) {
        if (is_write_arg(args[a])) add_written_arg(static_cast<int>(a));
      }
    }
  }
  for (size_t r = 0; r < returns.size(); ++r) {
    const c10::IValue& meta_out = meta_stack.at(r);
    bool is_list = meta_out.isTensorList();
    out.return_is_list.push_back(is_list);
    if (returns[r].alias_info() && returns[r].alias_info()->isWrite()) {
      int arg = -1;
      for (size_t a = 0; a < schema.arguments().size(); ++a) {
        const auto& ai = schema.arguments()[a].alias_info();
        if (ai && ai->beforeSets() == returns[r].alias_info()->beforeSets()) arg = static_cast<int>(a);
      }
      TORCH_INTERNAL_ASSERT(arg >= 0, "return aliases no argument");
      out.return_sizes.push_back(add_written_arg(arg));
      // The meta kernel resized its copy of an out= tensor: the real one needs the same.
      if (meta_out.isTensor() && stack[first + arg].isTensor()) {
        const at::Tensor& real = stack[first + arg].toTensor();
        if (real.defined() && real.sizes() != meta_out.toTensor().sizes()) {
          resize.resizes.push_back({arg, -1, meta_out.toTensor().sizes().vec()});
        }
      }
      continue;
    }
    std::vector<at::Tensor> outs = is_list ? meta_out.toTensorVector() : std::vector<at::Tensor>{meta_out.toTensor()};
    for (const at::Tensor& m : outs) {
      Target t;
      if (!m.defined()) {
        t.undefined = true;
        out.targets.push_back(std::move(t));
        continue;
      }
      t.sizes = m.sizes().vec();
      t.memory_order = program::memory_order(m.sizes().vec(), m.strides().vec());
      if (t.memory_order.empty()) {  // not dense: PyTorch's result is made contiguous
        t.strides = program::row_major_strides(t.sizes);
        t.memory_order = program::memory_order(t.sizes, t.strides);
      } else {
        t.strides = m.strides().vec();
      }
      t.dtype = m.scalar_type();
      out.targets.push_back(std::move(t));
    }
    out.return_sizes.push_back(static_cast<int>(outs.size()));
  }
  if (adapter != nullptr && adapter->result_dtype && !out.targets.empty() && out.targets[0].functional &&
      !out.targets[0].undefined) {
    out.targets[0].dtype = adapter->result_dtype(stack, first);
  }
  if (adapter != nullptr && adapter->unannotated_writes) {
    for (int arg : adapter->unannotated_writes(stack, first)) add_written_arg(arg);
  }
  for (const auto& [arg, meta_list] : written_lists) {
    std::vector<at::Tensor> metas = meta_list.toTensorVector();
    std::vector<at::Tensor> reals = stack[first + arg].toTensorVector();
    for (size_t e = 0; e < metas.size() && e < reals.size(); ++e) {
      if (metas[e].sizes() != reals[e].sizes()) resize.resizes.push_back({arg, static_cast<int>(e), metas[e].sizes().vec()});
    }
  }
  if (!resize.resizes.empty()) throw resize;
  out.compute_dtype = promoted_dtype(schema, call);
  return out;
}

}  // namespace tpu::engine
