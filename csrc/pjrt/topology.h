// Ahead-of-time compilation for a device topology without the devices (libtpu on a host with
// no TPU): PJRT_TopologyDescription_* and the client-free PJRT_Compile, whose result is an
// unloaded PJRT_Executable that offers cost analysis, compiled memory stats and Serialize.
//
// libtpu needs TPU_SKIP_MDS_QUERY=1 in the environment *before* PJRT_Plugin_Initialize (i.e.
// before Api::load) on a host that is not a Cloud TPU VM; otherwise initialization polls the
// GCE metadata server and does not return. prepare_libtpu_offline_env() sets it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "pjrt/api.h"
#include "pjrt/device_description.h"
#include "pjrt/named_value.h"
#include "pjrt/compile_options.h"

namespace tpu::pjrt {

// For hosts without a TPU; call before Api::load(libtpu). Sets, unless already set:
//   TPU_SKIP_MDS_QUERY=1          PJRT_Plugin_Initialize otherwise polls the GCE metadata
//                                 server (30 tries per key) and does not return in minutes;
//   ALLOW_MULTIPLE_LIBTPU_LOAD=1  PJRT_Plugin_Initialize otherwise takes /tmp/libtpu_lockfile
//                                 and a second process fails with ABORTED "Internal error when
//                                 accessing libtpu multi-process lockfile".
// Do not call it on a TPU host that will also run programs: the lockfile guards the chips.
void prepare_libtpu_offline_env();


using TopologyDevice = DeviceDescription;

class Topology {
 public:
  // PJRT_TopologyDescription_Create, e.g. "v6e:2x2" with {"chips_per_host_bounds", {2, 2, 1}}.
  // Throws PjrtError with the plugin's message when the name or an option is refused.
  Topology(std::shared_ptr<const Api> api, const std::string& name,
           const std::vector<NamedOption>& options = {});
  ~Topology();
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  const Api& api() const { return *api_; }
  std::shared_ptr<const Api> api_ptr() const { return api_; }
  abi::TopologyDescription* raw() const { return topology_; }
  const std::string& name() const { return name_; }
  const std::string& platform_name() const { return platform_name_; }        // "tpu"
  const std::string& platform_version() const { return platform_version_; }  // libtpu build
  const std::vector<TopologyDevice>& devices() const { return devices_; }
  // Ids in the plugin's description order (not sorted: v6e:4x4 lists 0 1 4 5 2 3 6 7 ...).
  std::vector<int64_t> device_ids() const;
  // PJRT_TopologyDescription_Attributes; empty if the plugin does not provide them.
  std::map<std::string, AttributeValue> attributes() const;
  // PJRT_TopologyDescription_Serialize (a cache-key ingredient).
  std::string serialize() const;

 private:
  std::shared_ptr<const Api> api_;
  abi::TopologyDescription* topology_ = nullptr;
  std::string name_;
  std::string platform_name_;
  std::string platform_version_;
  std::vector<TopologyDevice> devices_;
};

// PJRT_Executable_GetCompiledMemoryStats, per device. -1 marks a field the plugin's struct
// does not have (older plugins stop after host_temp_size_in_bytes).
struct CompiledMemoryStats {
  int64_t generated_code_size_in_bytes = -1;
  int64_t argument_size_in_bytes = -1;
  int64_t output_size_in_bytes = -1;
  int64_t alias_size_in_bytes = -1;
  int64_t temp_size_in_bytes = -1;
  int64_t host_generated_code_size_in_bytes = -1;
  int64_t host_argument_size_in_bytes = -1;
  int64_t host_output_size_in_bytes = -1;
  int64_t host_alias_size_in_bytes = -1;
  int64_t host_temp_size_in_bytes = -1;
  int64_t peak_memory_in_bytes = -1;
  int64_t total_size_in_bytes = -1;
  int64_t total_allocation_bytes = -1;
  int64_t indefinite_allocations = -1;
  int64_t peak_unpadded_heap_bytes = -1;
  std::string to_string() const;
};

// The numbers of PJRT_Executable_GetCostAnalysis we use. XLA names the properties "flops",
// "transcendentals", "bytes accessed", "optimal_seconds", "utilization", plus per-operand
// "bytes accessed0{}", "bytes accessedout{}", "utilization0{}" (older XLA: "bytes accessed
// operand 0 {}"); the totals are the exact names, falling back to the first name with the prefix.
struct CostSummary {
  double flops = -1;
  double transcendentals = -1;
  double bytes_accessed = -1;
  double optimal_seconds = -1;
  double utilization = -1;
  static CostSummary from(const std::map<std::string, AttributeValue>& properties);
};
// Value of `name`, or of the first property whose name starts with `name`; -1 if none.
double cost_property(const std::map<std::string, AttributeValue>& properties,
                     const std::string& name);

// RAII owner of an unloaded PJRT_Executable (the result of PJRT_Compile).
class UnloadedExecutable {
 public:
  UnloadedExecutable(std::shared_ptr<const Api> api, abi::Executable* exe);
  ~UnloadedExecutable();
  UnloadedExecutable(const UnloadedExecutable&) = delete;
  UnloadedExecutable& operator=(const UnloadedExecutable&) = delete;

  abi::Executable* raw() const { return exe_; }
  std::string name() const;
  size_t num_outputs() const;
  size_t num_partitions() const;
  size_t num_replicas() const;
  // All properties as the plugin reports them (float values on libtpu).
  std::map<std::string, AttributeValue> cost_analysis() const;
  // The module after the plugin's optimizations, in the plugin's format (libtpu:
  // "hlo_with_config", a serialized HloModuleProtoWithConfig); empty if the plugin has none.
  std::string optimized_program() const;
  CompiledMemoryStats memory_stats() const;
  // Bytes for PJRT_Executable_DeserializeAndLoad on a host with the devices and the same
  // plugin build.
  std::string serialize() const;

 private:
  std::shared_ptr<const Api> api_;
  abi::Executable* exe_;
};

// PJRT_Compile with no client: compiles StableHLO (MLIR text or bytecode) for `topology`.
// For SPMD, set options.num_partitions, use_spmd_partitioning and device_assignment (the ids
// from topology.device_ids()); there is no client to supply a default assignment.
std::unique_ptr<UnloadedExecutable> compile_for_topology(std::shared_ptr<const Api> api,
                                                         const Topology& topology,
                                                         const std::string& mlir,
                                                         const CompileOptions& options);

}  // namespace tpu::pjrt
