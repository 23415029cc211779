#include "engine/boxed_kernel.h"

#include <ATen/Functions.h>
#include <ATen/native/TypeProperties.h>
#include <torch/library.h>

#include <atomic>
#include <mutex>
#include <set>
#include <unordered_map>

#include "engine/dtypes.h"
#include "engine/executable_cache.h"
#include "engine/fallback.h"
#include "engine/generator.h"
#include "engine/guard.h"
#include "engine/metrics.h"
#include "engine/runtime.h"
#include "engine/scalar_buffers.h"
#include "engine/storage.h"
#include "engine/sync.h"
#include "lowering/registry.h"
#include "lowering/views.h"

namespace tpu::engine {
namespace {

using hlo::DType;
using lowering::Arg;

// ---------------------------------------------------------------------------------------------
// Signature: one pass over the IValue arguments produces the cache key and the binding.

enum Tag : int64_t { kNone, kTpuTensor, kCpuScalar, kList, kScalar, kInt, kDouble, kBool, kStr,
                     kInts, kDevice, kGenerator, kDoubles, kScalarType, kBools };

struct TensorRef {
  int arg = 0, elem = -1;
  at::Tensor tensor;
  int storage = -1;        // index into Walk::storages, -1 for CPU scalars
  bool has_offset = false;
};

struct ScalarRef {
  int arg = 0;
  c10::Scalar value;
};

struct Walk {
  std::vector<int64_t> key;
  std::vector<c10::StorageImpl*> storages;
  std::vector<DType> storage_dtypes;
  std::vector<int64_t> storage_numels;
  std::vector<TensorRef> tensors;
  std::vector<ScalarRef> scalars;  // Scalar args and CPU 0-d tensors, in order
  std::optional<at::Generator> generator;
  bool wants_generator = false;
  int device = -1;
};

c10::TypePtr unwrap_optional(c10::TypePtr t) {
  return t->kind() == c10::TypeKind::OptionalType ? t->containedType(0) : t;
}
// `Scalar` operands are runtime values (a learning rate must not force a recompile).
bool is_scalar_arg(const c10::Argument& a) {
  return unwrap_optional(a.type())->kind() == c10::TypeKind::NumberType;
}
// `Scalar[]` operands (the per-tensor lrs / bias corrections of foreach optimizers) are runtime
// values too: each element becomes a 0-d scalar parameter, so changing them never recompiles.
bool is_scalar_list_arg(const c10::Argument& a) {
  c10::TypePtr t = unwrap_optional(a.type());
  return t->kind() == c10::TypeKind::ListType &&
         t->containedType(0)->kind() == c10::TypeKind::NumberType;
}

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

struct VecHash {
  size_t operator()(const std::vector<int64_t>& v) const {
    uint64_t h = 1469598103934665603ULL;
    for (int64_t x : v) {
      h ^= static_cast<uint64_t>(x);
      h *= 1099511628211ULL;
    }
    return h;
  }
};

// ---------------------------------------------------------------------------------------------
// Plans: what a compiled signature needs at run time.

enum class ParamKind { Storage, Offset, Scalar, RngKey };
struct Param {
  ParamKind kind;
  int index = 0;  // storage index, tensor index or scalar index
  DType dtype = DType::F32;
};

struct Target {  // where a rule result goes
  bool functional = true;
  bool undefined = false;  // an optional output the op does not produce (e.g. output_mask)
  int tensor = -1;  // index into Walk::tensors for written arguments
  std::vector<int64_t> sizes, strides;
  c10::ScalarType dtype = c10::kFloat;
};

struct Plan {
  std::string op_name;
  std::shared_ptr<pjrt::Executable> exe;
  std::shared_ptr<const AotResult> aot;  // libtpu's verdict on the module (AOT check only)
  std::vector<Param> params;
  std::vector<Target> targets;           // one per flattened return (or written arg)
  std::vector<int> written_storages;     // module results after the functional ones
  std::vector<DType> written_dtypes;
  std::vector<std::string> check_messages;  // device assertions, the last module results
  std::vector<bool> return_is_list;      // per schema return
  std::vector<int> return_sizes;         // targets per schema return
  bool returns_written_args = false;     // schema returns nothing; results go to written args
  std::atomic<int64_t> runs{0};
};

std::mutex g_plans_mu;
std::set<std::string> g_rules_used;  // every rule that built a plan in this process
std::unordered_map<std::vector<int64_t>, std::shared_ptr<Plan>, VecHash> g_plans;

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

DType scalar_param_dtype(const c10::Scalar& s, DType compute) {
  if (s.isBoolean()) return DType::Pred;
  if (s.isComplex()) return compute == DType::C128 ? DType::C128 : DType::C64;
  if (s.isFloatingPoint()) return (compute == DType::F64 || compute == DType::C128) ? DType::F64 : DType::F32;
  return DType::S64;
}

bool is_write_arg(const c10::Argument& a) { return a.alias_info() && a.alias_info()->isWrite(); }

// torch.result_type of the inputs: every tensor and Scalar argument except out= tensors
// (in-place ops' self is both input and output and takes part).
DType promoted_dtype(const c10::FunctionSchema& schema, const Walk& w) {
  at::native::ResultTypeState state;
  bool any = false;
  for (size_t i = 0; i < w.tensors.size(); ++i) {
    const c10::Argument& a = schema.arguments()[w.tensors[i].arg];
    if (is_write_arg(a) && a.kwarg_only()) continue;
    state = at::native::update_result_type_state(w.tensors[i].tensor, state);
    any = true;
  }
  size_t s = 0;
  for (const ScalarRef& ref : w.scalars) {
    bool from_tensor = false;
    for (const TensorRef& t : w.tensors) from_tensor |= t.storage < 0 && t.arg == ref.arg;
    if (!from_tensor) {
      state = at::native::update_result_type_state(ref.value, state);
      any = true;
    }
    ++s;
  }
  c10::ScalarType t = any ? at::native::result_type(state) : c10::kFloat;
  return is_supported(t) ? to_hlo(t) : DType::F32;
}


std::vector<int64_t> contiguous_strides(c10::IntArrayRef sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

// Strides of a dense tensor, or empty if the layout is not a permutation of a dense one.
std::vector<int64_t> memory_order(c10::IntArrayRef sizes, c10::IntArrayRef strides) {
  std::vector<int64_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  int64_t expected = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (sizes[*it] != 1 && strides[*it] != expected) return {};
    expected *= sizes[*it];
  }
  return order;
}

// Thrown by build_plan when out= arguments must first be resized to what the meta kernel says.
struct OutputsNeedResize {
  std::vector<std::pair<int, std::vector<int64_t>>> resizes;  // (argument index, sizes)
};

std::shared_ptr<Plan> build_plan(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                 size_t num_args, const Walk& w, const std::string& rule_name) {
  const auto& schema = op.schema();
  auto plan = std::make_shared<Plan>();
  plan->op_name = schema.operator_name().name.substr(6) +
                  (schema.overload_name().empty() ? "" : "." + schema.overload_name());

  // Output metadata with PyTorch semantics, from the meta kernel.
  torch::jit::Stack meta_stack;
  size_t first = stack.size() - num_args;
  for (size_t a = 0; a < num_args; ++a) meta_stack.push_back(to_meta(stack[first + a]));
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta_stack);
  } catch (const c10::NotImplementedError& e) {
    throw lowering::NotLowerable(std::string("no meta kernel: ") + e.what());
  } catch (const c10::Error&) {
    throw;  // a user error found by the meta kernel (shape mismatch...)
  } catch (const std::exception& e) {
    // A Python meta kernel that cannot run, e.g. nonzero for x[bool_mask] (data-dependent
    // shape): the CPU fallback computes it (or raises PyTorch's own error).
    throw lowering::NotLowerable(std::string("meta kernel failed: ") + e.what());
  }

