#include "program/program.h"

#include <limits>

#include "hlo/ops.h"

namespace tpu::program {

Program::Program(std::string label) : label_(std::move(label)) {}

int Program::storage(const StorageSlot& slot) {
  auto it = slot_of_binding_.find(slot.binding);
  if (it != slot_of_binding_.end()) return it->second;
  SlotState s;
  s.slot = slot;
  Type type(slot.dtype, slot.layout.dims);
  if (slot.unwritten) {
    s.initial = hlo::zeros(b_, type);
  } else {
    hlo::ArgOptions options;
    options.sharding = slot.sharding;
    s.initial = b_.arg(type, options);
    s.arg_position = num_args_++;
    params_.push_back({Param::Kind::Storage, slot.binding, slot.dtype});
  }
  s.current = s.initial;
  slots_.push_back(std::move(s));
  int index = static_cast<int>(slots_.size()) - 1;
  slot_of_binding_[slot.binding] = index;
  return index;
}

Value Program::offset(int binding, int64_t storage_elements) {
  auto it = offsets_.find(binding);
  if (it != offsets_.end()) return it->second;
  // 32 bits where the storage has fewer than 2^31 elements: a TPU emulates s64 (libtpu splits
  // every s64 value into u32 halves), and the offset only indexes this storage.
  const DType dtype = storage_elements <= std::numeric_limits<int32_t>::max() ? DType::S32 : DType::S64;
  Value v = b_.arg(Type(dtype, {}));
  ++num_args_;
  params_.push_back({Param::Kind::Offset, binding, dtype});
  return offsets_[binding] = v;
}

Value Program::scalar(DType dtype, int binding, std::optional<DType> passed) {
  DType as = passed.value_or(dtype);
  Value v = b_.arg(Type(as, {}));
  ++num_args_;
  params_.push_back({Param::Kind::Scalar, binding, as});
  return as == dtype ? v : hlo::convert(b_, v, dtype);
}

Value Program::rng_key(int binding) {
  Value v = b_.arg(Type(DType::U64, {2}));
  ++num_args_;
  params_.push_back({Param::Kind::RngKey, binding, DType::U64});
  return v;
}

namespace {
ViewAccess access_of(const View& view, Value offset) {
  ViewAccess a;
  a.sizes = view.sizes;
  a.strides = view.strides;
  a.access = view.access;
  a.offset = offset;
  return a;
}
}  // namespace

Value Program::read(int slot, const View& view) {
  SlotState& s = slots_.at(slot);
  Value typed = hlo::bitcast_convert(b_, s.current, view.dtype);
  Value off = view.offset_binding >= 0 ? offset(view.offset_binding, typed.type.numel()) : Value{};
  return read_view(b_, typed, access_of(view, off));
}

void Program::write(int slot, const View& view, Value value) {
  SlotState& s = slots_.at(slot);
  Value typed = hlo::bitcast_convert(b_, s.current, view.dtype);
  Value off = view.offset_binding >= 0 ? offset(view.offset_binding, typed.type.numel()) : Value{};
  try {
    s.current = write_view(b_, typed, access_of(view, off), hlo::convert(b_, value, view.dtype));
  } catch (const std::invalid_argument& e) {
    throw ProgramError(label_ + ": " + e.what());
  }
  s.written = true;
  s.written_dtype = view.dtype;
}

std::vector<Value> Program::apply(const lowering::Rule& rule, std::vector<lowering::Arg> args,
                                  const std::vector<std::optional<Type>>& out_types, DType compute_dtype,
                                  Value rng_key) {
  lowering::Context ctx{b_};
  ctx.args = std::move(args);
  for (const std::optional<Type>& t : out_types) ctx.out_types.push_back(t.value_or(Type()));
  ctx.compute_dtype = compute_dtype;
  ctx.rng_key = rng_key;
  std::vector<Value> results = rule(ctx);
  while (check_labels_.size() < b_.assertions().size()) {
    check_labels_.push_back(label_);
    check_owners_.push_back(owner_);
  }
  if (results.size() != out_types.size()) {
    throw ProgramError(label_ + ": lowering returned " + std::to_string(results.size()) +
                       " results for " + std::to_string(out_types.size()) + " outputs");
  }
  for (size_t r = 0; r < results.size(); ++r) {
    if (!results[r].valid() || !out_types[r].has_value()) continue;
    const Type& want = *out_types[r];
    results[r] = hlo::convert(b_, results[r], want.dtype);
    if (results[r].shape() != want.shape) {
      throw ProgramError(label_ + ": lowering produced shape " + results[r].type.str() +
                         " but PyTorch expects " + want.str());
    }
  }
  return results;
}

void Program::output(Value value, int binding, const std::vector<int64_t>& memory_order, LayoutPolicy policy) {
  Value dense = hlo::transpose(b_, value, memory_order);
  if (policy == LayoutPolicy::Flat) dense = hlo::reshape(b_, dense, {dense.type.numel()});
  Result r{Result::Kind::Output, binding, dense.dtype(), Layout{dense.shape()}, ""};
  outputs_.emplace_back(dense, std::move(r));
}

void Program::discard(int binding) {
  auto it = slot_of_binding_.find(binding);
  if (it != slot_of_binding_.end()) slots_[it->second].written = false;
}

Module Program::finish() {
  Module m;
  std::vector<Value> values;
  for (const auto& [value, result] : outputs_) {
    values.push_back(value);
    m.results.push_back(result);
  }
  for (const SlotState& s : slots_) {
    if (!s.written) continue;
    Value v = hlo::bitcast_convert(b_, s.current, s.written_dtype);
    // Donation: the parameter's buffer becomes this result (same type required).
    if (s.arg_position >= 0 && s.written_dtype == s.slot.dtype) {
      b_.set_alias(static_cast<size_t>(s.arg_position), static_cast<int>(values.size()));
    }
    values.push_back(v);
    m.results.push_back({Result::Kind::Storage, s.slot.binding, s.written_dtype, s.slot.layout, ""});
  }
  for (size_t c = 0; c < b_.assertions().size(); ++c) {
    const hlo::Check& check = b_.assertions()[c];
    const std::string& label = c < check_labels_.size() ? check_labels_[c] : label_;
    int owner = c < check_owners_.size() ? check_owners_[c] : owner_;
    values.push_back(hlo::reshape(b_, check.failed, {}));
    m.results.push_back({Result::Kind::Assertion, 0, DType::Pred, Layout{{}}, label + ": " + check.message, check.kind, owner});
  }
  m.text = b_.module(values);
  m.params = params_;
  return m;
}

}  // namespace tpu::program
