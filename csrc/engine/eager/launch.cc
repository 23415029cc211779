#include "engine/eager/launch.h"

#include "engine/compile/aot_check.h"
#include "engine/compile/metrics.h"
#include "engine/device/allocator.h"
#include "engine/device/generator.h"
#include "engine/device/scalar_buffers.h"
#include "engine/device/storage.h"
#include "engine/device/sync.h"

namespace tpu::engine {
namespace {

std::shared_ptr<pjrt::Buffer> bind(const program::Param& p, const OpCall& call) {
  switch (p.kind) {
    case program::Param::Kind::Storage:
      return read_buffer(*call.storages[p.binding].buffer, p.dtype);
    case program::Param::Kind::Offset:
      return scalar_buffer(call.device, DType::S64, c10::Scalar(call.tensors[p.binding].tensor.storage_offset()));
    case program::Param::Kind::Scalar:
      return scalar_buffer(call.device, p.dtype, call.scalars[p.binding].value);
    case program::Param::Kind::RngKey: {
      at::Generator gen = call.generator.has_value() ? *call.generator : default_generator(call.device);
      auto key = gen.get<TpuGenerator>()->next_key();
      return key_buffer(call.device, key.first, key.second);
    }
  }
  return nullptr;
}

}  // namespace

void launch(Plan& plan, const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t num_args,
            const OpCall& call) {
  std::vector<std::shared_ptr<pjrt::Buffer>> keep_alive;
  std::vector<pjrt::abi::Buffer*> args;
  keep_alive.reserve(plan.params.size());
  args.reserve(plan.params.size());
  for (const program::Param& p : plan.params) {
    keep_alive.push_back(bind(p, call));
    args.push_back(keep_alive.back()->raw());
  }
  std::shared_ptr<pjrt::Event> done;
  std::vector<std::unique_ptr<pjrt::Buffer>> outs;
  try {
    outs = plan.exe->execute(args, &done);
  } catch (const pjrt::PjrtError& e) {
    raise_if_out_of_memory(e, call.device, plan.op_name);
    throw;
  }
  note_pending(call.device, done);
  if (launch_blocking()) done->await(plan.op_name.c_str());
  plan.runs++;
  metrics().ops_run++;
  if (plan.aot) aot_count_run(*plan.aot);

  const OpOutputs& o = plan.outputs;
  std::vector<at::Tensor> produced(o.targets.size());
  bool any_check = false;
  for (size_t i = 0; i < plan.results.size(); ++i) {
    const program::Result& r = plan.results[i];
    std::shared_ptr<pjrt::Buffer> buffer(std::move(outs[i]));
    switch (r.kind) {
      case program::Result::Kind::Output: {
        const Target& t = o.targets[r.binding];
        produced[r.binding] = wrap_buffer(std::move(buffer), r.dtype, r.layout.dims, t.sizes, t.strides, t.dtype, call.device);
        break;
      }
      case program::Result::Kind::Storage:
        call.storages[r.binding].buffer->set(std::move(buffer), r.dtype, r.layout.dims);
        break;
      case program::Result::Kind::Assertion:
        note_check(std::move(buffer), r.message, r.check_kind);
        any_check = true;
        break;
    }
  }
  if (launch_blocking() && any_check) raise_failed_checks();

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
