// Module text -> compiled executable, in memory and on disk (TORCH_TPU_CACHE_DIR).
//
// The disk key covers the module text, the compile options and the plugin's identity, so an
// executable is never reused across plugin builds; the full key is stored in the file and
// compared on load, so a hash collision cannot return a wrong program.
#pragma once

#include <memory>
#include <string>

#include "engine/compile/aot_result.h"
#include "pjrt/client.h"

namespace tpu::engine {

// `label` (the op name) names the module for the compile observer. When one is set (the AOT
// check, engine/compile/aot_check.h), every call also hands it the module, and `aot` (if
// given) receives its result. The observer sees `observed_text` instead where it is not empty (the
// module lowered for libtpu, engine/call/target_modules.h).
std::shared_ptr<pjrt::Executable> get_or_compile(const std::string& module_text,
                                                 const pjrt::CompileOptions& options,
                                                 const std::string& label = "",
                                                 std::shared_ptr<const AotResult>* aot = nullptr,
                                                 const std::string& observed_text = "");
std::string cache_directory();
// Executables this thread compiled, and loaded from the disk cache, since it started: what one
// caller's compiles cost, whatever other threads compile meanwhile.
struct ThreadBuilds {
  int64_t compiled = 0;
  int64_t loaded = 0;
};
ThreadBuilds builds_on_this_thread();
inline int64_t modules_built_on_this_thread() {
  ThreadBuilds b = builds_on_this_thread();
  return b.compiled + b.loaded;
}

// Sees every module get_or_compile is asked for (once per call; it de-duplicates itself).
using CompileObserver = std::shared_ptr<const AotResult> (*)(const std::string& module_text,
                                                             const pjrt::CompileOptions& options,
                                                             const std::string& label);
void set_compile_observer(CompileObserver observer);  // nullptr: none (the default)  // empty when the disk cache is disabled

// The disk-cache key scheme, shared by the engine and the AOT cache writer:
// key = fingerprint + "\n" + encoded compile options + "\n" + module text; the file is
// <dir>/executables/<128-bit hash of key>.bin holding [magic][u64 key size][key][u64 payload
// size][u64 checksum][executable bytes]. An entry that fails any check is recompiled (counted as
// `disk_corrupt`), never deserialized.
std::string cache_key(const std::string& fingerprint, const pjrt::CompileOptions& options,
                      const std::string& module_text);
std::string cache_file(const std::string& dir, const std::string& key);
// Atomic write (temporary file + rename); throws nothing, returns false on failure.
bool write_cache_entry(const std::string& dir, const std::string& key, const std::string& bytes);
enum class EntryRead { Missing, Corrupt, Valid };
EntryRead read_entry(const std::string& file, const std::string& key, std::string* bytes);
void clear_memory_cache();

}  // namespace tpu::engine
