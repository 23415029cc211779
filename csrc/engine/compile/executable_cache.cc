#include "engine/compile/executable_cache.h"

#include <c10/util/Exception.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "engine/compile/metrics.h"
#include "engine/device/runtime.h"

namespace tpu::engine {
namespace {

std::mutex g_mu;
std::atomic<CompileObserver> g_observer{nullptr};
std::unordered_map<std::string, std::shared_ptr<pjrt::Executable>> g_memory;

uint64_t fnv1a(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ULL ^ seed;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string hex_hash(const std::string& s) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", (unsigned long long)fnv1a(s, 0),
                (unsigned long long)fnv1a(s, 0x9e3779b97f4a7c15ULL));
  return buf;
}

void make_dirs(const std::string& path) {
  std::string partial;
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '/')) {
    partial += part + "/";
    ::mkdir(partial.c_str(), 0755);
  }
}

bool read_entry(const std::string& file, const std::string& key, std::string* bytes) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  uint64_t key_size = 0;
  in.read(reinterpret_cast<char*>(&key_size), sizeof(key_size));
  if (!in || key_size != key.size()) return false;
  std::string stored(key_size, '\0');
  in.read(stored.data(), static_cast<std::streamsize>(key_size));
  if (!in || stored != key) return false;
  std::ostringstream rest;
  rest << in.rdbuf();
  *bytes = rest.str();
  return !bytes->empty();
}

std::shared_ptr<pjrt::Executable> plugin_get_or_compile(const std::string& module_text,
                                                        const pjrt::CompileOptions& options);

}  // namespace

std::string cache_key(const std::string& fingerprint, const pjrt::CompileOptions& options,
                      const std::string& module_text) {
  return fingerprint + "\n" + options.encode() + "\n" + module_text;
}

std::string cache_file(const std::string& dir, const std::string& key) {
  return dir + "/executables/" + hex_hash(key) + ".bin";
}

bool write_cache_entry(const std::string& dir, const std::string& key, const std::string& bytes) {
  make_dirs(dir + "/executables");
  std::string file = cache_file(dir, key);
  std::string tmp = file + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    uint64_t key_size = key.size();
    out.write(reinterpret_cast<const char*>(&key_size), sizeof(key_size));
    out.write(key.data(), static_cast<std::streamsize>(key.size()));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  // Atomic: readers never see a partial file.
  return std::rename(tmp.c_str(), file.c_str()) == 0;
}

std::string cache_directory() {
  static const std::string dir = [] {
    const char* env = std::getenv("TORCH_TPU_CACHE_DIR");
    if (env != nullptr) return std::string(env);  // "" disables the disk cache
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    std::string base = xdg ? xdg : home ? std::string(home) + "/.cache" : "/tmp";
    return base + "/torch_tpu";
  }();
  return dir;
}

std::shared_ptr<pjrt::Executable> get_or_compile(const std::string& module_text,
                                                 const pjrt::CompileOptions& options,
                                                 const std::string& label,
                                                 std::shared_ptr<const AotResult>* aot) {
  std::shared_ptr<pjrt::Executable> exe = plugin_get_or_compile(module_text, options);
  if (CompileObserver observer = g_observer.load()) {
    std::shared_ptr<const AotResult> result = observer(module_text, options, label);
    if (aot != nullptr) *aot = std::move(result);
  }
  return exe;
}

namespace {

std::shared_ptr<pjrt::Executable> plugin_get_or_compile(const std::string& module_text,
                                                        const pjrt::CompileOptions& options) {
  Runtime& rt = runtime();
  std::string key = cache_key(rt.plugin_fingerprint(), options, module_text);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_memory.find(key);
    if (it != g_memory.end()) {
      metrics().memory_cache_hits++;
      return it->second;
    }
  }
  std::shared_ptr<pjrt::Executable> exe;
  std::string dir = cache_directory();
  std::string file = dir.empty() ? "" : cache_file(dir, key);
  std::string bytes;
  if (!file.empty() && read_entry(file, key, &bytes)) {
    try {
      exe = rt.client().deserialize(bytes);
      metrics().disk_cache_hits++;
    } catch (const std::exception&) {
      exe.reset();  // stale or foreign entry: recompile and overwrite it
    }
  }
  if (!exe) {
    auto start = std::chrono::steady_clock::now();
    exe = rt.client().compile(module_text, options);
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now() - start).count();
    metrics().compiles++;
    metrics().compile_time_us += us;
    if (!file.empty()) {
      try {
        // A read-only or full cache directory only costs recompiles.
        if (write_cache_entry(dir, key, exe->serialize())) metrics().disk_cache_writes++;
      } catch (const std::exception&) {
      }
    }
  }
  std::lock_guard<std::mutex> lock(g_mu);
  return g_memory.emplace(key, exe).first->second;
}

}  // namespace

void set_compile_observer(CompileObserver observer) { g_observer.store(observer); }

void clear_memory_cache() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_memory.clear();
}

}  // namespace tpu::engine
