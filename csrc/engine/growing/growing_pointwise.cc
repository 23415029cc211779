// Pointwise ops, full reductions and aranges over a growing dim (growing_dims.h).
//
// With a padded batch, generate() rebuilds the 4-D attention mask every step from tensors whose
// last dim is the sequence length: arange(kv_length) + offset, compared with the query position,
// and-ed with the 2-D padding mask gathered at those positions, then turned into an additive
// float mask. Each of those ops would compile once per length. Here they run over the whole
// capacity instead: a pointwise op whose growing arguments agree on one dim (the others
// broadcast along it) computes every row of the capacity and returns a padded prefix; a full
// reduction masks the rows past the length with its identity; and an arange whose length grows
// step by step and is that of a live growing tensor is made with its capacity, so the mask's key
// positions grow with the cache they index. Values are exactly the rule's: rows past the length
// are computed and never read.
#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <mutex>

#include "engine/call/lowered_kernel.h"
#include "engine/device/storage.h"
#include "engine/growing/growing_dims.h"
#include "lowering/registry.h"

namespace tpu::engine {

bool takes_pointwise_growth(const c10::FunctionSchema& schema, bool pointwise_tag) {
  return pointwise_tag && !schema.is_mutable() && takes_pointwise_arguments(schema);
}

bool takes_inplace_pointwise_growth(const c10::FunctionSchema& schema, bool pointwise_tag) {
  const std::string& name = schema.name();
  if (!pointwise_tag || name.empty() || name.back() != '_' || schema.arguments().empty()) return false;
  const c10::AliasInfo* self = schema.arguments()[0].alias_info();
  if (self == nullptr || !self->isWrite()) return false;
  // Only self is written (not an out= or a second written argument).
  for (size_t a = 1; a < schema.arguments().size(); ++a) {
    if (schema.arguments()[a].alias_info() != nullptr && schema.arguments()[a].alias_info()->isWrite()) return false;
  }
  return takes_pointwise_arguments(schema);
}

bool takes_pointwise_arguments(const c10::FunctionSchema& schema) {
  if (schema.returns().size() != 1 ||
      schema.returns()[0].type()->kind() != c10::TypeKind::TensorType) {
    return false;
  }
  for (const c10::Argument& a : schema.arguments()) {
    // By name: the schema type of a memory format is an int.
    std::string type = a.type()->str();
    if (a.name() == "memory_format" || a.name() == "generator" || type.find("Generator") != std::string::npos ||
        type.find("[]") != std::string::npos) {
      return false;
    }
  }
  return true;
}

namespace {
// The defined tensor arguments from `first` on.
std::vector<at::Tensor> tensor_operands(const torch::jit::Stack& stack, size_t first) {
  std::vector<at::Tensor> operands;
  for (size_t i = first; i < stack.size(); ++i) {
    if (stack[i].isTensor() && stack[i].toTensor().defined()) operands.push_back(stack[i].toTensor());
  }
  return operands;
}
}  // namespace

bool pointwise_over_capacity(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!growing_dims_enabled()) return false;
  size_t num_args = op.schema().arguments().size();
  size_t first = stack->size() - num_args;
  // The common case first, without allocating: no operand has a growable storage.
  bool any_growable = false;
  int64_t rank = 0;
  for (size_t i = first; i < stack->size(); ++i) {
    const c10::IValue& v = (*stack)[i];
    if (!v.isTensor() || !v.toTensor().defined()) continue;
    const at::Tensor& t = v.toTensor();
    rank = std::max<int64_t>(rank, t.dim());
    any_growable = any_growable || (t.is_privateuseone() && storage_buffer(t).growable);
  }
  if (!any_growable) return false;
  std::vector<at::Tensor> operands = tensor_operands(*stack, first);
  // In the result's coordinates; operands may grow along two dims (query against key positions).
  std::optional<Spare> grows = shared_growth(operands, rank, /*square=*/true);
  if (!grows) return false;  // nothing on the stack changed yet: the rule's path
  // A rule that checks operand values (an integer divisor of zero) would check the spare rows too.
  const c10::OperatorName& name = op.operator_name();
  if (lowering::checks_values(lowering::rule_for(name.name.substr(6), name.overload_name))) return false;
  for (size_t i = first; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (!v.isTensor() || !v.toTensor().defined()) continue;
    at::Tensor t = v.toTensor();
    if (std::optional<Spare> g = spare_rows(t)) {
      v = whole_capacity(t, g->dim, g->capacity);
    } else if (std::optional<Spare> sq = square_rows(t)) {
      v = whole_square(t, *sq);
    }
  }
  run_lowered(op, stack);
  at::Tensor result = stack->back().toTensor();
  TORCH_INTERNAL_ASSERT(result.dim() == rank && result.size(grows->dim) == grows->capacity &&
                            (grows->dim2 < 0 || result.size(grows->dim2) == grows->capacity),
                        op.schema().name(), " over capacity: result ", result.sizes());
  stack->back() = grows->dim2 >= 0 ? as_padded_square(result, grows->dim, grows->dim2, grows->length)
                                   : as_padded_prefix(result, grows->dim, grows->length);
  return true;
}

