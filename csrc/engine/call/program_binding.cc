#include "engine/call/program_binding.h"

#include "engine/device/dtypes.h"
#include "engine/device/generator.h"
#include "engine/device/scalar_buffers.h"

namespace tpu::engine {

program::StorageSlot slot_of(const StorageRef& st, int binding) {
  program::StorageSlot slot;
  slot.binding = binding;
  slot.dtype = st.dtype;
  slot.layout = program::Layout{st.buffer->dims};
  slot.unwritten = st.unwritten;
  slot.sharding = st.buffer->sharding;
  return slot;
}

program::View view_of(const TensorRef& t, int offset_binding) {
  program::View v;
  v.sizes = t.tensor.sizes().vec();
  v.strides = t.tensor.strides().vec();
  v.dtype = to_hlo(t.tensor.scalar_type());
  v.access = t.access;
  v.offset_binding = t.has_offset ? offset_binding : -1;
  return v;
}

at::Generator generator_of(const OpCall& call) {
  return call.generator.has_value() ? *call.generator : default_generator(static_cast<c10::DeviceIndex>(call.device));
}

std::vector<std::shared_ptr<pjrt::Buffer>> bind_params(const std::vector<program::Param>& params,
                                                       const OpCall& call, uint64_t random_draws) {
  std::vector<std::shared_ptr<pjrt::Buffer>> bound;
  bound.reserve(params.size());
  for (const program::Param& p : params) {
    switch (p.kind) {
      case program::Param::Kind::Storage:
        bound.push_back(read_buffer(*call.storages[p.binding].buffer, p.dtype));
        break;
      case program::Param::Kind::Offset:
        bound.push_back(scalar_buffer(call.device, p.dtype, c10::Scalar(call.tensors[p.binding].tensor.storage_offset())));
        break;
      case program::Param::Kind::Scalar: {
        const c10::Scalar& value = call.scalars[p.binding].value;
        if (p.dtype == hlo::DType::S32 && value.isIntegral(false) && !narrow_integer_scalar(value)) {
          // A program compiled for a 32-bit value (eager_program.cc); the key keeps apart
          // Scalars that do not fit, so only a runtime length past 2^31 can get here.
          throw std::runtime_error("tpu: a runtime integer " + std::to_string(value.toLong()) +
                                   " does not fit the 32-bit parameter its program was compiled with");
        }
        bound.push_back(scalar_buffer(call.device, p.dtype, value));
        break;
      }
      case program::Param::Kind::RngKey: {
        if (!call.drawn_keys.empty()) {  // drawn when the op was recorded (fused eager)
          const auto& key = call.drawn_keys.at(p.binding);
          bound.push_back(key_buffer(call.device, key.first, key.second));
          break;
        }
        auto key = generator_of(call).get<TpuGenerator>()->next_keys(random_draws);
        bound.push_back(key_buffer(call.device, key.first, key.second));
        break;
      }
    }
  }
  return bound;
}

}  // namespace tpu::engine
