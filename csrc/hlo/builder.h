// Builds one StableHLO module as MLIR text: the @main signature, SSA values and ops.
//
// Ops are printed in MLIR's generic form ("stablehlo.add"(%a, %b) : (...) -> ...), whose
// syntax has not changed across the StableHLO versions our plugins parse (1.13 to 1.20),
// unlike several ops' pretty forms. Attributes go in the discardable dict after the regions,
// which every version accepts for inherent attributes.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "hlo/types.h"

namespace tpu::hlo {

struct Value {
  int id = -1;
  Type type;
  bool valid() const { return id >= 0; }
  const std::vector<int64_t>& shape() const { return type.shape; }
  DType dtype() const { return type.dtype; }
  int rank() const { return type.rank(); }
};

struct ArgOptions {
  int alias_output = -1;     // donate this argument: its buffer becomes output N
  std::string sharding;      // mhlo.sharding, for SPMD modules
  // mhlo.layout_mode as JAX emits it: "default", "auto" (the compiler picks the device
  // layout) or a minor-to-major list such as "{0,1}"; empty prints no attribute.
  std::string layout_mode;
};

// The Python exception a failed device-side check raises (PyTorch's CPU kernels raise
// IndexError for index_select/embedding/index, RuntimeError for gather/scatter/division by zero).
enum class CheckKind { IndexError, RuntimeError };

struct Check {
  Value failed;
  std::string message;
  CheckKind kind = CheckKind::IndexError;
};

class Builder {
 public:
  Builder();

  // Adds a parameter of @main.
  Value arg(const Type& type, const ArgOptions& options = {});
  const std::vector<Type>& arg_types() const { return arg_types_; }
  // Donates parameter `position`: its buffer becomes result `output` (same type required).
  void set_alias(size_t position, int output) { arg_options_.at(position).alias_output = output; }

  // Emits a generic op and returns its results.
  std::vector<Value> emit(const std::string& name, const std::vector<Value>& operands,
                          const std::vector<Type>& results, const std::string& attrs = "",
                          const std::vector<std::string>& regions = {});
  Value emit1(const std::string& name, const std::vector<Value>& operands, const Type& result,
              const std::string& attrs = "", const std::vector<std::string>& regions = {}) {
    return emit(name, operands, {result}, attrs, regions).at(0);
  }

  // Records that `result` is `source` transposed by `permutation` (hlo::transpose does), so a
  // rule can undo a transpose it would otherwise feed to an op (transposed_from).
  void note_transpose(const Value& result, const Value& source, const std::vector<int64_t>& permutation) {
    transposes_[result.id] = {source, permutation};
  }
  // The value `v` is a transpose of, with the permutation, if hlo::transpose produced it.
  const std::pair<Value, std::vector<int64_t>>* transposed_from(const Value& v) const {
    auto it = transposes_.find(v.id);
    return it == transposes_.end() ? nullptr : &it->second;
  }

  // Builds a single-block region whose arguments have `arg_types`; `body` returns the values
  // passed to stablehlo.return.
  using RegionBody = std::function<std::vector<Value>(Builder&, const std::vector<Value>&)>;
  std::string region(const std::vector<Type>& arg_types, const RegionBody& body);

  // Runtime assertion: `failed` (tensor<i1>, any shape) is true where a check fails, e.g. an
  // index out of range. Drivers return the assertions as extra results and raise `message`
  // as the Python exception `kind` names on the host once they have read them (devices
  // cannot raise), so the error matches PyTorch's CPU kernel for that op.
  void assert_false(Value failed, std::string message, CheckKind kind = CheckKind::IndexError);
  const std::vector<Check>& assertions() const { return assertions_; }

  // The whole module, returning `results` from @main. result_layout_modes[i], when given and
  // not empty, becomes result i's mhlo.layout_mode attribute (see ArgOptions::layout_mode).
  // num_replicas > 1: every replica runs @main (cross-replica collectives, hlo/collectives.h).
  std::string module(const std::vector<Value>& results, int num_partitions = 1,
                     const std::vector<std::string>& result_shardings = {},
                     const std::vector<std::string>& result_layout_modes = {}, int num_replicas = 1) const;
  int num_ops() const { return num_ops_; }

 private:
  std::string name_of(const Value& v) const { return "%v" + std::to_string(v.id); }
  Value fresh(const Type& t) { return Value{next_id_++, t}; }

  int next_id_ = 0;
  int num_ops_ = 0;
  std::map<int, std::pair<Value, std::vector<int64_t>>> transposes_;
  std::vector<Type> arg_types_;
  std::vector<Value> args_;
  std::vector<ArgOptions> arg_options_;
  std::vector<std::string> blocks_;  // text of the block being built, innermost last
  std::vector<Check> assertions_;
};

// "array<i64: 1, 2>"
std::string i64_array(const std::vector<int64_t>& values);

}  // namespace tpu::hlo