namespace {
// inplace_pointwise_over_capacity (below) for a square that is the only tensor of its storage
// (full_like's fill_ of a square): its other operands are scalars or 0-d tensors.
bool inplace_over_square(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t first,
                         const at::Tensor& self) {
  std::optional<Spare> own = square_rows(self);
  if (!own) return false;
  for (size_t i = first + 1; i < stack->size(); ++i) {
    const c10::IValue& v = (*stack)[i];
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().dim() > 0) return false;
  }
  const c10::OperatorName& name = op.operator_name();
  if (lowering::checks_values(lowering::rule_for(name.name.substr(6), name.overload_name))) return false;
  (*stack)[first] = whole_square(self, *own);
  run_lowered(op, stack);
  stack->back() = self;
  return true;
}
}  // namespace

// In-place pointwise ops on a padded prefix that is the only tensor of its storage (autograd's
// in-place sum of two gradients of one tensor, x.add_(y)): the op over the whole capacity, which
// writes the spare rows too. Another tensor of the same storage (a slice of a longer prefix, a
// view from row k) may hold true rows there, so shared storages keep the exact path.
bool inplace_pointwise_over_capacity(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!growing_dims_enabled()) return false;
  size_t num_args = op.schema().arguments().size();
  size_t first = stack->size() - num_args;
  if (!(*stack)[first].isTensor()) return false;
  const at::Tensor self = (*stack)[first].toTensor();
  if (!self.defined() || !self.is_privateuseone() || !storage_buffer(self).growable) return false;
  // The stack's IValue and `self` share one TensorImpl: one reference to the storage.
  if (self.storage().use_count() != 1) return false;
  std::optional<Spare> own = spare_rows(self);
  if (!own) return inplace_over_square(op, stack, first, self);
  std::optional<Spare> grows = shared_growth(tensor_operands(*stack, first), self.dim());
  if (!grows || grows->dim != own->dim) return false;
  const c10::OperatorName& name = op.operator_name();
  if (lowering::checks_values(lowering::rule_for(name.name.substr(6), name.overload_name))) return false;
  for (size_t i = first; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (!v.isTensor() || !v.toTensor().defined()) continue;
    if (std::optional<Spare> g = spare_rows(v.toTensor())) v = whole_capacity(v.toTensor(), g->dim, g->capacity);
  }
  run_lowered(op, stack);
  stack->back() = self;
  return true;
}

// For the rules that declare PaddedOperands::FullReduction (sum, all and any of every element).
bool reduction_over_capacity(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  size_t num_args = op.schema().arguments().size();
  c10::IValue& self_value = (*stack)[stack->size() - num_args];
  std::optional<Spare> s = spare_rows(self_value.toTensor());
  if (!s) return false;
  const at::Tensor self = self_value.toTensor();
  // Rows past the length become the reduction's identity.
  at::Tensor identity = at::scalar_tensor(op.schema().name() == "aten::all" ? 1 : 0, self.options());
  self_value = at::where(rows_below(s->capacity, s->length, s->dim, self.dim(), self),
                         whole_capacity(self, s->dim, s->capacity), identity);
  run_lowered(op, stack);
  return true;
}

