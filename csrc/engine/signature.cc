#include "engine/signature.h"

#include <cstring>

#include "engine/dtypes.h"
#include "engine/guard.h"
#include "engine/storage.h"
#include "lowering/registry.h"
#include "lowering/views.h"

namespace tpu::engine {
namespace {

enum Tag : int64_t { kNone, kTpuTensor, kCpuScalar, kList, kScalar, kInt, kDouble, kBool, kStr,
                     kInts, kDevice, kGenerator, kDoubles, kScalarType, kBools };

c10::TypePtr unwrap_optional(c10::TypePtr t) {
  return t->kind() == c10::TypeKind::OptionalType ? t->containedType(0) : t;
}
}  // namespace

bool is_scalar_arg(const c10::Argument& a) {
  return unwrap_optional(a.type())->kind() == c10::TypeKind::NumberType;
}
bool is_scalar_list_arg(const c10::Argument& a) {
  c10::TypePtr t = unwrap_optional(a.type());
  return t->kind() == c10::TypeKind::ListType &&
         t->containedType(0)->kind() == c10::TypeKind::NumberType;
}

namespace {

[[noreturn]] void device_mismatch(const c10::OperatorHandle& op, int a, const at::Tensor& t) {
  TORCH_CHECK(false, op.schema().operator_name(), ": expected all tensors to be on the same device, "
              "but found at least two devices, tpu:", a, " and ", t.device(), "!");
}

void add_tensor(const c10::OperatorHandle& op, Walk& w, const at::Tensor& t, int arg, int elem) {
  if (!t.defined()) {
    w.key.push_back(kNone);
    return;
  }
  if (!t.is_privateuseone()) {
    if (t.device().is_cpu() && t.dim() == 0) {  // Python numbers and CPU scalars
      w.key.insert(w.key.end(), {kCpuScalar, int64_t(t.scalar_type()), int64_t(t.unsafeGetTensorImpl()->is_wrapped_number())});
      w.tensors.push_back({arg, elem, t, -1, false});
      w.scalars.push_back({arg, t.item()});
      return;
    }
    TORCH_CHECK(false, op.schema().operator_name(), ": expected all tensors to be on the same device, "
                "but found at least two devices, ", t.device(), " and tpu:", std::max(w.device, 0),
                "! (argument ", op.schema().arguments()[arg].name(), " has shape ", t.sizes(), ")");
  }
  int device = t.device().index();
  if (w.device < 0) w.device = device;
  if (w.device != device) device_mismatch(op, w.device, t);
  DType dtype = to_hlo(t.scalar_type(), op.schema().name().c_str());
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  int index = -1;
  for (size_t i = 0; i < w.storages.size(); ++i) {
    if (w.storages[i] == impl) index = static_cast<int>(i);
  }
  if (index < 0) {
    StorageBuffer& s = storage_buffer(t);
    if (s.buffer && hlo::bit_width(s.dtype) != hlo::bit_width(dtype)) read_buffer(s, dtype);
    DType sd = s.buffer ? s.dtype : dtype;
    index = static_cast<int>(w.storages.size());
    w.storages.push_back(impl);
    w.storage_dtypes.push_back(sd);
    w.storage_numels.push_back(static_cast<int64_t>(s.nbytes * 8 / hlo::bit_width(sd)));
  }
  bool has_offset = t.storage_offset() != 0;
  w.key.insert(w.key.end(), {kTpuTensor, int64_t(dtype), device, index, int64_t(w.storage_dtypes[index]),
                             w.storage_numels[index], t.dim(), has_offset});
  for (int64_t s : t.sizes()) w.key.push_back(s);
  for (int64_t s : t.strides()) w.key.push_back(s);
  if (has_offset) {
    lowering::ViewLayout v;
    v.sizes = t.sizes().vec();
    v.strides = t.strides().vec();
    v.storage_numel = w.storage_numels[index];
    int64_t length = v.window_length();
    w.key.push_back(length >= 0 && t.storage_offset() + length <= v.storage_numel);
  }
  w.tensors.push_back({arg, elem, t, index, has_offset});
}

}  // namespace

Walk walk_arguments(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t num_args) {
  Walk w;
  w.key.push_back(reinterpret_cast<intptr_t>(&op.schema()));
  const auto& schema_args = op.schema().arguments();
  size_t first = stack.size() - num_args;
  for (size_t a = 0; a < num_args; ++a) {
    const c10::IValue& v = stack[first + a];
    int arg = static_cast<int>(a);
    if (v.isNone()) {
      w.key.push_back(kNone);
      if (schema_args[a].type()->kind() == c10::TypeKind::OptionalType &&
          schema_args[a].type()->containedType(0)->kind() == c10::TypeKind::GeneratorType) {
        w.wants_generator = true;
      }
    } else if (v.isTensor()) {
      add_tensor(op, w, v.toTensor(), arg, -1);
    } else if (v.isTensorList() || v.isOptionalTensorList()) {
      auto list = v.isTensorList() ? c10::List<std::optional<at::Tensor>>() : v.toOptionalTensorList();
      std::vector<at::Tensor> items;
      if (v.isTensorList()) {
        for (const at::Tensor& t : v.toTensorVector()) items.push_back(t);
      } else {
        for (const std::optional<at::Tensor> t : v.toOptionalTensorList()) items.push_back(t.has_value() ? *t : at::Tensor());
      }
      w.key.insert(w.key.end(), {kList, int64_t(items.size())});
      for (size_t e = 0; e < items.size(); ++e) add_tensor(op, w, items[e], arg, static_cast<int>(e));
    } else if (is_scalar_list_arg(schema_args[a]) && v.isList()) {
      auto list = v.toListRef();
      w.key.insert(w.key.end(), {kList, int64_t(list.size())});
      for (const c10::IValue& e : list) {
        c10::Scalar s = e.toScalar();
        w.key.insert(w.key.end(), {kScalar, int64_t(s.type())});
        w.scalars.push_back({arg, s});
      }
    } else if (is_scalar_arg(schema_args[a])) {
      c10::Scalar s = v.toScalar();
      w.key.insert(w.key.end(), {kScalar, int64_t(s.type())});
      w.scalars.push_back({arg, s});
    } else if (v.isInt()) {
      w.key.insert(w.key.end(), {kInt, v.toInt()});
    } else if (v.isDouble()) {
      double d = v.toDouble();
      int64_t bits;
      std::memcpy(&bits, &d, 8);
      w.key.insert(w.key.end(), {kDouble, bits});
    } else if (v.isBool()) {
      w.key.insert(w.key.end(), {kBool, v.toBool()});
    } else if (v.isString()) {
      const std::string& s = v.toStringRef();
      w.key.insert(w.key.end(), {kStr, int64_t(s.size())});
      for (char c : s) w.key.push_back(c);
    } else if (v.isIntList()) {
      auto list = v.toIntVector();
      w.key.insert(w.key.end(), {kInts, int64_t(list.size())});
      w.key.insert(w.key.end(), list.begin(), list.end());
    } else if (v.isBoolList()) {
      auto list = v.toBoolList();
      w.key.insert(w.key.end(), {kBools, int64_t(list.size())});
      for (bool x : list) w.key.push_back(x);
    } else if (v.isDoubleList()) {
      auto list = v.toDoubleVector();
      w.key.insert(w.key.end(), {kDoubles, int64_t(list.size())});
      for (double d : list) {
        int64_t bits;
        std::memcpy(&bits, &d, 8);
        w.key.push_back(bits);
      }
    } else if (v.isDevice()) {
      w.key.insert(w.key.end(), {kDevice, int64_t(v.toDevice().type()), v.toDevice().index()});
    } else if (v.isGenerator()) {
      w.key.push_back(kGenerator);
      w.generator = v.toGenerator();
      w.wants_generator = true;
    } else {
      throw lowering::NotLowerable("argument kind " + v.tagKind() + " is not lowered");
    }
  }
  if (w.device < 0) w.device = current_device();
  // Random ops whose schema has no Generator argument still draw from the default generator.
  if (op.schema().name() == "aten::native_dropout") w.wants_generator = true;
  return w;
}

}  // namespace tpu::engine
