// Runs a recorded stream op by op, each through the strict plan of its call signature (the same
// executables strict eager launches): what a stream does while its fused program compiles in the
// background, so that fused eager never waits for a compile strict eager would not have made.
#pragma once

#include <memory>
#include <vector>

#include "engine/device/storage.h"
#include "engine/fused/recorded_stream.h"

namespace tpu::engine {

// `st.storages[k].ref.buffer` is the live storage's holder, or a stand-in where `dead[k]` (an
// outside storage's stand-in holds the buffer the stream kept). Stand-ins for the dead
// intermediates are added to `stand_ins`. Returns the strict plans it compiled.
int64_t run_op_by_op(Stream& st, const std::vector<bool>& dead,
                     std::vector<std::unique_ptr<StorageBuffer>>& stand_ins);

}  // namespace tpu::engine
