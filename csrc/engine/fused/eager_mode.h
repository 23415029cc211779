// The eager mode: strict (one executable launch per op), fused (ops recorded into one program,
// run at the next host read, sync, strict op or loop boundary: engine/fused/fused_stream.h) and
// debug (strict, and every launch waits: errors surface at the op, as TPU_LAUNCH_BLOCKING=1).
// TORCH_TPU_EAGER_MODE sets it at start; torch.tpu.set_eager_mode changes it.
#pragma once

#include <string>

namespace tpu::engine {

enum class EagerMode { Strict, Fused, Debug };

EagerMode eager_mode();
// Runs the ops recorded so far, then switches.
void set_eager_mode(EagerMode mode);
std::string eager_mode_name(EagerMode mode);
// "strict" | "fused" | "debug"; anything else raises a ValueError naming the choices.
EagerMode parse_eager_mode(const std::string& name);

// When fused eager compiles a stream's program (TORCH_TPU_FUSED_COMPILE): `inline` (the default:
// one fused compile costs less than the strict plans of its ops, docs/eager_modes.md) compiles a
// new stream's program at its first run and waits for it; `background` runs a new stream op by op
// through strict plans, compiles its program on a worker thread once the stream recurs, and
// switches to it when it is ready.
enum class FusedCompile { Background, Inline };
FusedCompile fused_compile();
void set_fused_compile(FusedCompile when);
std::string fused_compile_name(FusedCompile when);
FusedCompile parse_fused_compile(const std::string& name);

}  // namespace tpu::engine
