#include "engine/compile/executable_cache.h"

#include <c10/util/Exception.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "engine/compile/metrics.h"
#include "engine/device/runtime.h"

namespace tpu::engine {
namespace {

std::mutex g_mu;
std::atomic<CompileObserver> g_observer{nullptr};
// Executables alive in this process, by cache key: plans own them (the eager plan cache is
// bounded, plan_cache.h), this table only shares one executable between plans of equal modules.
std::unordered_map<std::string, std::weak_ptr<pjrt::Executable>> g_memory;
size_t g_live_at_last_sweep = 0;
thread_local ThreadBuilds t_builds;

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

// Entry layout: [magic][u64 key size][key][u64 payload size][u64 FNV-1a of payload][payload].
// Every FNV-1a step is a bijection of the running hash, so any single-byte change of the
// payload changes the checksum: a flipped byte is always detected, never deserialized.
constexpr char kEntryMagic[8] = {'T', 'P', 'U', 'X', 'E', '0', '0', '2'};

bool read_u64(std::istream& in, uint64_t* v) {
  in.read(reinterpret_cast<char*>(v), sizeof(*v));
  return static_cast<bool>(in);
}

}  // namespace

EntryRead read_entry(const std::string& file, const std::string& key, std::string* bytes) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return EntryRead::Missing;
  char magic[sizeof(kEntryMagic)];
  in.read(magic, sizeof(magic));
  if (!in || std::memcmp(magic, kEntryMagic, sizeof(magic)) != 0) return EntryRead::Corrupt;
  uint64_t key_size = 0, payload_size = 0, checksum = 0;
  if (!read_u64(in, &key_size) || key_size != key.size()) return EntryRead::Corrupt;
  std::string stored(key_size, '\0');
  in.read(stored.data(), static_cast<std::streamsize>(key_size));
  // A different key under this file name: a flipped key byte (or a 128-bit hash collision).
  if (!in || stored != key) return EntryRead::Corrupt;
  if (!read_u64(in, &payload_size) || !read_u64(in, &checksum) || payload_size == 0) return EntryRead::Corrupt;
  std::ostringstream rest;
  rest << in.rdbuf();
  *bytes = rest.str();
  if (bytes->size() != payload_size || fnv1a(*bytes, 0) != checksum) return EntryRead::Corrupt;
  return EntryRead::Valid;
}

namespace {

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
    uint64_t header[3] = {key.size(), bytes.size(), fnv1a(bytes, 0)};
    out.write(kEntryMagic, sizeof(kEntryMagic));
    out.write(reinterpret_cast<const char*>(&header[0]), sizeof(uint64_t));
    out.write(key.data(), static_cast<std::streamsize>(key.size()));
    out.write(reinterpret_cast<const char*>(&header[1]), 2 * sizeof(uint64_t));
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
                                                 std::shared_ptr<const AotResult>* aot,
                                                 const std::string& observed_text) {
  std::shared_ptr<pjrt::Executable> exe = plugin_get_or_compile(module_text, options);
  if (CompileObserver observer = g_observer.load()) {
    std::shared_ptr<const AotResult> result =
        observer(observed_text.empty() ? module_text : observed_text, options, label);
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
      if (std::shared_ptr<pjrt::Executable> live = it->second.lock()) {
        metrics().memory_cache_hits++;
        return live;
      }
      g_memory.erase(it);
    }
  }
  std::shared_ptr<pjrt::Executable> exe;
  std::string dir = cache_directory();
  std::string file = dir.empty() ? "" : cache_file(dir, key);
  std::string bytes;
  EntryRead entry = file.empty() ? EntryRead::Missing : read_entry(file, key, &bytes);
  if (entry == EntryRead::Corrupt) metrics().disk_cache_corrupt++;  // recompiled and overwritten
  if (entry == EntryRead::Valid) {
    std::string error;
    exe = rt.client().try_deserialize(bytes, &error);
    if (exe) {
      metrics().disk_cache_hits++;
      t_builds.loaded++;
    } else {
      // An entry of another plugin build: recompile and overwrite it. Rare and worth seeing: a
      // plugin that rejects its own entries recompiles every time.
      std::cerr << "torch-tpu: the plugin rejected cached executable " << file << ": " << error
                << " (recompiling)" << std::endl;
    }
  }
  if (!exe) {
    auto start = std::chrono::steady_clock::now();
    exe = rt.client().compile(module_text, options);
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now() - start).count();
    metrics().compiles++;
    t_builds.compiled++;
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
  std::weak_ptr<pjrt::Executable>& slot = g_memory[key];
  if (std::shared_ptr<pjrt::Executable> live = slot.lock()) return live;  // another thread won
  slot = exe;
  if (g_memory.size() > 2 * g_live_at_last_sweep + 64) {  // drop expired entries, amortized
    for (auto it = g_memory.begin(); it != g_memory.end();) it = it->second.expired() ? g_memory.erase(it) : std::next(it);
    g_live_at_last_sweep = g_memory.size();
  }
  return exe;
}

}  // namespace

ThreadBuilds builds_on_this_thread() { return t_builds; }

void set_compile_observer(CompileObserver observer) { g_observer.store(observer); }

void clear_memory_cache() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_memory.clear();
}

}  // namespace tpu::engine
