// What an op call produces, with PyTorch's semantics, from the op's meta kernel: one Target per
// flattened result (a new dense tensor, or a written argument), how targets group into the
// schema's returns, the out= resize request, and the promoted compute dtype.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <utility>
#include <vector>

#include "engine/call/op_call.h"

namespace tpu::engine {

struct Target {  // where a rule result goes
  bool functional = true;
  bool undefined = false;  // an optional output the op does not produce (e.g. output_mask)
  int tensor = -1;         // written arguments: index into OpCall::tensors
  std::vector<int64_t> sizes, strides;
  c10::ScalarType dtype = c10::kFloat;
  std::vector<int64_t> memory_order;  // functional: dims outermost first
};

struct OpOutputs {
  std::vector<Target> targets;        // one per flattened return (or written argument)
  std::vector<bool> return_is_list;   // per schema return
  std::vector<int> return_sizes;      // targets per schema return
  bool returns_written_args = false;  // the schema returns nothing; results go to written args
  DType compute_dtype = DType::F32;   // torch.result_type of the operands
};

// Out= tensors whose shape the op changes: the caller resizes them and calls again.
struct OutputsNeedResize {
  struct Resize {
    int arg;                     // argument index
    int elem;                    // list element, -1 for a tensor argument
    std::vector<int64_t> sizes;  // what the meta kernel resized its copy to
  };
  std::vector<Resize> resizes;
};

// Runs the meta kernel. Throws OutputsNeedResize, lowering::NotLowerable (no meta kernel, or
// one that cannot run: data-dependent shapes) or the meta kernel's user error.
OpOutputs op_outputs(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t num_args,
                     const OpCall& call);

}  // namespace tpu::engine
