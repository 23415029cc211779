#include "engine/graph/graph_program.h"

#include <ATen/Functions.h>

#include <map>
#include <set>

#include "engine/call/program_binding.h"
#include "engine/call/promotion.h"
#include "engine/device/dtypes.h"
#include "hlo/ops.h"
#include "hlo/runtime_size.h"
#include "lowering/registry.h"

namespace tpu::engine::graph {
namespace {

using lowering::Arg;
using program::Value;

// Whether a node reads or produces float8 values.
bool touches_float8(const GraphSpec& spec, const Node& node) {
  auto f8 = [&](int id) { return id >= 0 && hlo::is_float8(spec.values.at(id).dtype); };
  for (const NodeArg& a : node.args) {
    for (int id : a.refs) {
      if (f8(id)) return true;
    }
  }
  for (int id : node.outputs) {
    if (f8(id)) return true;
  }
  return false;
}

// torch.result_type of a node's tensor and Scalar operands, as the eager engine computes it.
DType promoted_dtype(const GraphSpec& spec, const Node& node) {
  if (touches_float8(spec, node)) return DType::F32;  // PyTorch promotes no float8 type; rules use result types
  Promotion promotion;
  for (const NodeArg& a : node.args) {
    if (a.kind == NodeArg::Kind::Ref || a.kind == NodeArg::Kind::RefList) {
      for (int id : a.refs) {
        if (id < 0) continue;
        const ValueMeta& m = spec.values.at(id);
        promotion.add(at::empty(m.sizes, at::TensorOptions().dtype(to_torch(m.dtype)).device(c10::kMeta)));
      }
    } else if (a.kind == NodeArg::Kind::Number || a.kind == NodeArg::Kind::NumberList) {
      for (const Number& n : a.numbers) {
        promotion.add(n.kind == Number::Kind::Bool ? c10::Scalar(n.i != 0)
                      : n.kind == Number::Kind::Int ? c10::Scalar(n.i) : c10::Scalar(n.d));
      }
    }
  }
  return promotion.result();
}

// A Python number as a 0-d constant, typed like the eager engine types a runtime Scalar.
Value number_constant(hlo::Builder& b, const Number& n, DType compute) {
  switch (n.kind) {
    case Number::Kind::Bool:
      return hlo::constant(b, n.i != 0 ? 1 : 0, DType::Pred);
    case Number::Kind::Int:
      return hlo::reshape(b, hlo::constant_i64_vector(b, {n.i}, DType::S64), {});
    case Number::Kind::Float:
      return hlo::constant(b, n.d, (compute == DType::F64 || compute == DType::C128) ? DType::F64 : DType::F32);
  }
  return {};
}

std::string where(const Node& node, size_t index) {
  std::string s = "node " + std::to_string(index) + " (" + node.target + ")";
  if (!node.source.empty()) s += " from " + node.source;
  return s;
}

class GraphAssembler {
 public:
  GraphAssembler(const GraphSpec& spec, const OpCall& inputs)
      : spec_(spec), inputs_(inputs), p_(spec.name), values_(spec.values.size()) {
    for (const RuntimeDim& r : spec.runtime_dims) runtime_dims_[r.value].push_back(r);
    static_operand_nodes_.insert(spec.static_operand_nodes.begin(), spec.static_operand_nodes.end());
  }

  program::Module run() {
    bind_inputs();
    int random = count_random_nodes(spec_);
    if (random > 0) rng_base_ = p_.rng_key();
    int random_index = 0;
    for (size_t n = 0; n < spec_.nodes.size(); ++n) {
      const Node& node = spec_.nodes[n];
      try {
        apply(node, node.random ? random_index++ : -1, static_operand_nodes_.count(static_cast<int>(n)) != 0);
      } catch (const lowering::NotLowerable& e) {
        throw lowering::NotLowerable(where(node, n) + ": " + e.what());
      } catch (const lowering::InvalidCall& e) {
        throw lowering::InvalidCall(where(node, n) + ": " + e.what(), e.not_implemented);
      } catch (const program::ProgramError& e) {
        throw program::ProgramError(where(node, n) + ": " + e.what());
      } catch (const std::logic_error& e) {  // an operand type the rule did not expect
        throw program::ProgramError(where(node, n) + ": " + e.what());
      }
    }
    for (size_t o = 0; o < spec_.outputs.size(); ++o) {
      int id = spec_.outputs[o];
      if (id < 0) continue;
      const ValueMeta& m = spec_.values[id];
      std::vector<int64_t> order = program::memory_order(m.sizes, m.strides);
      if (order.empty()) order = program::memory_order(m.sizes, program::row_major_strides(m.sizes));
      p_.output(leaving(value(id)), static_cast<int>(o), order, layout_policy());
    }
    return p_.finish();
  }

