#include "engine/call/op_call.h"

#include "engine/call/key_tags.h"
#include "engine/call/runtime_sizes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "engine/device/dtypes.h"
#include "engine/device/guard.h"
#include "lowering/registry.h"

namespace tpu::engine {
namespace {

c10::TypePtr unwrap_optional(c10::TypePtr t) {
  return t->kind() == c10::TypeKind::OptionalType ? t->containedType(0) : t;
}

bool is_dtype_arg(const c10::Argument& a) { return unwrap_optional(a.type())->kind() == c10::TypeKind::ScalarTypeType; }

// `op` is null for the inputs of a compiled graph.
[[noreturn]] void device_mismatch(const c10::OperatorHandle* op, const OpCall& call, const at::Tensor& t, int arg) {
  std::string who = op != nullptr ? c10::toString(op->schema().operator_name()) : "compiled graph";
  std::string what = op != nullptr ? "argument " + op->schema().arguments()[arg].name() : "input " + std::to_string(arg);
  TORCH_CHECK(false, who, ": expected all tensors to be on the same device, but found at least two devices, tpu:",
              std::max(call.device, 0), " and ", t.device(), "! (", what, " has shape ", t.sizes(), ")");
}

// The storage's layout as the module sees it. An unwritten storage gets the dense shape of the
// first tensor that covers it (or flat), which its first write keeps.
void settle_unwritten_layout(StorageBuffer& s, const at::Tensor& t, DType dtype) {
  if (s.state() != StorageState::Unwritten) return;
  int64_t numel = s.numel_of(dtype);
  if (s.layout_set && program::Layout{s.dims}.numel() == numel) return;
  bool covers = t.is_contiguous() && t.storage_offset() == 0 && t.numel() == numel;
  s.dims = covers ? dense_layout(t.sizes()) : std::vector<int64_t>{numel};
  s.layout_set = true;
}

}  // namespace

void add_tensor(const c10::OperatorHandle* op, OpCall& call, const at::Tensor& t, int arg, int elem) {
  if (!t.defined()) {
    call.key.push_back(kNone);
    return;
  }
  if (t.is_conj() || t.is_neg()) throw MathBitsSet{};
  if (!t.is_privateuseone()) {
    if (t.device().is_cpu() && t.dim() == 0) {  // Python numbers and CPU scalars
      c10::Scalar value = t.item();
      // An int64 value past 32 bits adds 2: its parameter stays s64 (eager_program.cc).
      bool wide = t.scalar_type() == c10::kLong && !narrow_integer_scalar(value);
      call.key.insert(call.key.end(), {kCpuScalar, int64_t(t.scalar_type()),
                                       int64_t(t.unsafeGetTensorImpl()->is_wrapped_number()) + 2 * wide});
      TensorRef ref;
      ref.arg = arg;
      ref.elem = elem;
      ref.tensor = t;
      ref.scalar = static_cast<int>(call.scalars.size());
      call.tensors.push_back(std::move(ref));
      call.scalars.push_back({arg, value, true, t.scalar_type()});
      return;
    }
    device_mismatch(op, call, t, arg);
  }
  int device = t.device().index();
  if (call.device < 0) call.device = device;
  if (call.device != device) device_mismatch(op, call, t, arg);
  DType dtype = to_hlo(t.scalar_type(), op != nullptr ? op->schema().name().c_str() : "compiled graph");
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  int index = -1;
  for (size_t i = 0; i < call.storages.size(); ++i) {
    if (call.storages[i].impl == impl) index = static_cast<int>(i);
  }
  if (index < 0) {
    StorageBuffer& s = storage_buffer(t);
    if (s.state() != StorageState::Unwritten && hlo::bit_width(s.dtype) != hlo::bit_width(dtype)) read_buffer(s, dtype);
    bool unwritten = s.state() == StorageState::Unwritten;
    if (unwritten) settle_unwritten_layout(s, t, dtype);
    index = static_cast<int>(call.storages.size());
    call.storages.push_back({impl, &s, unwritten ? dtype : s.dtype, unwritten});
    call.key.insert(call.key.end(), {kTpuTensor, int64_t(dtype), device, index, int64_t(call.storages.back().dtype),
                                     unwritten, int64_t(s.dims.size())});
    call.key.insert(call.key.end(), s.dims.begin(), s.dims.end());
  } else {
    call.key.insert(call.key.end(), {kTpuTensor, int64_t(dtype), device, index});
  }
  const std::vector<int64_t>& dims = call.storages[index].buffer->dims;
  TensorRef ref;
  ref.arg = arg;
  ref.elem = elem;
  ref.tensor = t;
  ref.storage = index;
  ref.access = program::classify(dims, t.sizes().data(), t.strides().data(), t.dim(), t.storage_offset());
  // A view that does not cover its storage takes its offset as a runtime value even at offset
  // 0, so x[0], x[1], ... (a denoising loop's timesteps, KV-cache positions) share one module.
  ref.has_offset = t.storage_offset() != 0 || ref.access != program::Access::Whole;
  call.key.insert(call.key.end(), {t.dim(), ref.has_offset, int64_t(ref.access)});
  for (int64_t s : t.sizes()) call.key.push_back(s);
  for (int64_t s : t.strides()) call.key.push_back(s);
  if (const RuntimeSize* size = runtime_size_of(t)) {  // the length is a parameter, not in the key
    ref.runtime_dim = static_cast<int>(size->dim);
    ref.runtime_dim2 = static_cast<int>(size->dim2);
    ref.runtime_length = static_cast<int>(call.scalars.size());
    ScalarRef length{arg, c10::Scalar(size->length)};
    length.runtime_size = true;
    call.scalars.push_back(length);
  }
  call.tensors.push_back(std::move(ref));
}

namespace {

void push_double(std::vector<int64_t>& key, double d) {
  int64_t bits;
  std::memcpy(&bits, &d, 8);
  key.push_back(bits);
}

}  // namespace

bool narrow_integer_scalar(const c10::Scalar& s) {
  if (s.type() != c10::ScalarType::Long) return false;
  int64_t v = s.toLong();
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

namespace {
int64_t scalar_tag(const c10::Scalar& s) {
  return s.isIntegral(/*includeBool=*/false) && !narrow_integer_scalar(s) ? kWideScalar : kScalar;
}
}  // namespace

bool is_scalar_arg(const c10::Argument& a) {
  return unwrap_optional(a.type())->kind() == c10::TypeKind::NumberType;
}
bool is_scalar_list_arg(const c10::Argument& a) {
  c10::TypePtr t = unwrap_optional(a.type());
  return t->kind() == c10::TypeKind::ListType && t->containedType(0)->kind() == c10::TypeKind::NumberType;
}

OpCall read_op_call(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t num_args,
                    bool (*takes_runtime_floats)(const c10::OperatorHandle&)) {
  using K = ArgRef::Kind;
  OpCall call;
  // Asked only when a `float` argument appears (rare), not on every op's dispatch.
  std::optional<bool> runtime_floats;
  auto floats_at_runtime = [&] {
    if (!runtime_floats) runtime_floats = takes_runtime_floats != nullptr && takes_runtime_floats(op);
    return *runtime_floats;
  };
  call.key.push_back(reinterpret_cast<intptr_t>(&op.schema()));
  call.args.resize(num_args);
  const auto& schema_args = op.schema().arguments();
  size_t first = stack.size() - num_args;
  for (size_t a = 0; a < num_args; ++a) {
    const c10::IValue& v = stack[first + a];
    int arg = static_cast<int>(a);
    ArgRef& ref = call.args[a];
    if (v.isNone()) {
      call.key.push_back(kNone);
      if (unwrap_optional(schema_args[a].type())->kind() == c10::TypeKind::GeneratorType) call.wants_generator = true;
    } else if (v.isTensor()) {
      ref = {v.toTensor().defined() ? K::Tensor : K::None, static_cast<int>(call.tensors.size()), 1};
      add_tensor(&op, call, v.toTensor(), arg, -1);
    } else if (v.isTensorList() || v.isOptionalTensorList()) {
      std::vector<at::Tensor> items;
      if (v.isTensorList()) {
        items = v.toTensorVector();
      } else {
        for (const std::optional<at::Tensor> t : v.toOptionalTensorList()) items.push_back(t.has_value() ? *t : at::Tensor());
      }
      ref = {K::TensorList, static_cast<int>(call.tensors.size()), static_cast<int>(items.size())};
      call.key.insert(call.key.end(), {kList, int64_t(items.size())});
      for (size_t e = 0; e < items.size(); ++e) add_tensor(&op, call, items[e], arg, static_cast<int>(e));
    } else if (is_scalar_list_arg(schema_args[a]) && v.isList()) {
      auto list = v.toListRef();
      ref = {K::ScalarList, static_cast<int>(call.scalars.size()), static_cast<int>(list.size())};
      call.key.insert(call.key.end(), {kList, int64_t(list.size())});
      for (const c10::IValue& e : list) {
        c10::Scalar s = e.toScalar();
        call.key.insert(call.key.end(), {scalar_tag(s), int64_t(s.type())});
        call.scalars.push_back({arg, s});
      }
    } else if (is_scalar_arg(schema_args[a])) {
      c10::Scalar s = v.toScalar();
      ref = {K::Scalar, static_cast<int>(call.scalars.size()), 1};
      call.key.insert(call.key.end(), {scalar_tag(s), int64_t(s.type())});
      call.scalars.push_back({arg, s});
    } else if (v.isInt()) {
      bool dtype = is_dtype_arg(schema_args[a]);
      ref.kind = dtype ? K::ScalarType : K::Int;
      call.key.insert(call.key.end(), {dtype ? kScalarType : kInt, v.toInt()});
    } else if (v.isDouble() && floats_at_runtime()) {
      // Two runtime values: the double and its float32 rounding residual (registry.h, Arg::low).
      double value = v.toDouble();
      ref = {K::Scalar, static_cast<int>(call.scalars.size()), 2};
      call.key.insert(call.key.end(), {kScalar, int64_t(c10::ScalarType::Double), kScalar, int64_t(c10::ScalarType::Double)});
      call.scalars.push_back({arg, c10::Scalar(value)});
      float rounded = static_cast<float>(value);
      call.scalars.push_back({arg, c10::Scalar(std::isfinite(rounded) ? value - static_cast<double>(rounded) : 0.0)});
    } else if (v.isDouble()) {
      ref.kind = K::Double;
      call.key.push_back(kDouble);
      push_double(call.key, v.toDouble());
    } else if (v.isBool()) {
      ref.kind = K::Bool;
      call.key.insert(call.key.end(), {kBool, v.toBool()});
    } else if (v.isString()) {
      ref.kind = K::String;
      const std::string& s = v.toStringRef();
      call.key.insert(call.key.end(), {kStr, int64_t(s.size())});
      for (char c : s) call.key.push_back(c);
    } else if (v.isIntList()) {
      ref.kind = K::IntList;
      auto list = v.toIntVector();
      call.key.insert(call.key.end(), {kInts, int64_t(list.size())});
      call.key.insert(call.key.end(), list.begin(), list.end());
    } else if (v.isBoolList()) {
      ref.kind = K::BoolList;
      auto list = v.toBoolList();
      call.key.insert(call.key.end(), {kBools, int64_t(list.size())});
      for (bool x : list) call.key.push_back(x);
    } else if (v.isDoubleList()) {
      ref.kind = K::Ignored;  // no rule reads a float[] argument; it only keys the executable
      auto list = v.toDoubleVector();
      call.key.insert(call.key.end(), {kDoubles, int64_t(list.size())});
      for (double d : list) push_double(call.key, d);
    } else if (v.isDevice()) {
      ref.kind = K::Ignored;
      call.key.insert(call.key.end(), {kDevice, int64_t(v.toDevice().type()), v.toDevice().index()});
    } else if (v.isGenerator()) {
      ref.kind = K::Ignored;
      call.key.push_back(kGenerator);
      call.generator = v.toGenerator();
      call.wants_generator = true;
    } else {
      throw lowering::NotLowerable("argument kind " + v.tagKind() + " is not lowered");
    }
  }
  if (call.device < 0) call.device = current_device();
  // Runtime sizes key by (tensor, dim) after the arguments (describe_key_change stops before).
  for (size_t i = 0; i < call.tensors.size(); ++i) {
    if (call.tensors[i].runtime_dim < 0) continue;
    call.key.insert(call.key.end(),
                    {kRuntimeSizes, static_cast<int64_t>(i), call.tensors[i].runtime_dim, call.tensors[i].runtime_dim2});
  }
  return call;
}

}  // namespace tpu::engine