  OutputsNeedResize resize;
  // Which walked tensors are written, and where each rule result goes.
  auto written_tensors_of_arg = [&](int arg) {
    std::vector<int> out;
    for (size_t i = 0; i < w.tensors.size(); ++i) {
      if (w.tensors[i].arg == arg) out.push_back(static_cast<int>(i));
    }
    return out;
  };
  const auto& returns = schema.returns();
  plan->returns_written_args = returns.empty();
  auto add_written_arg = [&](int arg) {
    auto idx = written_tensors_of_arg(arg);
    for (int i : idx) {
      Target t;
      t.functional = false;
      t.tensor = i;
      t.sizes = w.tensors[i].tensor.sizes().vec();
      t.strides = w.tensors[i].tensor.strides().vec();
      t.dtype = w.tensors[i].tensor.scalar_type();
      plan->targets.push_back(t);
    }
    return static_cast<int>(idx.size());
  };
  if (returns.empty()) {
    for (size_t a = 0; a < schema.arguments().size(); ++a) {
      if (is_write_arg(schema.arguments()[a])) add_written_arg(static_cast<int>(a));
    }
  }
  for (size_t r = 0; r < returns.size(); ++r) {
    const c10::IValue& meta_out = meta_stack.at(r);
    bool is_list = meta_out.isTensorList();
    plan->return_is_list.push_back(is_list);
    if (returns[r].alias_info() && returns[r].alias_info()->isWrite()) {
      int arg = -1;
      for (size_t a = 0; a < schema.arguments().size(); ++a) {
        const auto& ai = schema.arguments()[a].alias_info();
        if (ai && ai->beforeSets() == returns[r].alias_info()->beforeSets()) arg = static_cast<int>(a);
      }
      TORCH_INTERNAL_ASSERT(arg >= 0, "return aliases no argument");
      plan->return_sizes.push_back(add_written_arg(arg));
      // The meta kernel resized its copy of an out= tensor: the real one needs the same.
      if (meta_out.isTensor() && stack[first + arg].isTensor()) {
        const at::Tensor& real = stack[first + arg].toTensor();
        if (real.defined() && real.sizes() != meta_out.toTensor().sizes()) {
          resize.resizes.push_back({arg, meta_out.toTensor().sizes().vec()});
        }
      }
      continue;
    }
    std::vector<at::Tensor> outs = is_list ? meta_out.toTensorVector() : std::vector<at::Tensor>{meta_out.toTensor()};
    for (const at::Tensor& m : outs) {
      Target t;
      if (!m.defined()) {
        t.undefined = true;
        plan->targets.push_back(t);
        continue;
      }
      t.sizes = m.sizes().vec();
      t.strides = memory_order(m.sizes(), m.strides()).empty() ? contiguous_strides(m.sizes())
                                                                 : m.strides().vec();
      t.dtype = m.scalar_type();
      plan->targets.push_back(t);
    }
    plan->return_sizes.push_back(static_cast<int>(outs.size()));
  }
  // Out= tensors whose shape the op changes: the caller resizes them and retries.
  if (!resize.resizes.empty()) throw resize;
  DType compute = promoted_dtype(schema, w);

