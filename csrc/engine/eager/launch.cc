#include "engine/eager/launch.h"

#include "engine/compile/metrics.h"
#include "engine/device/storage.h"

namespace tpu::engine {

void launch(Plan& plan, const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t num_args,
            const OpCall& call) {
  const OpOutputs& o = plan.outputs;
  std::vector<OutputBuffer> buffers = run_module(plan.module, call, /*random_draws=*/1, o.targets.size());
  metrics().ops_run++;
  std::vector<at::Tensor> produced(o.targets.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].buffer == nullptr) continue;
    const Target& t = o.targets[i];
    produced[i] = wrap_buffer(std::move(buffers[i].buffer), buffers[i].dtype, buffers[i].dims, t.sizes, t.strides,
                              t.dtype, call.device);
  }

  push_returns(o, op, stack, num_args, call, produced);
}

void push_returns(const OpOutputs& o, const c10::OperatorHandle& op, torch::jit::Stack* stack,
                  size_t num_args, const OpCall& call, const std::vector<at::Tensor>& produced) {
  size_t first = stack->size() - num_args;
  std::vector<c10::IValue> inputs;
  if (!o.returns_written_args) inputs.assign(stack->begin() + first, stack->end());
  torch::jit::drop(*stack, num_args);
  if (o.returns_written_args) return;
  size_t target = 0;
  for (size_t r = 0; r < op.schema().returns().size(); ++r) {
    int n = o.return_sizes[r];
    if (n == 0) {  // an empty list
      stack->push_back(std::vector<at::Tensor>());
      continue;
    }
    const Target& head = o.targets[target];
    if (!head.functional) {
      stack->push_back(inputs[call.tensors[head.tensor].arg]);
    } else if (o.return_is_list[r]) {
      stack->push_back(std::vector<at::Tensor>(produced.begin() + target, produced.begin() + target + n));
    } else {
      stack->push_back(produced[target]);
    }
    target += n;
  }
}

}  // namespace tpu::engine
