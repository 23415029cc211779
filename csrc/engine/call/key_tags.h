// The tags of an OpCall key. Every entry starts with its tag and is self-describing, so two keys
// of one op (or one graph) can be compared field by field (recompile_log.cc).
#pragma once

#include <cstdint>

namespace tpu::engine {

enum KeyTag : int64_t { kNone, kTpuTensor, kCpuScalar, kList, kScalar, kInt, kDouble, kBool, kStr,
                        kInts, kDevice, kGenerator, kDoubles, kScalarType, kBools, kRuntimeSizes };

}  // namespace tpu::engine
