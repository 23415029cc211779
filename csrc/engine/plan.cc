#include "engine/plan.h"

#include <ATen/Functions.h>
#include <ATen/native/TypeProperties.h>

#include <algorithm>
#include <numeric>

#include "engine/dtypes.h"
#include "engine/executable_cache.h"
#include "engine/runtime.h"
#include "lowering/registry.h"
#include "lowering/views.h"

namespace tpu::engine {
namespace {

using lowering::Arg;

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
}  // namespace

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

}  // namespace tpu::engine
