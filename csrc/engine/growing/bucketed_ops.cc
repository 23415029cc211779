// Ops over a padded prefix's whole capacity with its length a runtime size (issue 27).
//
// A padded prefix (growing_dims.h: a prompt's input_ids uploaded into a bucket, everything
// computed from them, a KV cache) used to be read by most ops as an exact-size view, so every
// new length compiled the op again. Here the op's own rule runs over the capacity instead, with
// the operand's dim marked as holding `length` rows (runtime_sizes.h -> hlo::with_runtime_size):
// XLA's dynamic padder masks the rows past the length in every reduction and contraction over
// the dim, whatever they hold, so the values are exact and the module depends on the bucket
// only. Which result dims carry the padding is read from PyTorch's own meta kernels, run at the
// true sizes and at the capacity: a result dim that is the length in one and the capacity in the
// other becomes a padded prefix again; any other difference (a reshape that mixes the dim into
// another) leaves the call to the exact path.
//
// Only ops whose rules declare how they take padded operands (lowering/registry.h, beside each
// rule: contractions, reductions built on stablehlo.reduce, softmax, prefix scans, row-wise
// gathers of padded indices, counts only where the padded dim is kept, batched solves). Never
// in-place or out= ops (but index_copy_ into an exact destination), RNG, sort or flips.
#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "engine/call/lowered_kernel.h"
#include "engine/call/runtime_sizes.h"
#include "engine/compile/metrics.h"
#include "engine/device/storage.h"
#include "engine/growing/growing_dims.h"
#include "lowering/registry.h"

