// Host synchronization: waits for every computation queued on a device.
#pragma once

#include <memory>

#include "pjrt/event.h"

namespace tpu::engine {

// Remembers the completion event of each device's newest execution; waiting on it waits for
// the queue (PJRT runs a device's executions in order).
void note_pending(int device, std::shared_ptr<pjrt::Event> done);
void synchronize_device(int device);
void synchronize_all();
// TPU_LAUNCH_BLOCKING=1: wait after every op so errors surface at the op that caused them.
bool launch_blocking();

}  // namespace tpu::engine
