// The one translation of the engine's exceptions into PyTorch's Python exceptions, for every
// driver. Called inside a catch block, it rethrows the exception in flight as
//   lowering::NotLowerable  -> NotImplementedError  "who: cannot lower ..."
//   lowering::InvalidCall   -> NotImplementedError or RuntimeError (as the call says) "who: ..."
//   program::ProgramError   -> RuntimeError          "who: ..."
//   std::out_of_range       -> IndexError            "who: ..."
//   std::invalid_argument   -> ValueError            "who: ..."
// and any other exception (c10::Error included) unchanged.
#pragma once

#include <string>

namespace tpu::engine {

[[noreturn]] void rethrow_as_user_error(const std::string& who);

}  // namespace tpu::engine