namespace tpu::engine {
namespace {

using lowering::PaddedOperands;

// How ATen op `base`.`overload` takes padded operands, declared beside its rule
// (lowering/registry.h).
std::optional<PaddedOperands> padded_operands_of(const std::string& base, const std::string& overload) {
  std::string rule = lowering::rule_for(base, overload);
  return rule.empty() ? std::nullopt : lowering::padded_operands(rule);
}

// "aten::sum" overload "dim_IntList" -> "sum.dim_IntList", as the list names ops.
std::string full_name(const c10::OperatorName& name) {
  return name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
}

// Where a padded operand sits on the stack.
struct Padded {
  size_t slot;
  int elem;  // list element, -1 for a tensor argument
  Spare spare;
};

// Calls f(tensor, stack slot, list element or -1) for every defined tensor argument from
// `first` on; where f returns true the (changed) tensor replaces the argument. A list is
// replaced by a new list, never changed in place (the caller may hold it).
template <typename F>
void for_each_tensor(torch::jit::Stack& stack, size_t first, F&& f) {
  for (size_t i = first; i < stack.size(); ++i) {
    c10::IValue& v = stack[i];
    if (v.isTensor()) {
      at::Tensor t = v.toTensor();
      if (t.defined() && f(t, i, -1)) v = t;
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list = v.toTensorList();
      c10::List<at::Tensor> copy;
      bool changed = false;
      for (size_t e = 0; e < list.size(); ++e) {
        at::Tensor t = list.get(e);
        changed |= t.defined() && f(t, i, static_cast<int>(e));
        copy.push_back(t);
      }
      if (changed) v = copy;
    }
  }
}

// The results' sizes from PyTorch's meta kernel, with each tpu tensor argument replaced by a
// meta tensor of its sizes and strides (padded ones by their whole capacity when `capacity`).
std::optional<std::vector<std::vector<int64_t>>> meta_result_sizes(const c10::OperatorHandle& op,
                                                                    const torch::jit::Stack& stack, size_t first,
                                                                    const std::vector<Padded>& padded,
                                                                    bool capacity) {
  torch::jit::Stack meta(stack.begin() + first, stack.end());
  for_each_tensor(meta, 0, [&](at::Tensor& t, size_t slot, int elem) {
    if (!t.is_privateuseone()) return false;
    at::Tensor source = t;
    for (const Padded& p : padded) {
      if (capacity && p.slot == first + slot && p.elem == elem) {
        source = p.spare.dim2 >= 0 ? whole_square(t, p.spare) : whole_capacity(t, p.spare.dim, p.spare.capacity);
      }
    }
    t = at::empty_strided(source.sizes(), source.strides(), source.options().device(c10::kMeta));
    return true;
  });
  try {
    op.callBoxed(meta);
  } catch (const std::exception&) {
    // No meta kernel, an invalid call (the exact path raises its error), or shapes that only
    // agree at the true sizes (a padded operand contracted with an exact one).
    return std::nullopt;
  }
  std::vector<std::vector<int64_t>> sizes;
  for (const c10::IValue& v : meta) {
    if (!v.isTensor()) return std::nullopt;
    sizes.push_back(v.toTensor().sizes().vec());
  }
  return sizes;
}

// What the two meta runs decided for a form of call: whether it runs over the capacity, and
// each result's padded dim (-1: none). The meta runs cost more than the call (a Python
// decomposition for mean, var or cat: ~0.3 ms each on a 2-core VM), and every call of a
// prefill or a decode step over a growing cache made them again.
struct Decision {
  bool bucketed;
  std::vector<int64_t> result_dims;
  std::vector<int64_t> result_dims2;  // a square result's second padded dim, else -1
};
std::mutex g_decisions_mu;
std::unordered_map<std::string, Decision> g_decisions;
constexpr size_t kMaxDecisions = 1 << 16;
std::atomic<int64_t> g_decided{0}, g_reused{0};

// A size or integer argument as the decision sees it: `L` for the length, otherwise the value
// and which side of the length it lies on, so a form fixes every equality and order between
// the length and the call's other sizes (what PyTorch's shape checks compare).
void append_size(std::string& form, int64_t value, int64_t length) {
  if (value == length) {
    form += 'L';
    return;
  }
  form += std::to_string(value);
  form += value < length ? '<' : '>';
}

// The call's form: the op, and per argument its kind and value, a tensor's device, dtype and
// sizes, and how it is padded. nullopt for arguments it cannot spell (the call then decides
// afresh). Calls of one form differ only in the length, which the meta kernels of the ops that
// declare padded operands (contractions, reductions, cat, softmax, gathers, scans) treat alike.
std::optional<std::string> call_form(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t first,
                                     const std::vector<Padded>& padded, int64_t length) {
  if (length < 2) return std::nullopt;  // a length of 1 broadcasts: keep it apart
  std::string form = full_name(op.operator_name());
  auto tensor = [&](const at::Tensor& t, size_t slot, int elem) {
    if (!t.defined()) {
      form += "U;";
      return;
    }
    form += 'T';
    form += std::to_string(static_cast<int>(t.device().type()));
    form += c10::toString(t.scalar_type());
    for (int64_t s : t.sizes()) {
      form += ',';
      append_size(form, s, length);
    }
    for (const Padded& p : padded) {
      if (p.slot == slot && p.elem == elem) {
        form += "@" + std::to_string(p.spare.dim) + "/" + std::to_string(p.spare.capacity);
        if (p.spare.dim2 >= 0) form += "&" + std::to_string(p.spare.dim2);
      }
    }
    form += ';';
  };
  for (size_t i = first; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      tensor(v.toTensor(), i, -1);
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list = v.toTensorList();
      form += '[';
      for (size_t e = 0; e < list.size(); ++e) tensor(list.get(e), i, static_cast<int>(e));
      form += "];";
    } else if (v.isNone()) {
      form += "N;";
    } else if (v.isBool()) {
      form += v.toBool() ? "t;" : "f;";
    } else if (v.isInt()) {
      form += 'i';
      append_size(form, v.toInt(), length);
      form += ';';
    } else if (v.isDouble()) {
      double d = v.toDouble();
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      form += "d" + std::to_string(bits) + ";";
    } else if (v.isIntList()) {
      form += "I";
      for (int64_t x : v.toIntList()) {
        append_size(form, x, length);
        form += ',';
      }
      form += ';';
    } else if (v.isString()) {
      form += "s" + v.toStringRef() + ";";
    } else if (v.isDevice()) {
      form += "D" + v.toDevice().str() + ";";
    } else {
      return std::nullopt;
    }
  }
  return form;
}

std::mutex g_stats_mu;
std::map<int64_t, BucketStats> g_stats;  // by capacity

// Calls whose bucketed module failed, by op name: each entry a signature (the tensor
// arguments' dtypes and sizes, any size equal to the true length written as L, and which of them
// are padded, along which dim, into what capacity). A failure refuses only calls like it, at
// every length: an op that fails over one set of operands (an attention mask sized to the true
// key length, which cannot broadcast over the capacity) keeps bucketing every other call.
std::mutex g_refused_mu;
std::unordered_map<std::string, std::unordered_set<std::string>> g_refused;

std::string call_signature(const torch::jit::Stack& stack, size_t first, const std::vector<Padded>& padded) {
  std::string sig;
  torch::jit::Stack copy(stack.begin() + first, stack.end());  // for_each_tensor takes a mutable stack
  for_each_tensor(copy, 0, [&](at::Tensor& t, size_t slot, int elem) {
    sig += std::to_string(slot) + ":" + std::to_string(elem) + ":" + std::string(c10::toString(t.scalar_type()));
    for (int64_t s : t.sizes()) sig += s == padded[0].spare.length ? std::string(",L") : "," + std::to_string(s);
    for (const Padded& p : padded) {
      if (p.slot == first + slot && p.elem == elem) {
        sig += "@" + std::to_string(p.spare.dim) + "/" + std::to_string(p.spare.capacity);
        if (p.spare.dim2 >= 0) sig += "&" + std::to_string(p.spare.dim2);
      }
    }
    sig += ";";
    return false;
  });
  return sig;
}

void refuse_bucketing(const std::string& name, std::string signature) {
  std::lock_guard<std::mutex> lock(g_refused_mu);
  g_refused[name].insert(std::move(signature));
}

bool refused(const std::string& name, const torch::jit::Stack& stack, size_t first, const std::vector<Padded>& padded) {
  {
    std::lock_guard<std::mutex> lock(g_refused_mu);
    if (g_refused.count(name) == 0) return false;  // the common case: no signature to build
  }
  std::string signature = call_signature(stack, first, padded);
  std::lock_guard<std::mutex> lock(g_refused_mu);
  return g_refused[name].count(signature) != 0;
}

// A view of a padded storage's rows from row k > 0 on: `labels[..., 1:]`, the shifted targets of
// a causal LM's loss (Transformers pads the labels by one ignored row, then drops the first). It
// is not a padded prefix (those start at row 0), so the loss took the exact path, and so did
// every op of the backward after it. `realigned` copies its rows k.. of the bucket to the front
// of a fresh bucket: a padded prefix of the same length, the copy keyed on the capacity.
struct Shifted {
  Spare spare;
  int64_t rows;  // k
};

std::optional<Shifted> shifted_rows(const at::Tensor& t) {
  if (t.numel() == 0 || t.is_conj() || t.is_neg()) return std::nullopt;
  const StorageBuffer& buffer = storage_buffer(t);
  const int64_t stride = buffer.padded_stride, capacity = buffer.padded_capacity;
  if (stride <= 0 || capacity <= 0 || t.storage_offset() % stride != 0) return std::nullopt;
  const int64_t rows = t.storage_offset() / stride;
  if (rows <= 0 || rows >= capacity) return std::nullopt;  // from row 0, or past the first batch's rows
  at::Tensor from_row_zero = t.as_strided(t.sizes(), t.strides(), t.storage_offset() - rows * stride);
  std::optional<Spare> s = spare_rows(from_row_zero);
  if (!s || s->dim2 >= 0 || s->capacity != capacity || t.stride(s->dim) != stride || s->length + rows > capacity) {
    return std::nullopt;
  }
  return Shifted{*s, rows};
}

at::Tensor realigned(const at::Tensor& t, const Shifted& shifted) {
  const Spare& s = shifted.spare;
  const int64_t stride = storage_buffer(t).padded_stride;
  std::vector<int64_t> sizes = t.sizes().vec();
  sizes[s.dim] = s.capacity;
  at::Tensor whole = t.as_strided(sizes, t.strides(), t.storage_offset() - shifted.rows * stride);
  // Rows k, k + 1, ... first, gathered by (arange(C) + k) % C: k is a runtime scalar of the
  // index, so the copy is keyed on the capacity alone (a view at row L - 1 of every prompt
  // would otherwise build one per length).
  at::Tensor index;
  {
    EngineArange engine;
    index = at::arange(s.capacity, t.options().dtype(at::kLong));
  }
  index = at::remainder(index + shifted.rows, s.capacity);
  return as_padded_prefix(at::index_select(whole, s.dim, index), s.dim, s.length);
}

}  // namespace

