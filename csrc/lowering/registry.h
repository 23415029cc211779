// The lowering table: ATen operator name -> rule that emits StableHLO for it.
//
// Rules know nothing about torch or about who drives them: the eager engine builds a one-op
// module per signature, the torch.compile backend builds one module per graph, and both call
// the same rules (docs/ARCHITECTURE.md, Lowering table).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "hlo/builder.h"
#include "hlo/ops.h"

namespace tpu::lowering {

using hlo::Builder;
using hlo::DType;
using hlo::Type;
using hlo::Value;

// One argument of an ATen op, in schema order, as a rule sees it.
struct Arg {
  enum class Kind { None, Tensor, TensorList, Int, Double, Bool, IntList, String, ScalarType };
  Kind kind = Kind::None;
  Value tensor;                // Tensor; Scalar operands arrive as runtime 0-d tensors
  // A runtime `float` argument (the fused optimizers' lr, betas, ...) also brings its rounding
  // residual, value - float(value), so float32 math can recover what the double held.
  Value low;
  bool is_wrapped_scalar = false;  // a Python number (weak type in promotion)
  std::vector<Value> tensors;  // TensorList (an entry may be unset for optional None)
  int64_t i = 0;
  double d = 0;
  bool b = false;
  std::vector<int64_t> ints;
  std::string s;
  DType dtype = DType::F32;

  bool is_none() const { return kind == Kind::None; }
};

// Thrown when a rule cannot lower this particular call (the engine then falls back to CPU).
class NotLowerable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A call PyTorch's CPU kernel rejects (argmax of bool, var of ints, ...): the drivers raise it as
// RuntimeError, or NotImplementedError when `not_implemented` (CPU: "... not implemented for
// 'Float'"), naming the op.
class InvalidCall : public std::runtime_error {
 public:
  explicit InvalidCall(const std::string& message, bool not_implemented = false)
      : std::runtime_error(message), not_implemented(not_implemented) {}
  bool not_implemented;
};

// Rejects dtypes a CPU kernel has no implementation for: "<op>" not implemented for '<dtype>'.
void require_dtype(bool supported, const std::string& op, DType t);

struct Context {
  Builder& b;
  std::vector<Arg> args;
  // Result types with PyTorch semantics (computed by the driver from meta tensors).
  std::vector<Type> out_types;
  // PyTorch's promoted type of the tensor and scalar operands (torch.result_type).
  DType compute_dtype = DType::F32;
  // Random ops: a tensor<2xui64> THREE_FRY key supplied by the driver (see random.cc).
  Value rng_key;

