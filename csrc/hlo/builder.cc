#include "hlo/builder.h"

#include <stdexcept>

namespace tpu::hlo {

std::string i64_array(const std::vector<int64_t>& values) {
  std::string s = "array<i64";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : ": ") + std::to_string(values[i]);
  return s + ">";
}

Builder::Builder() { blocks_.emplace_back(); }

Value Builder::arg(const Type& type, const ArgOptions& options) {
  Value v = fresh(type);
  arg_types_.push_back(type);
  args_.push_back(v);
  arg_options_.push_back(options);
  return v;
}

std::vector<Value> Builder::emit(const std::string& name, const std::vector<Value>& operands,
                                 const std::vector<Type>& results, const std::string& attrs,
                                 const std::vector<std::string>& regions) {
  std::vector<Value> outs;
  std::string line = "    ";
  for (size_t i = 0; i < results.size(); ++i) {
    outs.push_back(fresh(results[i]));
    line += (i ? ", " : "") + name_of(outs.back());
  }
  if (!results.empty()) line += " = ";
  line += "\"" + name + "\"(";
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!operands[i].valid()) throw std::logic_error(name + ": operand " + std::to_string(i) + " is unset");
    line += (i ? ", " : "") + name_of(operands[i]);
  }
  line += ")";
  if (!regions.empty()) {
    line += " (";
    for (size_t i = 0; i < regions.size(); ++i) line += (i ? ", " : "") + regions[i];
    line += ")";
  }
  if (!attrs.empty()) line += " {" + attrs + "}";
  line += " : (";
  for (size_t i = 0; i < operands.size(); ++i) line += (i ? ", " : "") + operands[i].type.str();
  line += ") -> ";
  if (results.size() == 1) {
    line += results[0].str();
  } else {
    line += "(";
    for (size_t i = 0; i < results.size(); ++i) line += (i ? ", " : "") + results[i].str();
    line += ")";
  }
  blocks_.back() += line + "\n";
  ++num_ops_;
  return outs;
}

void Builder::assert_false(Value failed, std::string message, CheckKind kind) {
  assertions_.push_back({failed, std::move(message), kind});
}

std::string Builder::region(const std::vector<Type>& arg_types, const RegionBody& body) {
  std::vector<Value> block_args;
  std::string header = "{\n  ^bb0(";
  for (size_t i = 0; i < arg_types.size(); ++i) {
    block_args.push_back(fresh(arg_types[i]));
    header += (i ? ", " : "") + name_of(block_args.back()) + ": " + arg_types[i].str();
  }
  header += "):\n";
  blocks_.emplace_back();
  std::vector<Value> results = body(*this, block_args);
  emit("stablehlo.return", results, {});
  std::string text = header + blocks_.back() + "  }";
  blocks_.pop_back();
  return text;
}

std::string Builder::module(const std::vector<Value>& results, int num_partitions,
                            const std::vector<std::string>& result_shardings,
                            const std::vector<std::string>& result_layout_modes, int num_replicas) const {
  std::string s = "module @torch_tpu attributes {mhlo.num_partitions = " + std::to_string(num_partitions) +
                  " : i32, mhlo.num_replicas = " + std::to_string(num_replicas) + " : i32} {\n";
  s += "  func.func public @main(";
  for (size_t i = 0; i < args_.size(); ++i) {
    s += (i ? ", " : "") + name_of(args_[i]) + ": " + args_[i].type.str();
    std::string attrs;
    if (arg_options_[i].alias_output >= 0) {
      attrs += "tf.aliasing_output = " + std::to_string(arg_options_[i].alias_output) + " : i32";
    }
    if (!arg_options_[i].sharding.empty()) {
      attrs += std::string(attrs.empty() ? "" : ", ") + "mhlo.sharding = \"" +
               arg_options_[i].sharding + "\"";
    }
    if (!arg_options_[i].layout_mode.empty()) {
      attrs += std::string(attrs.empty() ? "" : ", ") + "mhlo.layout_mode = \"" +
               arg_options_[i].layout_mode + "\"";
    }
    if (!attrs.empty()) s += " {" + attrs + "}";
  }
  s += ") -> (";
  for (size_t i = 0; i < results.size(); ++i) {
    s += (i ? ", " : "") + results[i].type.str();
    std::string attrs;
    if (i < result_shardings.size() && !result_shardings[i].empty()) {
      attrs += "mhlo.sharding = \"" + result_shardings[i] + "\"";
    }
    if (i < result_layout_modes.size() && !result_layout_modes[i].empty()) {
      attrs += std::string(attrs.empty() ? "" : ", ") + "mhlo.layout_mode = \"" +
               result_layout_modes[i] + "\"";
    }
    if (!attrs.empty()) s += " {" + attrs + "}";
  }
  s += ") {\n" + blocks_.front() + "    \"func.return\"(";
  for (size_t i = 0; i < results.size(); ++i) s += (i ? ", " : "") + name_of(results[i]);
  s += ") : (";
  for (size_t i = 0; i < results.size(); ++i) s += (i ? ", " : "") + results[i].type.str();
  s += ") -> ()\n  }\n}\n";
  return s;
}

}  // namespace tpu::hlo