 private:
  program::View input_view(int input) const { return view_of(inputs_.tensors.at(input), input); }

  void bind_inputs() {
    for (size_t s = 0; s < inputs_.storages.size(); ++s) {
      slots_.push_back(p_.storage(slot_of(inputs_.storages[s], static_cast<int>(s))));
    }
    // Every input is read before any node runs: write-backs to inputs come last in a
    // functionalized graph, and two inputs may share a storage.
    for (size_t i = 0; i < spec_.inputs.size(); ++i) {
      const TensorRef& t = inputs_.tensors.at(i);
      Value v = t.storage < 0 ? p_.scalar(to_hlo(t.tensor.scalar_type()), t.scalar)
                              : p_.read(slots_[t.storage], input_view(static_cast<int>(i)));
      values_[spec_.inputs[i]] = v;
      input_of_value_[spec_.inputs[i]] = static_cast<int>(i);
    }
    for (int id : spec_.inputs) mark_runtime_dims(id);
  }

  // A bucketed graph's value: each dim holding fewer rows than its capacity gets its runtime
  // size, wherever the value came from (an input, a factory of the length, a slice), so every
  // reduction and contraction over it masks the spare rows.
  void mark_runtime_dims(int id) {
    auto it = runtime_dims_.find(id);
    if (it == runtime_dims_.end()) return;
    hlo::Builder& b = p_.builder();
    for (const RuntimeDim& r : it->second) {
      Value rows = hlo::convert(b, value(r.length), DType::S32);
      if (r.offset != 0) rows = hlo::add(b, rows, hlo::constant(b, static_cast<double>(r.offset), DType::S32));
      values_[id] = hlo::with_runtime_size(b, value(id), r.dim, rows);
    }
  }

  // What leaves a bucketed graph (an output, a write-back) as a static buffer.
  Value leaving(Value v) {
    return spec_.runtime_dims.empty() ? v : hlo::static_result(p_.builder(), v);
  }

  Value value(int id) const {
    const Value& v = values_.at(id);
    if (!v.valid()) throw program::ProgramError("value " + std::to_string(id) + " is used before it is produced");
    return v;
  }

  // `static_operands`: tensor operands as static values (their runtime sizes reset to the capacity).
  std::vector<Arg> rule_args(const Node& node, DType compute, bool static_operands) {
    auto operand = [&](int id) { return static_operands ? hlo::static_result(p_.builder(), value(id)) : value(id); };
    using K = NodeArg::Kind;
    std::vector<Arg> args(node.args.size());
    for (size_t a = 0; a < node.args.size(); ++a) {
      const NodeArg& na = node.args[a];
      Arg& arg = args[a];
      switch (na.kind) {
        case K::None: break;
        case K::Ref:
          arg.kind = Arg::Kind::Tensor;
          arg.tensor = operand(na.refs.at(0));
          break;
        case K::RefList:
          arg.kind = Arg::Kind::TensorList;
          for (int id : na.refs) arg.tensors.push_back(id < 0 ? Value{} : operand(id));
          break;
        case K::Number:
          arg.kind = Arg::Kind::Tensor;
          arg.is_wrapped_scalar = true;
          arg.tensor = number_constant(p_.builder(), na.numbers.at(0), compute);
          break;
        case K::NumberList:
          arg.kind = Arg::Kind::TensorList;
          arg.is_wrapped_scalar = true;
          for (const Number& n : na.numbers) arg.tensors.push_back(number_constant(p_.builder(), n, compute));
          break;
        case K::Int:
          arg.kind = Arg::Kind::Int;
          arg.i = na.i;
          break;
        case K::ScalarType:
          arg.kind = Arg::Kind::ScalarType;
          arg.i = na.i;
          arg.dtype = to_hlo(static_cast<c10::ScalarType>(na.i));
          break;
        case K::Double:
          arg.kind = Arg::Kind::Double;
          arg.d = na.d;
          break;
        case K::Bool:
          arg.kind = Arg::Kind::Bool;
          arg.b = na.b;
          break;
        case K::IntList:
          arg.kind = Arg::Kind::IntList;
          arg.ints = na.ints;
          break;
        case K::String:
          arg.kind = Arg::Kind::String;
          arg.s = na.s;
          break;
      }
    }
    return args;
  }

