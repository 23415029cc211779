// GraphSpec: an ATen graph as the compile driver receives it from torch.compile (torch-free).
//
// The Python backend (torch_tpu/compile/) walks the functionalized FX graph that AOTAutograd
// produces and fills one of these: every value (graph input or node result) gets an id and its
// meta (dtype, sizes, strides); every node names its lowering rule and its schema-normalised
// arguments, which refer to values by id. The driver lowers the whole spec into one Program.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hlo/types.h"

namespace tpu::engine::graph {

using hlo::DType;

struct ValueMeta {
  DType dtype = DType::F32;
  std::vector<int64_t> sizes, strides;
};

// A Python number given to a `Scalar` argument: a compile-time constant of the graph.
struct Number {
  enum class Kind { Bool, Int, Float };
  Kind kind = Kind::Float;
  int64_t i = 0;
  double d = 0;
};

struct NodeArg {
  enum class Kind { None, Ref, RefList, Int, Double, Bool, IntList, String, ScalarType, Number, NumberList };
  Kind kind = Kind::None;
  std::vector<int> refs;  // Ref: one value id; RefList: ids, -1 for a None entry
  int64_t i = 0;          // Int, ScalarType (c10::ScalarType)
  double d = 0;
  bool b = false;
  std::vector<int64_t> ints;
  std::string s;
  std::vector<Number> numbers;  // Number: one; NumberList: many
};

struct Node {
  std::string target;  // "aten::add.Tensor" (errors and labels)
  std::string rule;    // lowering rule ("add.Tensor")
  std::string source;  // the user's source line that produced it, if known
  std::vector<NodeArg> args;
  std::vector<int> outputs;  // value id per flattened result; -1: not produced (masked off)
  bool random = false;       // draws from the device generator
  bool writes_first_arg = false;  // in-place on its first argument (copy_ into a graph input)
};

// A dim of a value whose static extent is a bucket's capacity and whose true size is the value
// of graph input `length` (a runtime integer scalar): a graph compiled once per bucket
// (torch_tpu/compile/bucketed_graphs.py). XLA's dynamic padder masks the rows past the length.
struct RuntimeDim {
  int value = -1;
  int64_t dim = 0;
  int length = -1;  // value id of the length's graph input
  int64_t offset = 0;  // the dim holds length + offset rows (a cat of one row before it: +1)
};

struct GraphSpec {
  std::string name;               // names the module (metrics, AOT check)
  std::vector<ValueMeta> values;  // by value id
  std::vector<int> inputs;        // value id of each graph input, in call order
  std::vector<Node> nodes;        // topological order
  std::vector<int> outputs;       // value id of each graph output; -1 for None
  std::vector<RuntimeDim> runtime_dims;  // empty for a graph of static shapes
  // Nodes whose operands enter as static values: a prefix scan over the capacity is exact
  // without the runtime size, and the oldest plugin's padder gets the scan's slices wrong.
  std::vector<int> static_operand_nodes;
};

}  // namespace tpu::engine::graph
