// Host synchronization: waits for every computation queued on a device.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "hlo/builder.h"
#include "pjrt/buffer.h"
#include "pjrt/event.h"

namespace tpu::engine {

// Remembers the completion event of each device's newest execution; waiting on it waits for
// the queue (PJRT runs a device's executions in order).
void note_pending(int device, std::shared_ptr<pjrt::Event> done);
void synchronize_device(int device);
void synchronize_all();
// Device-side assertions (index out of range...): a flag computed by an op, checked at the
// next host sync of the same thread (errors surface in the thread that launched the op, not in
// another thread's unrelated sync). raise_failed_checks() reads every pending flag of this
// thread and throws the first failure as the exception `kind` names.
void note_check(std::shared_ptr<pjrt::Buffer> failed_flag, std::string message, hlo::CheckKind kind);
// The same for the op of another thread (fused eager runs ops recorded by several threads).
void note_check_for(std::thread::id owner, std::shared_ptr<pjrt::Buffer> failed_flag, std::string message,
                    hlo::CheckKind kind);
void raise_failed_checks();

// TPU_LAUNCH_BLOCKING=1 (or the debug eager mode): wait after every op so errors surface at the
// op that caused them.
bool launch_blocking();
void set_launch_blocking(bool blocking);

}  // namespace tpu::engine
