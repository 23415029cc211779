#include "lowering/registry.h"

#include <algorithm>
#include <map>
#include <set>

namespace tpu::lowering {
namespace {
std::map<std::string, Rule>& table() {
  static std::map<std::string, Rule> rules;
  return rules;
}
std::set<std::string>& graph_only() {
  static std::set<std::string> names;
  return names;
}
std::map<std::string, PaddedOperands>& padded_table() {
  static std::map<std::string, PaddedOperands> kinds;
  return kinds;
}
std::set<std::string>& value_checks_table() {
  static std::set<std::string> rules;
  return rules;
}
}  // namespace

const Arg& Context::arg(size_t i) const {
  if (i >= args.size()) throw std::logic_error("rule reads argument " + std::to_string(i) + " of " + std::to_string(args.size()));
  return args[i];
}

Value Context::tensor(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::Kind::Tensor) throw std::logic_error("argument " + std::to_string(i) + " is not a tensor");
  return a.tensor;
}

void register_rule(const std::string& op_name, Rule rule) { table()[op_name] = std::move(rule); }

void register_graph_rule(const std::string& op_name, Rule rule) {
  graph_only().insert(op_name);
  register_rule(op_name, std::move(rule));
}

bool is_graph_only_rule(const std::string& op_name) { return graph_only().count(op_name) > 0; }

void declare_padded_operands(const std::string& rule_name, PaddedOperands how) { padded_table()[rule_name] = how; }

void declare_value_checks(const std::string& rule_name) { value_checks_table().insert(rule_name); }

bool checks_values(const std::string& rule_name) { return value_checks_table().count(rule_name) != 0; }

std::optional<PaddedOperands> padded_operands(const std::string& rule_name) {
  auto it = padded_table().find(rule_name);
  if (it == padded_table().end()) return std::nullopt;
  return it->second;
}

const char* padded_operands_name(PaddedOperands how) {
  switch (how) {
    case PaddedOperands::Exact: return "exact";
    case PaddedOperands::KeepsDim: return "keeps_dim";
    case PaddedOperands::StatsKeepDim: return "stats_keep_dim";
    case PaddedOperands::IndicesOnly: return "indices_only";
    case PaddedOperands::Contiguous: return "contiguous";
    case PaddedOperands::Prefix: return "prefix";
    case PaddedOperands::Scatter: return "scatter";
    case PaddedOperands::FullReduction: return "full_reduction";
    case PaddedOperands::BatchDims: return "batch_dims";
    case PaddedOperands::RowsWithIndices: return "rows_with_indices";
  }
  return "";
}

void require_dtype(bool supported, const std::string& op, DType t) {
  if (!supported) throw InvalidCall("\"" + op + "\" not implemented for '" + hlo::torch_name(t) + "'", true);
}

const Rule* find_rule(const std::string& op_name) {
  auto it = table().find(op_name);
  return it == table().end() ? nullptr : &it->second;
}

std::vector<std::string> registered_ops() {
  std::vector<std::string> names;
  for (const auto& entry : table()) names.push_back(entry.first);
  return names;
}

std::string rule_for(const std::string& base, const std::string& overload) {
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
    if (find_rule(c) != nullptr) return c;
  }
  return "";
}

int64_t wrap_dim(int64_t dim, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r) {
    throw std::out_of_range("Dimension out of range (expected to be in range of [" +
                            std::to_string(-r) + ", " + std::to_string(r - 1) + "], but got " +
                            std::to_string(dim) + ")");
  }
  return dim < 0 ? dim + r : dim;
}

std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t d : dims) out.push_back(wrap_dim(d, rank));
  std::sort(out.begin(), out.end());
  return out;
}

bool broadcastable(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 0; i < from.size(); ++i) {
    int64_t f = from[from.size() - 1 - i], t = to[to.size() - 1 - i];
    if (f != t && f != 1) return false;
  }
  return true;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Value cast_to(Builder& b, Value x, DType dtype, const std::vector<int64_t>& shape) {
  return hlo::broadcast_to(b, hlo::convert(b, x, dtype), shape);
}

}  // namespace tpu::lowering
