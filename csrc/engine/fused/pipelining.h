// Pipelining in fused eager (docs/eager_modes.md, "Pipelining"): a stream that reaches
// TORCH_TPU_FUSED_PIPELINE_OPS ops, and whose whole step ran unchanged the last times (a loop
// step, a decode step), runs there, so the device runs those ops while the host records the
// next ones. A stream that differs after that point from call to call (a prompt of a new length
// whose ops are exact) is not cut: it stays one program and one compile instead of a program per
// chunk. All of it is called under the fused stream's lock (fused_stream.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/fused/recorded_stream.h"

namespace tpu::engine {

// The pipelining point in ops (0: never cut), and setting it.
size_t pipeline_ops();
void store_pipeline_ops(int64_t n);

// At the pipelining point: whether the stream is cut there. Takes the signature of its ops so
// far as the step's prefix.
bool recurs_unchanged(Stream& st);

// A step's op signatures: what a new stream starts from (a cut step goes on through the
// programs after its cut), and one more op.
size_t step_ops_at_stream_start();
size_t with_op(size_t step_ops, size_t op_hash);

// At every run of a stream, with why it ran: a cut step goes on through the programs that the
// cut and its loop boundaries start and ends at any other run (a host read); a stream that was
// not cut ends its step at its run. A step that ran the same ops as the last one with its prefix
// and ended as a loop's step does (a host read, a sync, a loop boundary) counts as a repeat.
void note_pipelining(const Stream& st, const char* reason);

}  // namespace tpu::engine
