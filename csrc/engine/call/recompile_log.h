// One recompile explainer for every driver: it remembers the latest compiled signature (the
// OpCall key) of each owner (an op's schema, a compiled graph) and, when the owner compiles
// another one, counts a recompile (metrics) with the first difference in words:
// "argument 1 (other): shape [2, 8] -> [2, 9] (dim 1)", "input 0: dtype Float -> Half".
#pragma once

#include <ATen/core/function_schema.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tpu::engine {

// Where a key's argument entries start, how many there are and what to call argument i.
struct KeyShape {
  size_t first = 0;
  size_t num_args = 0;
  std::function<std::string(int)> name;

  static KeyShape of(const c10::FunctionSchema& schema);  // an eager op call (read_op_call)
  static KeyShape of_inputs(size_t num_inputs);            // a compiled graph's inputs
};

// Why `key` missed the cache when `previous` (same owner) did not. Empty if the keys are equal.
std::string describe_key_change(const KeyShape& shape, const std::vector<int64_t>& previous,
                                const std::vector<int64_t>& key);

class RecompileLog {
 public:
  // `owner` compiled the signature `key`; counts a recompile named `label` when it differs from
  // the owner's latest one.
  void note(const void* owner, const std::string& label, const std::vector<int64_t>& key, const KeyShape& shape);
  void forget(const void* owner);  // a graph destroyed: its address may be reused
  void clear();

 private:
  std::mutex mu_;
  std::unordered_map<const void*, std::vector<int64_t>> latest_;
};

}  // namespace tpu::engine