namespace {
// The latest aranges: their lengths and the capacity each was made over (0: exact).
struct ArangeCall {
  int64_t length = 0, capacity = 0;
};
std::mutex g_arange_mu;
std::array<ArangeCall, 32> g_aranges{};
size_t g_arange_next = 0;

void note_arange(int64_t n, int64_t capacity) {
  std::lock_guard<std::mutex> lock(g_arange_mu);
  g_aranges[g_arange_next++ % g_aranges.size()] = {n, capacity};
}

}  // namespace

void forget_aranges() {
  std::lock_guard<std::mutex> lock(g_arange_mu);
  g_aranges.fill(ArangeCall{});
  g_arange_next = 0;
}

namespace {
// The latest remembered arange of length n: how many calls ago (1: the previous call; 0: none)
// and its capacity.
ArangeCall latest_arange(int64_t n, size_t* calls_ago) {
  std::lock_guard<std::mutex> lock(g_arange_mu);
  for (size_t back = 1; back <= g_aranges.size() && back <= g_arange_next; ++back) {
    const ArangeCall& a = g_aranges[(g_arange_next - back) % g_aranges.size()];
    if (a.length != n || n <= 0) continue;
    *calls_ago = back;
    return a;
  }
  *calls_ago = 0;
  return {};
}

// The capacity arange(n) is made over, or nullopt for an exact one. A length that grows step by
// step (arange(n - 1) came after the latest arange(n), as a decode loop's arange(kv_length) does)
// takes the capacity of a live growing tensor of length n. A length seen again since (a static
// cache's fixed kv_length, the second mask of one step) repeats the latest decision for it, so
// one kind of call always gets one layout: a compiled step that takes the mask as an input sees
// the same strides every call, whatever ran before (Dynamo guards them).
std::optional<int64_t> arange_capacity(int64_t n) {
  size_t since_n = 0, since_shorter = 0;
  ArangeCall latest = latest_arange(n, &since_n);
  latest_arange(n - 1, &since_shorter);
  if (since_shorter > 0 && (since_n == 0 || since_shorter < since_n)) return capacity_of_grown_length(n);
  if (since_n > 0 && latest.capacity > 0) return latest.capacity;
  return std::nullopt;
}
}  // namespace

bool arange_over_capacity(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (EngineArange::active() || !growing_dims_enabled() || op.schema().overload_name() != "start_out") return false;
  size_t n = stack->size();
  at::Tensor out = (*stack)[n - 1].toTensor();
  at::Scalar start = (*stack)[n - 4].toScalar(), step = (*stack)[n - 2].toScalar();
  if (out.dim() != 1 || out.numel() == 0 || !at::isIntegralType(out.scalar_type(), /*includeBool=*/false) ||
      !start.isIntegral(false) || !step.isIntegral(false) || out.storage_offset() != 0 ||
      out.storage().use_count() != 1) {
    return false;
  }
  std::optional<int64_t> capacity = arange_capacity(out.numel());
  note_arange(out.numel(), capacity.value_or(0));
  // A prompt's positions (cache_position = arange(past, past + length)) share its bucket.
  if (!capacity && bucketing_enabled()) capacity = capacity_of_bucketed_length(out.numel());
  if (!capacity) return false;
  // The same start and step over the whole capacity (integer steps: the rows past the length
  // continue the sequence), then `out` becomes the padded prefix of that storage.
  at::Tensor whole = at::empty({*capacity}, out.options());
  {
    EngineArange own;  // the capacity's own arange takes the rule
    at::arange_out(whole, start, start.toLong() + step.toLong() * *capacity, step);
  }
  int64_t length = out.numel();
  out.set_(whole.storage(), 0, {length}, {1});
  mark_growable(out);
  torch::jit::drop(*stack, 4);
  torch::jit::push(*stack, out);
  return true;
}

}  // namespace tpu::engine
