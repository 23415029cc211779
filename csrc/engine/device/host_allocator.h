// Host ("pinned") memory for tpu transfers.
#pragma once

namespace tpu::engine {
// True if `ptr` lies in a live allocation of the tpu host allocator.
bool is_pinned_host_ptr(const void* ptr);
}  // namespace tpu::engine