std::map<int64_t, BucketStats> bucket_stats() {
  std::lock_guard<std::mutex> lock(g_stats_mu);
  return g_stats;
}

void reset_bucket_stats() {
  std::lock_guard<std::mutex> lock(g_stats_mu);
  g_stats.clear();
  g_decided = 0;
  g_reused = 0;
}

BucketDecisions bucket_decisions() { return {g_decided.load(), g_reused.load()}; }

void mark_dynamic(const at::Tensor& t, int64_t dim) {
  TORCH_CHECK(t.is_privateuseone(), "mark_dynamic: expected a tpu tensor, got one on ", t.device());
  TORCH_CHECK(dim >= 0 && dim < t.dim(), "mark_dynamic: dim ", dim, " is out of range for a tensor of shape ", t.sizes());
  TORCH_CHECK(!t.is_conj() && !t.is_neg(), "mark_dynamic: resolve the conjugate/negative view first");
  TORCH_CHECK(t.is_contiguous() && t.storage_offset() == 0 && t.storage().use_count() == 1 &&
                  static_cast<size_t>(t.numel() * t.element_size()) == t.storage().nbytes(),
              "mark_dynamic: the tensor must own its storage, contiguous (shape ", t.sizes(), ", strides ", t.strides(),
              "): mark a fresh tensor, e.g. right after .to(\"tpu\") or .contiguous(), not a view");
  if (!bucketing_enabled() || t.numel() == 0) return;
  int64_t length = t.size(dim), capacity = bucket_for(length);
  if (capacity == length) return;  // a bucket's own length: nothing to pad
  adopt_padded_storage(t, zero_rows_to_capacity(t, dim, capacity).contiguous(), dim);
}

