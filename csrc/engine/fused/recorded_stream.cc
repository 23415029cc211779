#include "engine/fused/recorded_stream.h"

#include "program/layout.h"

namespace tpu::engine {

std::unique_ptr<StorageBuffer> stand_in_for(const StreamStorage& s, int device) {
  auto stand_in = std::make_unique<StorageBuffer>();
  stand_in->device = device;
  if (s.buffer) stand_in->shards.push_back(s.buffer);
  stand_in->dtype = s.ref.dtype;
  stand_in->dims = s.dims;
  stand_in->layout_set = true;
  stand_in->nbytes = static_cast<size_t>(program::Layout{s.dims}.numel() * hlo::bit_width(s.ref.dtype) / 8);
  return stand_in;
}

}  // namespace tpu::engine