  // Written storages and their dtypes (the last writer's dtype).
  int num_functional = 0;
  for (const Target& t : plan->targets) num_functional += t.functional && !t.undefined;
  for (const Target& t : plan->targets) {
    if (t.functional) continue;
    int s = w.tensors[t.tensor].storage;
    auto it = std::find(plan->written_storages.begin(), plan->written_storages.end(), s);
    if (it == plan->written_storages.end()) {
      plan->written_storages.push_back(s);
      plan->written_dtypes.push_back(to_hlo(t.dtype));
    } else {
      plan->written_dtypes[it - plan->written_storages.begin()] = to_hlo(t.dtype);
    }
  }

  // Parameters: storages, offsets, scalars, rng key.
  hlo::Builder b;
  std::vector<hlo::Value> storage_values;
  for (size_t s = 0; s < w.storages.size(); ++s) {
    hlo::ArgOptions opts;
    auto it = std::find(plan->written_storages.begin(), plan->written_storages.end(), int(s));
    if (it != plan->written_storages.end()) {
      size_t k = it - plan->written_storages.begin();
      if (plan->written_dtypes[k] == w.storage_dtypes[s]) opts.alias_output = num_functional + static_cast<int>(k);
    }
    storage_values.push_back(b.arg(hlo::Type(w.storage_dtypes[s], {w.storage_numels[s]}), opts));
    plan->params.push_back({ParamKind::Storage, static_cast<int>(s), w.storage_dtypes[s]});
  }
  std::vector<lowering::ViewLayout> layouts(w.tensors.size());
  for (size_t i = 0; i < w.tensors.size(); ++i) {
    const TensorRef& ref = w.tensors[i];
    if (ref.storage < 0) continue;
    lowering::ViewLayout& v = layouts[i];
    v.sizes = ref.tensor.sizes().vec();
    v.strides = ref.tensor.strides().vec();
    v.storage_numel = w.storage_numels[ref.storage];
    if (ref.has_offset) {
      v.offset = b.arg(hlo::Type(DType::S64, {}));
      int64_t length = v.window_length();
      v.window_fits = length >= 0 && ref.tensor.storage_offset() + length <= v.storage_numel;
      plan->params.push_back({ParamKind::Offset, static_cast<int>(i), DType::S64});
    }
  }
  std::vector<hlo::Value> scalar_values;
  for (size_t s = 0; s < w.scalars.size(); ++s) {
    DType d = scalar_param_dtype(w.scalars[s].value, compute);
    // CPU scalar tensors keep their own dtype (they take part in promotion as tensors).
    for (const TensorRef& t : w.tensors) {
      if (t.storage < 0 && t.arg == w.scalars[s].arg) d = to_hlo(t.tensor.scalar_type());
    }
    scalar_values.push_back(b.arg(hlo::Type(d, {})));
    plan->params.push_back({ParamKind::Scalar, static_cast<int>(s), d});
  }

