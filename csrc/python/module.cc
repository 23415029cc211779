// torch_tpu._C: thin bindings over the engine.
#include <torch/csrc/Generator.h>
#include <torch/extension.h>

#include "engine/allocator.h"
#include "engine/boxed_kernel.h"
#include "engine/executable_cache.h"
#include "engine/generator.h"
#include "engine/guard.h"
#include "engine/metrics.h"
#include "engine/runtime.h"
#include "engine/sync.h"
#include "lowering/registry.h"

namespace py = pybind11;
using namespace tpu::engine;

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch-tpu core (C++)";
  m.def("_configure", [](const std::string& path, const std::string& kind, int cpu_devices) {
    configure_runtime({path, kind, cpu_devices});
  });
  m.def("_register_kernels", &register_lowered_ops);
  m.def("_lowering_rules", &tpu::lowering::registered_ops);
  m.def("_rule_for", [](const std::string& op) {  // "add_.Tensor" -> "add.Tensor"
    size_t dot = op.find('.');
    return rule_for(c10::OperatorName("aten::" + op.substr(0, dot),
                                      dot == std::string::npos ? "" : op.substr(dot + 1)));
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
    d["compiles"] = mt.compiles.load();
    d["compile_time_s"] = mt.compile_time_us.load() / 1e6;
    d["memory_hits"] = mt.memory_cache_hits.load();
    d["disk_hits"] = mt.disk_cache_hits.load();
    d["disk_writes"] = mt.disk_cache_writes.load();
    d["signatures"] = plan_cache_size();
    d["host_to_device_bytes"] = mt.host_to_device_bytes.load();
    d["device_to_host_bytes"] = mt.device_to_host_bytes.load();
    d["cache_dir"] = cache_directory();
    return d;
  });
  m.def("_fallback_counts", &fallback_counts);
  m.def("_op_counts", &plan_run_counts);
  m.def("_reset_metrics", &reset_metrics);
  m.def("_cache_dir", &cache_directory);
}
