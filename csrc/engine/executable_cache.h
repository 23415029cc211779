// Module text -> compiled executable, in memory and on disk (TORCH_TPU_CACHE_DIR).
//
// The disk key covers the module text, the compile options and the plugin's identity, so an
// executable is never reused across plugin builds; the full key is stored in the file and
// compared on load, so a hash collision cannot return a wrong program.
#pragma once

#include <memory>
#include <string>

#include "pjrt/client.h"

namespace tpu::engine {

std::shared_ptr<pjrt::Executable> get_or_compile(const std::string& module_text,
                                                 const pjrt::CompileOptions& options);
std::string cache_directory();  // empty when the disk cache is disabled
void clear_memory_cache();

}  // namespace tpu::engine