  lowering::Context ctx{b};
  ctx.compute_dtype = compute;
  if (w.wants_generator) {
    ctx.rng_key = b.arg(hlo::Type(DType::U64, {2}));
    plan->params.push_back({ParamKind::RngKey, 0, DType::U64});
  }
  for (const Target& t : plan->targets) ctx.out_types.push_back(hlo::Type(to_hlo(t.dtype), t.sizes));

  // Reads: each tensor argument is extracted from its storage parameter.
  auto read = [&](size_t i) {
    const TensorRef& ref = w.tensors[i];
    if (ref.storage < 0) {
      for (size_t s = 0; s < w.scalars.size(); ++s) {
        if (w.scalars[s].arg == ref.arg) return scalar_values[s];
      }
    }
    hlo::Value flat = hlo::bitcast_convert(b, storage_values[ref.storage], to_hlo(ref.tensor.scalar_type()));
    return lowering::read_view(b, flat, layouts[i]);
  };
  const auto& schema_args = schema.arguments();
  size_t tensor_cursor = 0, scalar_cursor = 0;
  for (size_t a = 0; a < num_args; ++a) {
    const c10::IValue& v = stack[first + a];
    Arg arg;
    if (v.isNone() || v.isGenerator()) {
      arg.kind = Arg::Kind::None;
    } else if (v.isTensor()) {
      arg.kind = v.toTensor().defined() ? Arg::Kind::Tensor : Arg::Kind::None;
      if (v.toTensor().defined()) {
        arg.is_wrapped_scalar = w.tensors[tensor_cursor].storage < 0;
        arg.tensor = read(tensor_cursor++);
        if (arg.is_wrapped_scalar) ++scalar_cursor;
      }
    } else if (v.isTensorList() || v.isOptionalTensorList()) {
      arg.kind = Arg::Kind::TensorList;
      // Same item view as walk_arguments: None entries and undefined tensors walked no TensorRef.
      std::vector<at::Tensor> items;
      if (v.isTensorList()) {
        items = v.toTensorVector();
      } else {
        for (const std::optional<at::Tensor> t : v.toOptionalTensorList()) items.push_back(t.has_value() ? *t : at::Tensor());
      }
      for (const at::Tensor& item : items) {
        arg.tensors.push_back(item.defined() ? read(tensor_cursor++) : hlo::Value{});
      }
    } else if (is_scalar_list_arg(schema_args[a]) && v.isList()) {
      // Scalar[]: a list of runtime 0-d values (Kind::TensorList, one entry per element).
      arg.kind = Arg::Kind::TensorList;
      arg.is_wrapped_scalar = true;
      while (scalar_cursor < w.scalars.size() && w.scalars[scalar_cursor].arg == static_cast<int>(a)) {
        arg.tensors.push_back(scalar_values[scalar_cursor++]);
      }
    } else if (w.scalars.size() > scalar_cursor && w.scalars[scalar_cursor].arg == static_cast<int>(a)) {
      arg.kind = Arg::Kind::Tensor;
      arg.is_wrapped_scalar = true;
      arg.tensor = scalar_values[scalar_cursor++];
    } else if (v.isInt()) {
      bool is_dtype = false;
      auto type = schema_args[a].type();
      if (type->kind() == c10::TypeKind::OptionalType) type = type->containedType(0);
      is_dtype = type->kind() == c10::TypeKind::ScalarTypeType;
      arg.kind = is_dtype ? Arg::Kind::ScalarType : Arg::Kind::Int;
      arg.i = v.toInt();
      if (is_dtype) arg.dtype = to_hlo(static_cast<c10::ScalarType>(v.toInt()));
    } else if (v.isDouble()) {
      arg.kind = Arg::Kind::Double;
      arg.d = v.toDouble();
    } else if (v.isBool()) {
      arg.kind = Arg::Kind::Bool;
      arg.b = v.toBool();
    } else if (v.isString()) {
      arg.kind = Arg::Kind::String;
      arg.s = v.toStringRef();
    } else if (v.isIntList()) {
      arg.kind = Arg::Kind::IntList;
      arg.ints = v.toIntVector();
    } else if (v.isBoolList()) {
      arg.kind = Arg::Kind::IntList;
      for (bool x : v.toBoolList()) arg.ints.push_back(x);
    } else {
      arg.kind = Arg::Kind::None;
    }
    ctx.args.push_back(std::move(arg));
  }

