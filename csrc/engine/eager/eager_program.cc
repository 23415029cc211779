#include "engine/eager/eager_program.h"

#include <algorithm>

#include "engine/call/program_binding.h"
#include "engine/device/dtypes.h"
#include "engine/eager/op_adapters.h"
#include "hlo/runtime_size.h"

namespace tpu::engine {
namespace {

using lowering::Arg;
using program::Value;

DType scalar_param_dtype(const ScalarRef& s, DType compute) {
  if (s.from_cpu_tensor) return to_hlo(s.tensor_dtype);  // CPU 0-d tensors keep their dtype
  if (s.value.isBoolean()) return DType::Pred;
  if (s.value.isComplex()) return compute == DType::C128 ? DType::C128 : DType::C64;
  if (s.value.isFloatingPoint()) return (compute == DType::F64 || compute == DType::C128) ? DType::F64 : DType::F32;
  return DType::S64;
}

class Assembler {
 public:
  Assembler(program::Program& p, const OpCall& call, const OpPlacement& placement)
      : call_(call), p_(p), placement_(placement) {}

  program::Program& program() { return p_; }

  void bind(DType compute) {
    for (size_t s = 0; s < call_.scalars.size(); ++s) {
      const ScalarRef& ref = call_.scalars[s];
      DType dtype = scalar_param_dtype(ref, compute);
      std::optional<DType> passed;
      // An int64 value that fits 32 bits (a Scalar or a CPU 0-d tensor: the key says which; a
      // runtime length, bounded by its storage's dim) is passed as s32 and widened in the
      // module, so rules see the same s64 value; binding checks it again (program_binding.cc).
      if (dtype == DType::S64 && narrow_integer_scalar(ref.value)) passed = DType::S32;
      scalars_.push_back(p_.scalar(dtype, placement_.scalar_base + static_cast<int>(s), passed));
    }
  }

  Value read(int tensor_index) {
    const TensorRef& t = call_.tensors[tensor_index];
    if (t.storage < 0) return scalars_.at(t.scalar);
    Value v = p_.read(placement_.slots.at(t.storage), view_of(t, placement_.tensor_base + tensor_index));
    if (t.runtime_dim >= 0) v = hlo::with_runtime_size(p_.builder(), v, t.runtime_dim, scalars_.at(t.runtime_length));
    if (t.runtime_dim2 >= 0) v = hlo::with_runtime_size(p_.builder(), v, t.runtime_dim2, scalars_.at(t.runtime_length));
    return v;
  }

  void write(int tensor_index, Value value) {
    const TensorRef& t = call_.tensors[tensor_index];
    p_.write(placement_.slots.at(t.storage), view_of(t, placement_.tensor_base + tensor_index), value);
  }

