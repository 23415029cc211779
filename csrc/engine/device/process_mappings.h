// The process's memory mappings, which Linux caps (vm.max_map_count, 65,530 by default): each
// loaded XLA:CPU executable JIT-maps three regions per compiled kernel, from ~3 for an
// element-wise op to over 60 for a while-loop decomposition, and mmap failing inside the plugin
// is a segfault. The eager plan cache unloads executables to stay under a budget.
#pragma once

#include <cstdint>

namespace tpu::engine {

// Mappings of this process now (lines of /proc/self/maps), or -1 where that file is absent.
int64_t process_mapping_count();
// vm.max_map_count, or -1 where it cannot be read (then no budget applies).
int64_t process_mapping_limit();

}  // namespace tpu::engine
