// A one-time hint for host reads inside a hot loop (`.item()`, `.tolist()`, printing a scalar):
// each waits for the device's whole queue and a transfer back, which an accelerator pays for in
// launch latency and idle time. Users of XLA backends ask to be told (pytorch/xla's "too many
// host syncs" reports).
#pragma once

#include <cstdint>

namespace tpu::engine {

// Counts a device-to-host read of `numel` elements; small reads (a scalar, a few values) that
// come more often than TORCH_TPU_WARN_HOST_READS per second (default 100; 0: never warn) give
// one warning per process naming the rate and what to do instead.
void note_host_read(int64_t numel);

}  // namespace tpu::engine
