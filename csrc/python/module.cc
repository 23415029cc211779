// torch_tpu._C: thin bindings over the engine.
#include <torch/csrc/Generator.h>
#include <torch/extension.h>

#include "engine/compile/aot_check.h"
#include "engine/compile/executable_cache.h"
#include "engine/compile/metrics.h"
#include "engine/device/allocator.h"
#include "engine/device/generator.h"
#include "engine/device/guard.h"
#include "engine/device/runtime.h"
#include "engine/device/storage.h"
#include "engine/device/sync.h"
#include "engine/eager_driver.h"
#include "engine/fused/eager_mode.h"
#include "engine/fused/fused_stream.h"
#include "engine/growing/growing_dims.h"
#include "lowering/registry.h"

namespace py = pybind11;
using namespace tpu::engine;

void register_graph_bindings(py::module& m);               // graph_bindings.cc
void register_distributed_bindings(py::module& m);         // distributed_bindings.cc
py::dict aot_result_dict(const tpu::engine::AotResult& r);  // graph_bindings.cc

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch-tpu core (C++)";
  register_graph_bindings(m);
  register_distributed_bindings(m);
  m.def("_configure", [](const std::string& path, const std::string& kind, int cpu_devices, float gpu_memory_fraction) {
    configure_runtime({path, kind, cpu_devices, gpu_memory_fraction});
  });
  m.def("_client_options", [](const std::string& kind, float gpu_memory_fraction) {
    py::dict d;  // what the client of this plugin kind is created with (tests, troubleshooting)
    for (const auto& [name, value] : client_options({"", kind, 1, gpu_memory_fraction})) {
      std::visit([&](const auto& v) { d[py::str(name)] = v; }, value);
    }
    return d;
  });
  m.def("_register_kernels", &register_lowered_ops);
  m.def("_lowering_rules", &tpu::lowering::registered_ops);
  m.def("_is_graph_only_rule", &tpu::lowering::is_graph_only_rule);
  m.def("_rule_for", [](const std::string& op) {  // "add_.Tensor" -> "add.Tensor"
    size_t dot = op.find('.');
    return tpu::lowering::rule_for(op.substr(0, dot), dot == std::string::npos ? "" : op.substr(dot + 1));
  });
  m.def("_is_configured", &runtime_configured);
  m.def("_is_initialized", &runtime_initialized);
  m.def("_init", []() { runtime(); });
  m.def("_device_count", &device_count_or_zero);
  m.def("_current_device", &current_device);
  m.def("_set_device", &set_current_device);
  m.def("_synchronize", [](int device) {
    py::gil_scoped_release release;
    if (device < 0) synchronize_all(); else synchronize_device(device);
  });
  m.def("_platform_name", []() { return runtime().client().platform_name(); });
  m.def("_platform_version", []() { return runtime().client().platform_version(); });
  m.def("_runtime_description", []() { return runtime().description(); });
  m.def("_device_kind", [](int device) { return runtime().client().devices().at(device).kind; });
  m.def("_pjrt_version", []() { return runtime().client().api().version_string(); });
  m.def("_plugin_attributes", []() { return runtime().client().api().attributes_string(); });
  m.def("_memory_stats", [](int device) {
    DeviceMemoryCounters c = memory_counters(device);
    py::dict d;
    d["allocated_bytes.all.current"] = c.allocated;
    d["allocated_bytes.all.peak"] = c.peak;
    d["num_alloc_retries"] = 0;
    d["num_allocs"] = c.num_allocs;
    d["num_frees"] = c.num_frees;
    auto plugin = runtime().client().memory_stats(device);
    d["device_stats_supported"] = plugin.supported;
    d["device_bytes_in_use"] = plugin.bytes_in_use;
    d["device_bytes_limit"] = plugin.bytes_limit;
    return d;
  });
  m.def("_reset_peak_memory", &reset_peak_memory);
  // Byte counters of live storages; they need no plugin (allocation does not start one).
  m.def("_memory_allocated", [](int device) { return memory_counters(device).allocated; });
  m.def("_max_memory_allocated", [](int device) { return memory_counters(device).peak; });
  m.def("_default_generator", [](int device) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(default_generator(static_cast<c10::DeviceIndex>(device))));
  });
  m.def("_cache_stats", []() {
    Metrics& mt = metrics();
    py::dict d;
    d["ops_run"] = mt.ops_run.load();
    d["launches"] = mt.launches.load();
    d["compiles"] = mt.compiles.load();
    d["compile_time_s"] = mt.compile_time_us.load() / 1e6;
    d["memory_hits"] = mt.memory_cache_hits.load();
    d["disk_hits"] = mt.disk_cache_hits.load();
    d["disk_writes"] = mt.disk_cache_writes.load();
    d["disk_corrupt"] = mt.disk_cache_corrupt.load();
    d["signatures"] = plan_cache_size();
    d["signature_limit"] = plan_cache_capacity();
    d["signature_evictions"] = plan_cache_evictions();
    d["host_to_device_bytes"] = mt.host_to_device_bytes.load();
    d["device_to_host_bytes"] = mt.device_to_host_bytes.load();
    d["cache_dir"] = cache_directory();
    return d;
  });
  m.def("_bucket_stats", []() {
    py::dict d;
    for (const auto& [capacity, b] : bucket_stats()) {
      py::dict e;
      e["calls"] = b.calls;
      e["compiles"] = b.compiles;
      e["rows"] = b.rows;
      e["capacity_rows"] = b.capacity_rows;
      d[py::int_(capacity)] = e;
    }
    return d;
  });
  m.def("_bucket_decisions", []() {
    BucketDecisions d = bucket_decisions();
    py::dict e;
    e["decided"] = d.decided;
    e["reused"] = d.reused;
    return e;
  });
  m.def("_mark_dynamic", &mark_dynamic);
  // Compiled graphs per bucket (torch_tpu/compile/bucketed_graphs.py).
  m.def("_bucket_for", &bucket_for);
  m.def("_bucketing_enabled", []() { return bucketing_enabled() && growing_dims_enabled(); });
  m.def("_bucketing_kind", &bucketing_kind);
  m.def("_padded_capacity", [](const at::Tensor& t, int64_t dim) -> std::optional<int64_t> {
    std::optional<Spare> s = spare_rows(t);
    if (s && s->dim == dim) return s->capacity;
    return std::nullopt;
  });
  m.def("_whole_capacity", &whole_capacity);
  m.def("_as_padded_prefix", &as_padded_prefix);
  m.def("_fallback_counts", &fallback_counts);
  m.def("_fallback_counts_since_start", &fallback_counts_since_start);
  m.def("_op_counts", &plan_run_counts);
  m.def("_rules_used", &rules_used);
  m.def("_recompile_reasons", &recompile_reasons);
  // The dims of the device buffer behind a tpu tensor's storage (its layout); [] if unwritten.
  m.def("_storage_layout", [](const at::Tensor& t) {
    StorageBuffer& s = storage_buffer(t);
    return s.state() == StorageState::Unwritten ? std::vector<int64_t>{} : s.dims;
  });
  m.def("_reset_metrics", []() {
    reset_metrics();
    reset_bucket_stats();
    reset_fused_stats();
  });
  m.def("_eager_mode", []() { return eager_mode_name(eager_mode()); });
  m.def("_set_eager_mode", [](const std::string& mode) { set_eager_mode(parse_eager_mode(mode)); });
  m.def("_flush_fused", []() { flush_fused("explicit"); });
  m.def("_fused_pipeline_ops", &fused_pipeline_ops);
  m.def("_set_fused_pipeline_ops", &set_fused_pipeline_ops);
  m.def("_wait_fused_compiles", []() {
    py::gil_scoped_release release;
    wait_for_fused_compiles();
  });
  m.def("_fused_compile", []() { return fused_compile_name(fused_compile()); });
  m.def("_set_fused_compile", [](const std::string& when) { set_fused_compile(parse_fused_compile(when)); });
  m.def("_fused_stats", []() {
    FusedStats f = fused_stats();
    py::dict d;
    d["programs_run"] = f.programs_run;
    d["ops_recorded"] = f.ops_recorded;
    d["assembled"] = f.assembled;
    d["compiles"] = f.compiles;
    d["compile_time_s"] = f.compile_time_us / 1e6;
    d["cache_hits"] = f.cache_hits;
    d["background_compiles"] = f.background_compiles;
    d["background_failures"] = f.background_failures;
    d["background_compiled"] = f.background_compiled;
    d["background_loaded"] = f.background_loaded;
    d["op_by_op_runs"] = f.op_by_op_runs;
    d["op_by_op_ops"] = f.op_by_op_ops;
    d["op_by_op_compiles"] = f.op_by_op_compiles;
    d["dropped_results"] = f.dropped_results;
    d["flush_reasons"] = f.flush_reasons;
    d["ran_strict"] = f.ran_strict;
    return d;
  });
  m.def("_cache_dir", &cache_directory);
  m.def("_plugin_fingerprint", []() { return py::bytes(runtime().plugin_fingerprint()); });
  // The disk-cache file that holds `key` (bytes: fingerprint, options, module) under `dir`.
  m.def("_cache_file", [](const std::string& dir, const py::bytes& key) {
    return cache_file(dir, std::string(key));
  });
  // Whether `file` is an intact disk-cache entry for `key` (the checks made before deserializing).
  m.def("_cache_entry_valid", [](const std::string& file, const py::bytes& key) {
    std::string bytes;
    return read_entry(file, std::string(key), &bytes) == EntryRead::Valid;
  });
  m.def("_clear_executable_caches", []() {
    clear_plan_cache();
    clear_memory_cache();
  });
  m.def("_aot_configure", [](const std::string& topology, const std::string& libtpu_path,
                             const std::string& cache_dir) {
    aot_configure({topology, libtpu_path, cache_dir});
  });
  m.def("_aot_check_stats", []() {
    AotStats st = aot_stats();
    Metrics& mt = metrics();
    py::dict d;
    d["topology"] = st.topology;
    d["error"] = st.error;
    d["fingerprint"] = py::bytes(st.fingerprint);
    d["cache_dir"] = st.cache_dir;
    d["peak_flops"] = st.chip.peak_flops;
    d["peak_bytes_per_second"] = st.chip.peak_bytes_per_second;
    int64_t accepted = 0, rejected = 0, cached = 0;
    double compile_s = 0, est_s = 0, flops = 0, bytes = 0;
    py::dict rejections;
    py::list modules;
    for (const auto& r : st.modules) {
      r->accepted ? ++accepted : ++rejected;
      cached += r->cached;
      compile_s += r->compile_seconds;
      if (r->accepted) {
        est_s += std::max(r->optimal_seconds, 0.0);  // negative: libtpu has no estimate
        flops += std::max(r->flops, 0.0);
        bytes += std::max(r->bytes_accessed, 0.0);
      } else if (!rejections.contains(r->label)) {
        rejections[py::str(r->label)] = r->message;
      }
      modules.append(aot_result_dict(*r));
    }
    d["accepted"] = accepted;
    d["rejected"] = rejected;
    d["rejections"] = rejections;
    d["cache_writes"] = cached;
    d["compile_seconds"] = compile_s;
    d["modules"] = modules;
    // Per distinct module (each counted once).
    d["module_estimated_seconds"] = est_s;
    d["module_flops"] = flops;
    d["module_bytes"] = bytes;
    // Per executed op (reset by torch_tpu.metrics.reset()).
    d["ops_run"] = mt.aot_ops_run.load();
    d["ops_estimated"] = mt.aot_ops_estimated.load();
    d["estimated_seconds"] = mt.aot_estimated_ps.load() / 1e12;
    d["roofline_seconds"] = mt.aot_roofline_ps.load() / 1e12;
    // Ops without libtpu's estimate, bounded by their roofline instead (not in the sums above).
    d["ops_roofline_only"] = mt.aot_ops_roofline_only.load();
    d["roofline_only_seconds"] = mt.aot_roofline_only_ps.load() / 1e12;
    d["flops"] = mt.aot_flops.load();
    d["bytes"] = mt.aot_bytes.load();
    py::dict by_op;  // op -> (launches, seconds): estimates, roofline bounds where unmodelled
    for (const auto& [op, t] : aot_op_times()) by_op[py::str(op)] = py::make_tuple(t.launches, t.picoseconds / 1e12);
    d["by_op"] = by_op;
    return d;
  });
}