  const lowering::Rule* rule = lowering::find_rule(rule_name);
  std::vector<hlo::Value> results = (*rule)(ctx);
  TORCH_CHECK(results.size() == plan->targets.size(), plan->op_name, ": lowering returned ",
              results.size(), " results for ", plan->targets.size(), " outputs");

  // Module results: functional outputs (flattened in memory order), then written storages.
  std::vector<hlo::Value> module_results;
  std::vector<hlo::Value> current(storage_values);
  for (size_t r = 0; r < results.size(); ++r) {
    const Target& t = plan->targets[r];
    if (t.undefined) continue;
    hlo::Value value = hlo::convert(b, results[r], to_hlo(t.dtype));
    TORCH_CHECK(value.shape() == t.sizes, plan->op_name, ": lowering produced shape ",
                c10::IntArrayRef(value.shape()), " but PyTorch expects ", c10::IntArrayRef(t.sizes));
    if (t.functional) {
      std::vector<int64_t> order = memory_order(t.sizes, t.strides);
      int64_t numel = 1;
      for (int64_t s : t.sizes) numel *= s;
      module_results.push_back(hlo::reshape(b, hlo::transpose(b, value, order), {numel}));
    } else {
      const TensorRef& ref = w.tensors[t.tensor];
      hlo::Value flat = hlo::bitcast_convert(b, current[ref.storage], to_hlo(t.dtype));
      try {
        current[ref.storage] = lowering::write_view(b, flat, layouts[t.tensor], value);
      } catch (const std::invalid_argument& e) {
        TORCH_CHECK(false, plan->op_name, ": ", e.what());
      }
    }
  }
  for (size_t k = 0; k < plan->written_storages.size(); ++k) {
    module_results.push_back(hlo::bitcast_convert(b, current[plan->written_storages[k]], plan->written_dtypes[k]));
  }
  for (const auto& [failed, message] : b.assertions()) {
    module_results.push_back(hlo::reshape(b, failed, {}));
    plan->check_messages.push_back(plan->op_name + ": " + message);
  }
  std::string text = b.module(module_results);
  pjrt::CompileOptions options;
  options.device_assignment = {runtime().client().devices().at(w.device).id};
  try {
    plan->exe = get_or_compile(text, options, plan->op_name, &plan->aot);
  } catch (const pjrt::PjrtError& e) {
    TORCH_CHECK(false, plan->op_name, ": the PJRT plugin rejected the lowered module: ", e.what(),
                "\n--- module ---\n", text);
  }
  return plan;
}

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

void boxed_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  size_t num_args = op.schema().arguments().size();
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
