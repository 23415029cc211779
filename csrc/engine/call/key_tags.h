// The tags of an OpCall key. Every entry starts with its tag and is self-describing, so two keys
// of one op (or one graph) can be compared field by field (recompile_log.cc).
#pragma once

#include <cstdint>

namespace tpu::engine {

// kWideScalar: an integer Scalar whose value needs 64 bits. Others reach the module as 32-bit
// parameters (eager_program.cc), so the two must not share a program.
enum KeyTag : int64_t { kNone, kTpuTensor, kCpuScalar, kList, kScalar, kInt, kDouble, kBool, kStr,
                        kInts, kDevice, kGenerator, kDoubles, kScalarType, kBools, kRuntimeSizes,
                        kWideScalar };

}  // namespace tpu::engine
