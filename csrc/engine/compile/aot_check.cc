#include "engine/compile/aot_check.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "engine/compile/executable_cache.h"
#include "engine/compile/metrics.h"
#include "engine/device/runtime.h"
#include "pjrt/topology.h"

namespace tpu::engine {
namespace {

struct State {
  AotConfig config;
  bool enabled = false;
  std::shared_ptr<pjrt::Api> api;  // loaded once per process, kept across reconfigurations
  std::unique_ptr<pjrt::Topology> topology;
  std::string fingerprint;
  std::string error;
  std::unordered_map<std::string, std::shared_ptr<const AotResult>> results;
  std::vector<std::shared_ptr<const AotResult>> order;
};

std::mutex g_mu;
State& state() {
  static State s;
  return s;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// libtpu start-up must not hang the user's program (it can wait on cloud metadata servers):
// it runs on a helper thread and is abandoned after this many seconds.
int init_timeout_seconds() {
  const char* env = std::getenv("TORCH_TPU_AOT_INIT_TIMEOUT");
  return env != nullptr ? std::max(1, std::atoi(env)) : 120;
}

struct Loaded {
  std::shared_ptr<pjrt::Api> api;
  std::unique_ptr<pjrt::Topology> topology;
  std::string error;
};

// Loads libtpu and creates the topology on first use; false (with state().error) on failure.
bool ready_locked(State& s) {
  if (s.topology) return true;
  if (!s.error.empty()) return false;
  if (s.config.libtpu_path.empty()) {
    s.error = "TORCH_TPU_AOT_CHECK=" + s.config.topology + ": libtpu is not installed (pip install libtpu)";
    return false;
  }
  auto loaded = std::make_shared<Loaded>();
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::string path = s.config.libtpu_path, topology = s.config.topology;
  std::thread([loaded, done, path, topology] {
    try {
      pjrt::prepare_libtpu_offline_env();  // before Plugin_Initialize: no metadata server here
      loaded->api = pjrt::Api::load(path);
      loaded->topology = std::make_unique<pjrt::Topology>(loaded->api, topology);
    } catch (const std::exception& e) {
      loaded->error = e.what();
    }
    done->set_value();
  }).detach();
  int timeout = init_timeout_seconds();
  if (finished.wait_for(std::chrono::seconds(timeout)) != std::future_status::ready) {
    s.error = "TORCH_TPU_AOT_CHECK=" + s.config.topology + ": libtpu did not finish starting within " +
              std::to_string(timeout) + " s (TORCH_TPU_AOT_INIT_TIMEOUT); the AOT check is off";
    return false;
  }
  if (!loaded->error.empty()) {
    s.error = "TORCH_TPU_AOT_CHECK=" + s.config.topology + ": " + first_line(loaded->error);
    return false;
  }
  s.api = loaded->api;
  s.topology = std::move(loaded->topology);
  s.fingerprint = plugin_fingerprint(s.topology->platform_name(), s.topology->platform_version(), *s.api);
  return true;
}

// The engine's options name its own device ids; keep them when the topology has those ids
// (device 0 -> TPU id 0, as on a TPU VM), else use the topology's first devices.
pjrt::CompileOptions for_topology(const pjrt::CompileOptions& options,
                                  const pjrt::Topology& topology, bool* remapped) {
  std::vector<int64_t> ids = topology.device_ids();
  pjrt::CompileOptions o = options;
  *remapped = false;
  for (size_t i = 0; i < o.device_assignment.size(); ++i) {
    bool known = false;
    for (int64_t id : ids) known = known || id == o.device_assignment[i];
    if (!known) *remapped = true;
  }
  if (*remapped) {
    for (size_t i = 0; i < o.device_assignment.size() && i < ids.size(); ++i) {
      o.device_assignment[i] = ids[i];
    }
  }
  return o;
}

// libtpu's cost model counts each custom call it inserts and has no cost for as -1 s, so a module
// with n of them reads optimal_seconds = estimate - n (checked against libtpu's own dumps,
// docs/tpu_aot.md). Seen so far:
// - the 64-bit emulation calls: a TPU has no 64-bit integer unit, and libtpu splits every s64
//   value (a Scalar operand, a storage offset, an int64 result) into two u32 halves
//   (X64SplitLow, X64SplitHigh) and joins them again (X64Combine);
// - ConcatBitcast, which joins the pieces of an array that libtpu copies into on-chip memory in
//   several DMAs (a weight prefetched for a dot: async slices of its bytes into memory space 1)
//   into one array, without moving them;
// - InvertDiagBlocksLowerTriangular, libtpu's inversion of the diagonal blocks of a lower-
//   triangular solve (Qwen3.5's chunked delta rule has one per layer): its own work (small block
//   inversions) is then counted as nothing.
// The calls are named in the optimized program (a serialized HloModuleProto): counting the names
// counts them. The estimate so recovered has the float32 resolution of estimate - n (2^-22 s per
// unit of n, 0.24 us at n = 2).
int64_t count_uncosted_custom_calls(const std::string& optimized_program) {
  int64_t n = 0;
  for (const char* target :
       {"X64SplitLow", "X64SplitHigh", "X64Combine", "ConcatBitcast", "InvertDiagBlocksLowerTriangular"}) {
    for (size_t at = optimized_program.find(target); at != std::string::npos;
         at = optimized_program.find(target, at + 1)) {
      ++n;
    }
  }
  return n;
}

}  // namespace

AotChip aot_chip(const std::string& topology) {
  std::string gen = topology.substr(0, topology.find_first_of(":_="));
  if (gen == "v6e") return {918e12, 1638e9};
  if (gen == "v5e") return {197e12, 819e9};
  if (gen == "v5p" || gen == "v5") return {459e12, 2765e9};
  if (gen == "v4") return {275e12, 1228e9};
  return {};
}

void aot_configure(const AotConfig& config) {
  std::lock_guard<std::mutex> lock(g_mu);
  State& s = state();
  s.config = config;
  s.enabled = !config.topology.empty();
  s.topology.reset();
  s.fingerprint.clear();
  s.error.clear();
  s.results.clear();
  s.order.clear();
  set_compile_observer(s.enabled ? &aot_check : nullptr);
}

bool aot_check_enabled() {
  std::lock_guard<std::mutex> lock(g_mu);
  return state().enabled;
}

std::shared_ptr<const AotResult> aot_check(const std::string& module_text,
                                           const pjrt::CompileOptions& options,
                                           const std::string& label) {
  std::lock_guard<std::mutex> lock(g_mu);  // also serializes libtpu compiles
  State& s = state();
  if (!s.enabled || !ready_locked(s)) return nullptr;
  std::string key = cache_key("", options, module_text);
  auto it = s.results.find(key);
  if (it != s.results.end()) return it->second;

  auto r = std::make_shared<AotResult>();
  r->label = label.empty() ? "module" : label;
  auto start = std::chrono::steady_clock::now();
  try {
    bool remapped = false;
    pjrt::CompileOptions o = for_topology(options, *s.topology, &remapped);
    auto exe = pjrt::compile_for_topology(s.api, *s.topology, module_text, o);
    r->compile_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r->accepted = true;
    pjrt::CostSummary cost = pjrt::CostSummary::from(exe->cost_analysis());
    r->flops = cost.flops;
    r->bytes_accessed = cost.bytes_accessed;
    r->optimal_seconds = cost.optimal_seconds;
    if (r->optimal_seconds < 0) {
      r->uncosted_custom_calls = count_uncosted_custom_calls(exe->optimized_program());
      // Exactly -n means no estimate for the rest either (seen where a runtime storage offset
      // indexes an array): the module stays unmodelled.
      if (r->uncosted_custom_calls > 0 && r->optimal_seconds + r->uncosted_custom_calls > 0) {
        r->optimal_seconds += static_cast<double>(r->uncosted_custom_calls);
      }
    }
    AotChip chip = aot_chip(s.config.topology);
    if (chip.peak_flops > 0 && r->bytes_accessed >= 0) {  // no "flops" key: 0 flops
      r->roofline_seconds = std::max(std::max(r->flops, 0.0) / chip.peak_flops,
                                     r->bytes_accessed / chip.peak_bytes_per_second);
    }
    if (!s.config.cache_dir.empty() && !remapped) {
      // The key a TPU VM's engine computes for this module on device 0 (same options).
      r->cached = write_cache_entry(s.config.cache_dir,
                                    cache_key(s.fingerprint, options, module_text),
                                    exe->serialize());
    }
  } catch (const std::exception& e) {
    r->compile_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r->accepted = false;
    r->message = first_line(e.what());
  }
  s.results.emplace(key, r);
  s.order.push_back(r);
  return r;
}

void aot_count_run(const AotResult& r) {
  Metrics& m = metrics();
  m.aot_ops_run++;
  // libtpu reports a negative optimal_seconds (-4, -5 seen) for modules it does not model;
  // those ops are counted as run but not estimated, and left out of every sum below.
  if (!r.accepted) return;
  if (r.optimal_seconds < 0) {
    if (r.roofline_seconds >= 0) {
      m.aot_ops_roofline_only++;
      m.aot_roofline_only_ps += std::llround(r.roofline_seconds * 1e12);
      count_aot_op_time(r.label, r.roofline_seconds);
    }
    return;
  }
  count_aot_op_time(r.label, r.optimal_seconds);
  m.aot_ops_estimated++;
  m.aot_estimated_ps += std::llround(r.optimal_seconds * 1e12);
  if (r.roofline_seconds >= 0) m.aot_roofline_ps += std::llround(r.roofline_seconds * 1e12);
  if (r.flops > 0) m.aot_flops += std::llround(r.flops);
  if (r.bytes_accessed > 0) m.aot_bytes += std::llround(r.bytes_accessed);
}

AotStats aot_stats() {
  std::lock_guard<std::mutex> lock(g_mu);
  State& s = state();
  AotStats out;
  out.topology = s.enabled ? s.config.topology : "";
  out.error = s.error;
  out.fingerprint = s.fingerprint;
  out.cache_dir = s.config.cache_dir;
  out.chip = aot_chip(s.config.topology);
  out.modules = s.order;
  return out;
}

}  // namespace tpu::engine
