// The seam between the storage model and fused eager (engine/fused): storages a recorded op will
// write are Pending until its program runs, and anything that reads or replaces a buffer first
// asks for the recorded ops to run. The device layer knows nothing of how they are recorded.
#pragma once

namespace tpu::engine {

using PendingFlusher = void (*)(const char* reason);

// Installed once by engine/fused.
void install_pending_flusher(PendingFlusher flusher);
// Marks whether ops are recorded and not yet run (cheap to test on every buffer access).
void set_ops_pending(bool pending);
bool ops_pending();
// Runs the recorded ops now (no-op when none are, or inside the flush itself). `reason` is
// counted in the metrics ("host read", "strict launch", ...).
void flush_pending_ops(const char* reason);

}  // namespace tpu::engine
