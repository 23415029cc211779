// A compiled graph as torch.compile calls it: one StableHLO module (and executable) per input
// signature of one GraphSpec. A call binds the input tensors like an eager op's arguments (so a
// view input at a new storage offset is a runtime value, not a new executable), executes, writes
// mutated inputs back, and returns the outputs as new tpu tensors.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/call/compiled_module.h"
#include "engine/call/op_call.h"
#include "engine/compile/aot_result.h"
#include "engine/graph/graph_spec.h"

namespace tpu::engine::graph {

class GraphExecutable {
 public:
  explicit GraphExecutable(GraphSpec spec);
  ~GraphExecutable();

  // Runs the graph; None outputs come back as undefined tensors.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs);
  // Lowers and compiles for these inputs without running (errors surface at compile time).
  void prepare(const std::vector<at::Tensor>& inputs);

  const GraphSpec& spec() const { return spec_; }
  int64_t compiles() const { return compiles_; }
  int64_t runs() const { return runs_; }
  // The module of the latest compiled signature (debug dumps).
  std::string last_module() const;
  std::shared_ptr<const AotResult> last_aot() const;

 private:
  OpCall bind(const std::vector<at::Tensor>& inputs) const;
  bool writes_input(size_t i) const;  // a node copies into graph input i (a donated write-back)
  std::shared_ptr<CompiledModule> plan_for(const OpCall& call);

  GraphSpec spec_;
  int random_nodes_ = 0;
  mutable std::mutex mu_;
  std::unordered_map<std::vector<int64_t>, std::shared_ptr<CompiledModule>, VecHash> plans_;
  std::shared_ptr<CompiledModule> last_plan_;
  int64_t compiles_ = 0, runs_ = 0;
};

}  // namespace tpu::engine::graph