  // Node `random_index` of the graph's random nodes uses the run's key advanced by its index,
  // like successive eager ops advance the generator's offset.
  Value node_key(int random_index) {
    if (random_index <= 0) return rng_base_;
    hlo::Builder& b = p_.builder();
    return hlo::add(b, rng_base_, hlo::constant_i64_vector(b, {0, random_index}, DType::U64));
  }

  void apply(const Node& node, int random_index, bool static_operands) {
    const lowering::Rule* rule = lowering::find_rule(node.rule);
    if (rule == nullptr) throw lowering::NotLowerable("no lowering rule " + node.rule);
    // As in the eager engine (plan.cc): float8 values reach only the rules that move or convert
    // them, and the views and factories only graphs lower.
    if (!lowering::lowers_float8(node.rule) && !lowering::is_graph_only_rule(node.rule) &&
        touches_float8(spec_, node)) {
      throw lowering::NotLowerable(node.target + " of float8 values");
    }
    DType compute = promoted_dtype(spec_, node);
    std::vector<std::optional<program::Type>> out_types;
    for (int id : node.outputs) {
      if (id < 0) {
        out_types.push_back(std::nullopt);
        continue;
      }
      const ValueMeta& m = spec_.values.at(id);
      out_types.push_back(program::Type(m.dtype, m.sizes));
    }
    Value key = random_index >= 0 ? node_key(random_index) : Value{};
    std::vector<Value> results = p_.apply(*rule, rule_args(node, compute, static_operands), out_types, compute, key);
    for (size_t r = 0; r < results.size(); ++r) {
      if (node.outputs[r] >= 0) {
        values_[node.outputs[r]] = results[r];
        mark_runtime_dims(node.outputs[r]);
      }
    }
    if (node.writes_first_arg && !results.empty()) write_first_arg(node, results[0]);
  }

  // An in-place node (copy_ of a new value into a graph input): later uses of the argument see
  // the result, and a graph input's storage gets it written back (donated).
  void write_first_arg(const Node& node, Value result) {
    int id = node.args.at(0).refs.at(0);
    values_[id] = result;
    auto it = input_of_value_.find(id);
    if (it == input_of_value_.end()) return;
    const TensorRef& t = inputs_.tensors.at(it->second);
    if (t.storage < 0) throw program::ProgramError("a graph writes into a CPU scalar input");
    p_.write(slots_[t.storage], input_view(it->second), leaving(result));
  }

  const GraphSpec& spec_;
  const OpCall& inputs_;
  program::Program p_;
  std::vector<int> slots_;
  std::vector<Value> values_;
  std::map<int, int> input_of_value_;
  std::map<int, std::vector<RuntimeDim>> runtime_dims_;  // by value id
  std::set<int> static_operand_nodes_;
  Value rng_base_;
};

}  // namespace

int count_random_nodes(const GraphSpec& spec) {
  int n = 0;
  for (const Node& node : spec.nodes) n += node.random;
  return n;
}

program::Module assemble_graph_program(const GraphSpec& spec, const OpCall& inputs) {
  return GraphAssembler(spec, inputs).run();
}

}  // namespace tpu::engine::graph