  // Schema-normalised rule arguments, from where OpCall found each argument's values.
  // The rule's arguments: the functional op's, i.e. without trailing out= tensors (a rule that
  // read one would take the out tensor's old contents for an optional operand).
  std::vector<Arg> rule_args(const c10::FunctionSchema& schema, const torch::jit::Stack& stack, size_t num_args) {
    using K = ArgRef::Kind;
    size_t n = num_args;
    while (n > 0 && schema.arguments()[n - 1].kwarg_only() && schema.arguments()[n - 1].alias_info() &&
           schema.arguments()[n - 1].alias_info()->isWrite()) {
      --n;
    }
    std::vector<Arg> args(n);
    size_t first = stack.size() - num_args;
    for (size_t a = 0; a < n; ++a) {
      const ArgRef& ref = call_.args[a];
      const c10::IValue& v = stack[first + a];
      Arg& arg = args[a];
      switch (ref.kind) {
        case K::None: case K::Ignored: break;
        case K::Tensor:
          arg.kind = Arg::Kind::Tensor;
          arg.is_wrapped_scalar = call_.tensors[ref.first].storage < 0;
          arg.tensor = read(ref.first);
          break;
        case K::TensorList: {
          arg.kind = Arg::Kind::TensorList;
          arg.tensors.assign(ref.count, Value{});
          for (size_t i = ref.first; i < call_.tensors.size() && call_.tensors[i].arg == static_cast<int>(a); ++i) {
            arg.tensors[call_.tensors[i].elem] = read(static_cast<int>(i));
          }
          break;
        }
        case K::Scalar:
          arg.kind = Arg::Kind::Tensor;
          arg.is_wrapped_scalar = true;
          arg.tensor = scalars_.at(ref.first);
          if (ref.count == 2) arg.low = scalars_.at(ref.first + 1);  // a runtime double's residual
          break;
        case K::ScalarList:  // a list of runtime 0-d values
          arg.kind = Arg::Kind::TensorList;
          arg.is_wrapped_scalar = true;
          for (int i = 0; i < ref.count; ++i) arg.tensors.push_back(scalars_.at(ref.first + i));
          break;
        case K::Int:
          arg.kind = Arg::Kind::Int;
          arg.i = v.toInt();
          break;
        case K::ScalarType:
          arg.kind = Arg::Kind::ScalarType;
          arg.i = v.toInt();
          arg.dtype = to_hlo(static_cast<c10::ScalarType>(v.toInt()));
          break;
        case K::Double:
          arg.kind = Arg::Kind::Double;
          arg.d = v.toDouble();
          break;
        case K::Bool:
          arg.kind = Arg::Kind::Bool;
          arg.b = v.toBool();
          break;
        case K::String:
          arg.kind = Arg::Kind::String;
          arg.s = v.toStringRef();
          break;
        case K::IntList:
          arg.kind = Arg::Kind::IntList;
          arg.ints = v.toIntVector();
          break;
        case K::BoolList:
          arg.kind = Arg::Kind::IntList;
          for (bool x : v.toBoolList()) arg.ints.push_back(x);
          break;
      }
    }
    return args;
  }

 private:
  const OpCall& call_;
  program::Program& p_;
  const OpPlacement& placement_;
  std::vector<Value> scalars_;
};

}  // namespace

std::vector<Value> apply_op(program::Program& p, const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                            size_t num_args, const OpCall& call, const OpOutputs& outputs,
                            const lowering::Rule& rule, const OpPlacement& placement) {
  Assembler a(p, call, placement);
  a.bind(outputs.compute_dtype);
  const OpAdapter* adapter = find_adapter(op.operator_name());
  Value rng;
  if (call.wants_generator || (adapter != nullptr && adapter->draws_random_bits)) rng = p.rng_key(placement.rng_binding);
  std::vector<Arg> args = a.rule_args(op.schema(), stack, num_args);
  std::vector<std::optional<program::Type>> out_types;
  for (const Target& t : outputs.targets) {
    out_types.push_back(t.undefined ? std::nullopt : std::optional<program::Type>(program::Type(to_hlo(t.dtype), t.sizes)));
  }
  std::vector<Value> results = p.apply(rule, std::move(args), out_types, outputs.compute_dtype, rng);
  bool runtime_sized = std::any_of(call.tensors.begin(), call.tensors.end(),
                                   [](const TensorRef& t) { return t.runtime_dim >= 0; });
  if (runtime_sized) {
    for (Value& v : results) {
      if (v.valid()) v = hlo::static_result(p.builder(), v);
    }
  }
  for (size_t r = 0; r < results.size(); ++r) {
    const Target& t = outputs.targets[r];
    if (!t.undefined && !t.functional) a.write(t.tensor, results[r]);
  }
  return results;
}

program::Module assemble_op_program(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                    size_t num_args, const OpCall& call, const OpOutputs& outputs,
                                    const lowering::Rule& rule, const std::string& label) {
  program::Program p(label);
  OpPlacement placement;
  for (size_t s = 0; s < call.storages.size(); ++s) {
    placement.slots.push_back(p.storage(slot_of(call.storages[s], static_cast<int>(s))));
  }
  std::vector<Value> results = apply_op(p, op, stack, num_args, call, outputs, rule, placement);
  for (size_t r = 0; r < results.size(); ++r) {
    const Target& t = outputs.targets[r];
    if (!t.undefined && t.functional) p.output(results[r], static_cast<int>(r), t.memory_order, layout_policy());
  }
  return p.finish();
}

}  // namespace tpu::engine