std::optional<std::string> bucketing_kind(const std::string& name) {
  size_t dot = name.find('.');
  std::optional<PaddedOperands> how =
      padded_operands_of(name.substr(0, dot), dot == std::string::npos ? "" : name.substr(dot + 1));
  if (!how) return std::nullopt;
  return lowering::padded_operands_name(*how);
}

namespace {
// clone(memory_format=contiguous) of a square padded mask (generate() makes its attention masks
// contiguous before the forward): a copy of the whole [C, C] bucket, the result square again, so
// attention still takes the mask over the bucket. Like a repeat's copy it keeps its spare rows,
// and is not contiguous; view() and reshape make it dense where that is in the way.
bool clone_square(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t first) {
  const c10::IValue& format = (*stack)[first + 1];
  if (format.isNone() || format.toInt() != static_cast<int64_t>(c10::MemoryFormat::Contiguous)) return false;
  const at::Tensor self = (*stack)[first].toTensor();
  std::optional<Spare> square = square_rows(self);
  if (!square) return false;
  (*stack)[first] = whole_square(self, *square);
  run_lowered(op, stack);
  stack->back() = as_padded_square(stack->back().toTensor(), square->dim, square->dim2, square->length);
  return true;
}

// `labels[..., 1:].contiguous()` of a batch of several (the shifted labels: a batch of one is
// contiguous already): rows k.. of the bucket copied to the front of a fresh one, a padded prefix
// like every contiguous copy of one (above), so the loss that takes it runs over the bucket.
bool clone_shifted(torch::jit::Stack* stack, size_t first) {
  const c10::IValue& format = (*stack)[first + 1];
  if (format.isNone() || format.toInt() != static_cast<int64_t>(c10::MemoryFormat::Contiguous)) return false;
  const at::Tensor self = (*stack)[first].toTensor();
  std::optional<Shifted> shifted = shifted_rows(self);
  if (!shifted) return false;
  at::Tensor copy = realigned(self, *shifted);
  stack->erase(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
  stack->emplace_back(std::move(copy));
  return true;
}

// Whether the call runs over the capacity, and which result dims carry the padding, from
// PyTorch's meta kernel at the true sizes and at the capacity.
// Rules that take squares (both dims of runtime length) and make them: those exact under the
// padder along any dim, and gathers at square indices.
bool takes_squares(PaddedOperands kind) {
  return kind == PaddedOperands::Exact || kind == PaddedOperands::IndicesOnly;
}

Decision decide(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t first,
                const std::vector<Padded>& padded, PaddedOperands kind, int64_t length, int64_t capacity) {
  const Decision refuse{false, {}};
  auto exact = meta_result_sizes(op, stack, first, padded, false);
  auto over = exact ? meta_result_sizes(op, stack, first, padded, true) : std::nullopt;
  if (!over || over->size() != exact->size()) return refuse;
  Decision decision{true, {}, {}};
  for (size_t r = 0; r < exact->size(); ++r) {
    const auto& e = (*exact)[r];
    const auto& c = (*over)[r];
    if (e.size() != c.size()) return refuse;
    int64_t dim = -1, dim2 = -1;
    for (size_t d = 0; d < e.size(); ++d) {
      if (e[d] == c[d]) continue;
      if (e[d] != length || c[d] != capacity) return refuse;  // not a padded prefix
      // A second padded dim makes a square ([L, L] of [C, C]: q @ k^T of padded q and k, an
      // embedding of square indices), for rules exact under the padder along any dim and gathers.
      if (dim >= 0 && (dim2 >= 0 || !takes_squares(kind))) return refuse;
      (dim < 0 ? dim : dim2) = static_cast<int64_t>(d);
    }
    if (dim < 0 && kind == PaddedOperands::KeepsDim) return refuse;  // a count over the padded dim
    // A contiguous copy (clone, reshape's copy) of a padded prefix keeps its spare rows. With
    // nothing but size-1 dims before the padded one (a batch of one) the result is contiguous;
    // with more (a left-padded batch of prompts, its attention output transposed back, a
    // repeat's copy) it is not, as a grown cat's result is not: view() and reshape's view
    // (growing_view.cc) make it dense first where the padding is in the way of a merge.
    if (kind == PaddedOperands::Contiguous && dim < 0) return refuse;
    decision.result_dims.push_back(dim);
    decision.result_dims2.push_back(dim2);
  }
  return decision;
}
}  // namespace

bool runs_over_capacity(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!growing_dims_enabled()) return false;
  size_t num_args = op.schema().arguments().size();
  size_t first = stack->size() - num_args;
  std::vector<Padded> padded, squares;
  bool any_growable = false;
  for_each_tensor(*stack, first, [&](at::Tensor& t, size_t slot, int elem) {
    if (t.is_privateuseone() && storage_buffer(t).growable) {
      any_growable = true;
      if (std::optional<Spare> s = spare_rows(t)) {
        padded.push_back({slot, elem, *s});
      } else if (std::optional<Spare> sq = square_rows(t)) {
        squares.push_back({slot, elem, *sq});
      }
    }
    return false;
  });
  if (padded.empty()) {  // the common case: decided before the op's name is built
    if (!any_growable) return false;
    if (op.schema().name() == "aten::clone") return clone_square(op, stack, first) || clone_shifted(stack, first);
    if (squares.empty()) return false;
  }
  const std::string name = full_name(op.operator_name());
  std::optional<PaddedOperands> how = padded_operands_of(op.operator_name().name.substr(6), op.operator_name().overload_name);
  if (!how || *how == PaddedOperands::FullReduction) return false;
  const PaddedOperands kind = *how;
  // Squares (T5's attention scores, position bias and the embedding of its buckets).
  if (!squares.empty()) {
    if (!takes_squares(kind)) {
      if (padded.empty()) return false;
    } else {
      padded.insert(padded.end(), squares.begin(), squares.end());
    }
  }
  if (op.schema().is_mutable() && kind != PaddedOperands::Scatter) return false;
  if (kind == PaddedOperands::IndicesOnly) {
    // The gathered rows' operand keeps its exact sizes even when its storage has spare rows (a
    // model's int64 buffer uploaded into a bucket): an index past its size still raises.
    padded.erase(std::remove_if(padded.begin(), padded.end(), [&](const Padded& p) { return p.slot == first; }),
                 padded.end());
    if (padded.empty()) return false;
  }
  // Shifted operands join a call whose padded operands share their length and capacity, as
  // copies that start at row 0 (the call's own stack holds the copies; the caller's tensors are
  // unchanged).
  std::vector<std::pair<Padded, int64_t>> shifted;  // operands that start at row k of a bucket, and k
  if (!op.schema().is_mutable()) {
    for_each_tensor(*stack, first, [&](at::Tensor& t, size_t slot, int elem) {
      if (!t.is_privateuseone() || !storage_buffer(t).growable) return false;
      if (kind == PaddedOperands::IndicesOnly && slot == first) return false;  // kept exact (above)
      for (const Padded& p : padded) {
        if (p.slot == slot && p.elem == elem) return false;
      }
      if (std::optional<Shifted> h = shifted_rows(t)) shifted.push_back({{slot, elem, h->spare}, h->rows});
      return false;
    });
  }
  if (!shifted.empty()) {
    const Spare& lead = padded[0].spare;
    for (const auto& [p, rows] : shifted) {
      if (p.spare.length != lead.length || p.spare.capacity != lead.capacity) return false;
    }
    for_each_tensor(*stack, first, [&](at::Tensor& t, size_t slot, int elem) {
      for (const auto& [p, rows] : shifted) {
        if (p.slot != slot || p.elem != elem) continue;
        t = realigned(t, Shifted{p.spare, rows});
        padded.push_back(p);
        return true;
      }
      return false;
    });
  }
  // One length and capacity for the call (q and k of one attention); others take the exact path.
  for (const Padded& p : padded) {
    if (p.spare.length != padded[0].spare.length || p.spare.capacity != padded[0].spare.capacity) return false;
  }
  const int64_t length = padded[0].spare.length, capacity = padded[0].spare.capacity;
  if (refused(name, *stack, first, padded)) return false;
  if (kind == PaddedOperands::Scatter) {
    // index_copy's destination is never padded.
    size_t source = first;
    for (const Padded& p : padded) {
      if (p.slot == source) return false;
    }
  }
  if (kind == PaddedOperands::StatsKeepDim) {
    // Every operand of the first padded one's rank is padded (a normalized dim leaves the
    // statistics with extent 1 there).
    const c10::IValue& lead = (*stack)[padded[0].slot];
    const int64_t rank = padded[0].elem < 0 ? lead.toTensor().dim() : lead.toTensorList().get(padded[0].elem).dim();
    bool all_padded = true;
    for_each_tensor(*stack, first, [&](at::Tensor& t, size_t slot, int elem) {
      if (t.dim() != rank) return false;
      bool is_padded = false;
      for (const Padded& p : padded) is_padded = is_padded || (p.slot == slot && p.elem == elem);
      all_padded = all_padded && is_padded;
      return false;
    });
    if (!all_padded) return false;
  }
  if (kind == PaddedOperands::RowsWithIndices) {
    // The gradient [..., L, H] and the indices [..., L], both padded at the same dim, and no
    // counts by frequency (scale_grad_by_freq counts every index, spare ones too).
    const c10::IValue& scale = (*stack)[first + 4];
    if (padded.size() != 2 || (scale.isBool() && scale.toBool())) return false;
    const Padded& a = padded[0].slot < padded[1].slot ? padded[0] : padded[1];
    const Padded& b = padded[0].slot < padded[1].slot ? padded[1] : padded[0];
    if (a.slot != first || b.slot != first + 1 || a.spare.dim != b.spare.dim) return false;
  }
  if (kind == PaddedOperands::BatchDims) {
    for (const Padded& p : padded) {
      const c10::IValue& v = (*stack)[p.slot];
      const at::Tensor t = p.elem < 0 ? v.toTensor() : v.toTensorList().get(p.elem);
      if (p.spare.dim >= t.dim() - 2) return false;  // a matrix dim: rows are not independent
    }
  }
  // Only clone(memory_format=contiguous) copies over the bucket (reshape's copy, generate()'s copy
  // of its ids); other formats follow the input's strides, which the padding would change.
  if (kind == PaddedOperands::Contiguous) {
    const c10::IValue& format = (*stack)[first + 1];
    if (format.isNone() || format.toInt() != static_cast<int64_t>(c10::MemoryFormat::Contiguous)) return false;
  }
  std::optional<std::string> form = call_form(op, *stack, first, padded, length);
  std::optional<Decision> decided;
  if (form) {
    std::lock_guard<std::mutex> lock(g_decisions_mu);
    auto found = g_decisions.find(*form);
    if (found != g_decisions.end()) decided = found->second;
  }
  if (decided) {
    g_reused.fetch_add(1, std::memory_order_relaxed);
  } else {
    g_decided.fetch_add(1, std::memory_order_relaxed);
    decided = decide(op, *stack, first, padded, kind, length, capacity);
    if (form) {
      std::lock_guard<std::mutex> lock(g_decisions_mu);
      if (g_decisions.size() >= kMaxDecisions) g_decisions.clear();
      g_decisions.emplace(std::move(*form), *decided);
    }
  }
  if (!decided->bucketed) return false;
  const std::vector<int64_t>& result_dims = decided->result_dims;
  // Run the rule over the whole capacities, each padded dim holding `length` rows at runtime.
  std::vector<c10::IValue> arguments(stack->begin() + first, stack->end());
  std::vector<RuntimeSize> sizes;
  std::vector<at::Tensor> keep_alive;
  for_each_tensor(*stack, first, [&](at::Tensor& t, size_t slot, int elem) {
    for (const Padded& p : padded) {
      if (p.slot != slot || p.elem != elem) continue;
      t = p.spare.dim2 >= 0 ? whole_square(t, p.spare) : whole_capacity(t, p.spare.dim, capacity);
      keep_alive.push_back(t);
      // A scan and independent batches run over the capacity without a runtime size.
      if (kind != PaddedOperands::Prefix && kind != PaddedOperands::BatchDims) {
        sizes.push_back({t.unsafeGetTensorImpl(), p.spare.dim, length, p.spare.dim2});
      }
      return true;
    }
    return false;
  });
  int64_t compiles_before = metrics().compiles.load();
  try {
    RuntimeSizeScope scope(std::move(sizes));
    run_lowered(op, stack);
  } catch (const std::exception&) {
    // The rule refused the capacities (operands that only agree at the true sizes, which the
    // meta kernel does not check) or the compiler's dynamic padder refused the module: calls like
    // this one keep the exact path from now on, and this call takes it too (its own errors are
    // raised there).
    stack->resize(first);
    stack->insert(stack->end(), arguments.begin(), arguments.end());
    refuse_bucketing(name, call_signature(*stack, first, padded));
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(g_stats_mu);
    BucketStats& b = g_stats[capacity];
    b.calls += 1;
    b.compiles += metrics().compiles.load() - compiles_before;
    b.rows += length;
    b.capacity_rows += capacity;
  }
  size_t results = result_dims.size();
  for (size_t r = 0; r < results; ++r) {
    c10::IValue& v = (*stack)[stack->size() - results + r];
    const int64_t dim2 = decided->result_dims2.empty() ? -1 : decided->result_dims2[r];
    if (dim2 >= 0) {
      v = as_padded_square(v.toTensor(), result_dims[r], dim2, length);
    } else if (result_dims[r] >= 0) {
      v = as_padded_prefix(v.toTensor(), result_dims[r], length);
    }
  }
  return true;
}

}  // namespace tpu::engine