  const Arg& arg(size_t i) const;
  Value tensor(size_t i) const;  // throws if the argument is not a tensor
  bool has(size_t i) const { return i < args.size() && !args[i].is_none(); }
  int64_t int_arg(size_t i) const { return arg(i).i; }
  double double_arg(size_t i) const { return arg(i).kind == Arg::Kind::Int ? arg(i).i : arg(i).d; }
  bool bool_arg(size_t i) const { return arg(i).b; }
  const std::vector<int64_t>& ints(size_t i) const { return arg(i).ints; }
  const Type& out(size_t i = 0) const { return out_types.at(i); }
};

using Rule = std::function<std::vector<Value>(Context&)>;

void register_rule(const std::string& op_name, Rule rule);
// A rule only graphs use: view ops (eager views share storage and never run a module) and
// factories whose eager kernels are PyTorch's own. The eager engine registers no kernel for it.
void register_graph_rule(const std::string& op_name, Rule rule);
bool is_graph_only_rule(const std::string& op_name);
// Whether a rule lowers float8 operands or results (float8_rules.cc); the eager engine runs
// other calls with float8 values on the CPU.
bool lowers_float8(const std::string& rule_name);
const Rule* find_rule(const std::string& op_name);
std::vector<std::string> registered_ops();  // sorted
// The rule serving ATen op `name`.`overload` ("add_", "Tensor" -> "add.Tensor"; out= and
// in-place variants map to their functional rule), or "" if none.
std::string rule_for(const std::string& name, const std::string& overload);

// How a rule takes operands padded along one dim: a bucket's whole capacity with the true
// length a runtime size, which XLA's dynamic padder masks in every reduction and contraction over
// the dim (bounded dynamism, docs/bucketing.md). Declared beside the rule by its author, who knows
// whether it is exact there; eager calls (engine/growing/bucketed_ops.cc) and graphs compiled per
// bucket (torch_tpu/compile/trace_comparison.py) read it. Undeclared rules take the exact path.
enum class PaddedOperands {
  Exact,          // exact under the padder wherever the padded dim goes
  KeepsDim,       // exact only while the padded dim survives in every result (divides by a count)
  // A norm's backward: exact only while every operand of the input's rank is padded too (its
  // saved statistics keep the padded dim, so the dim was not normalized: the rule divides by
  // the normalized extent); its reductions over the padded dim (the weight's gradient) are sums.
  StatsKeepDim,
  IndicesOnly,    // a gather: only its index operand may be padded
  Contiguous,     // clone(memory_format=contiguous): only where a padded prefix is contiguous
  // A prefix scan along the padded dim: exact over the capacity without a runtime size (a row
  // reads only the rows before it), and run without one, as the scan's rule slices and pads along
  // the dim, which the oldest plugin's dynamic padder gets wrong (PJRT 0.81: a cumsum of 300 rows
  // in a bucket of 320 restarted at row 256).
  Prefix,
  // A write of padded rows into an exact destination at padded positions (a StaticCache's
  // index_copy_ of a prompt's keys at its cache positions): the padder drops the updates past the
  // length, whatever the spare positions hold. Only the destination must not be padded.
  Scatter,
  // A reduction of every element: the rows past the length become the reduction's identity first.
  FullReduction,
  // Independent batches (a batched triangular solve): exact over the capacity without a runtime
  // size while every padded dim is a batch dim, not one of the operands' last two.
  BatchDims,
  // embedding_dense_backward(grad, indices, ...): a scatter of the gradient's rows at the indices
  // into an exact table, exact under the padder (it drops the updates past the length) only while
  // the gradient and the indices are padded along the same dim; either one alone is not.
  RowsWithIndices,
};
void declare_padded_operands(const std::string& rule_name, PaddedOperands how);
std::optional<PaddedOperands> padded_operands(const std::string& rule_name);
// "exact", "keeps_dim", ... as the compiled-graph side names the kinds.
const char* padded_operands_name(PaddedOperands how);

// Rules that check their operands' values on the device (Builder::assert_false: an integer
// divisor of zero raises ZeroDivisionError). Run over a padded operand's whole capacity without a
// runtime size (engine/growing's pointwise path), the check would read the spare rows, whatever
// they hold, and raise for values the user never had: such calls take the exact path.
void declare_value_checks(const std::string& rule_name);
bool checks_values(const std::string& rule_name);

// Registers rules at static-initialization time: `static Registrar r({{"add.Tensor", fn}, ...});`
struct Registrar {
  Registrar(std::initializer_list<std::pair<const char*, Rule>> rules) {
    for (const auto& [name, rule] : rules) register_rule(name, rule);
  }
};

struct GraphRegistrar {
  GraphRegistrar(std::initializer_list<std::pair<const char*, Rule>> rules) {
    for (const auto& [name, rule] : rules) register_graph_rule(name, rule);
  }
};

// Declares how rules take padded operands: `static PaddedOperandsRegistrar p({{"mm", ...}});`
struct PaddedOperandsRegistrar {
  PaddedOperandsRegistrar(std::initializer_list<std::pair<const char*, PaddedOperands>> rules) {
    for (const auto& [name, how] : rules) declare_padded_operands(name, how);
  }
};

// Declares the rules that check operand values: `static ValueChecksRegistrar v({"fmod.Tensor"});`
struct ValueChecksRegistrar {
  ValueChecksRegistrar(std::initializer_list<const char*> rules) {
    for (const char* name : rules) declare_value_checks(name);
  }
};

// Shared helpers for rules.
int64_t wrap_dim(int64_t dim, int64_t rank);
std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t rank);
// Converts to `dtype` and broadcasts to `shape` (NumPy rules).
Value cast_to(Builder& b, Value x, DType dtype, const std::vector<int64_t>& shape);
// Whether `from` broadcasts to `to` (NumPy rules, `to` fixed).
bool broadcastable(const std::vector<int64_t>& from, const std::vector<int64_t>& to);
std::string shape_str(const std::vector<int64_t>& shape);  // "[2, 3]", as PyTorch prints sizes

}  // namespace tpu::lowering
