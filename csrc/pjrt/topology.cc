#include "pjrt/topology.h"

#include <cstdlib>
#include <sstream>
#include <type_traits>

namespace tpu::pjrt {

void prepare_libtpu_offline_env() {
  setenv("TPU_SKIP_MDS_QUERY", "1", /*overwrite=*/0);
  setenv("ALLOW_MULTIPLE_LIBTPU_LOAD", "1", /*overwrite=*/0);
  // Without these libtpu logs warnings about the (absent) host it would run on.
  setenv("TPU_ACCELERATOR_TYPE", "v6e-1", /*overwrite=*/0);
  setenv("TPU_WORKER_HOSTNAMES", "localhost", /*overwrite=*/0);
}

Topology::Topology(std::shared_ptr<const Api> api, const std::string& name,
                   const std::vector<NamedOption>& options)
    : api_(std::move(api)), name_(name) {
  std::vector<abi::NamedValue> values = to_named_values(options);
  abi::TopologyDescription_Create_Args create{};
  create.struct_size = TPU_PJRT_STRUCT_SIZE(abi::TopologyDescription_Create_Args, topology);
  create.topology_name = name_.c_str();
  create.topology_name_size = name_.size();
  create.create_options = values.data();
  create.num_options = values.size();
  std::string what = "PJRT_TopologyDescription_Create(\"" + name_ + "\")";
  api_->call(abi::kTopologyDescription_Create, &create, what.c_str());
  topology_ = create.topology;

  try {
    if (api_->has(abi::kTopologyDescription_PlatformName)) {
      abi::TopologyDescription_PlatformName_Args args{};
      args.struct_size =
          TPU_PJRT_STRUCT_SIZE(abi::TopologyDescription_PlatformName_Args, platform_name_size);
      args.topology = topology_;
      api_->call(abi::kTopologyDescription_PlatformName, &args,
                 "PJRT_TopologyDescription_PlatformName");
      platform_name_.assign(args.platform_name, args.platform_name_size);
    }
    if (api_->has(abi::kTopologyDescription_PlatformVersion)) {
      abi::TopologyDescription_PlatformVersion_Args args{};
      args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::TopologyDescription_PlatformVersion_Args,
                                              platform_version_size);
      args.topology = topology_;
      api_->call(abi::kTopologyDescription_PlatformVersion, &args,
                 "PJRT_TopologyDescription_PlatformVersion");
      platform_version_.assign(args.platform_version, args.platform_version_size);
    }
    abi::TopologyDescription_GetDeviceDescriptions_Args list{};
    list.struct_size =
        TPU_PJRT_STRUCT_SIZE(abi::TopologyDescription_GetDeviceDescriptions_Args, num_descriptions);
    list.topology = topology_;
    api_->call(abi::kTopologyDescription_GetDeviceDescriptions, &list,
               "PJRT_TopologyDescription_GetDeviceDescriptions");
    for (size_t i = 0; i < list.num_descriptions; ++i) {
      TopologyDevice d = describe_device(*api_, list.descriptions[i]);
      devices_.push_back(std::move(d));
    }
  } catch (...) {
    abi::TopologyDescription_Destroy_Args args{};
    args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::TopologyDescription_Destroy_Args, topology);
    args.topology = topology_;
    try {
      api_->call(abi::kTopologyDescription_Destroy, &args, "PJRT_TopologyDescription_Destroy");
    } catch (...) {
    }
    throw;
  }
}

Topology::~Topology() {
  try {
    abi::TopologyDescription_Destroy_Args args{};
    args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::TopologyDescription_Destroy_Args, topology);
    args.topology = topology_;
    api_->call(abi::kTopologyDescription_Destroy, &args, "PJRT_TopologyDescription_Destroy");
  } catch (...) {
  }
}

std::vector<int64_t> Topology::device_ids() const {
  std::vector<int64_t> ids;
  for (const TopologyDevice& d : devices_) ids.push_back(d.id);
  return ids;
}

std::map<std::string, AttributeValue> Topology::attributes() const {
  if (!api_->has(abi::kTopologyDescription_Attributes)) return {};
  abi::TopologyDescription_Attributes_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::TopologyDescription_Attributes_Args, num_attributes);
  args.topology = topology_;
  api_->call(abi::kTopologyDescription_Attributes, &args, "PJRT_TopologyDescription_Attributes");
  return read_named_values(args.attributes, args.num_attributes);
}

std::string Topology::serialize() const {
  abi::TopologyDescription_Serialize_Args args{};
  args.struct_size =
      TPU_PJRT_STRUCT_SIZE(abi::TopologyDescription_Serialize_Args, serialized_topology_deleter);
  args.topology = topology_;
  api_->call(abi::kTopologyDescription_Serialize, &args, "PJRT_TopologyDescription_Serialize");
  std::string bytes(args.serialized_bytes, args.serialized_bytes_size);
  if (args.serialized_topology_deleter != nullptr) {
    args.serialized_topology_deleter(args.serialized_topology);
  }
  return bytes;
}

std::string CompiledMemoryStats::to_string() const {
  std::ostringstream out;
  out << "generated_code=" << generated_code_size_in_bytes << " argument=" << argument_size_in_bytes
      << " output=" << output_size_in_bytes << " alias=" << alias_size_in_bytes
      << " temp=" << temp_size_in_bytes << " peak=" << peak_memory_in_bytes
      << " total=" << total_size_in_bytes << " total_allocation=" << total_allocation_bytes
      << " indefinite_allocations=" << indefinite_allocations
      << " peak_unpadded_heap=" << peak_unpadded_heap_bytes << " | host: generated_code="
      << host_generated_code_size_in_bytes << " argument=" << host_argument_size_in_bytes
      << " output=" << host_output_size_in_bytes << " alias=" << host_alias_size_in_bytes
      << " temp=" << host_temp_size_in_bytes;
  return out.str();
}

double cost_property(const std::map<std::string, AttributeValue>& properties,
                     const std::string& name) {
  auto as_double = [](const AttributeValue& v) -> double {
    if (auto* f = std::get_if<float>(&v)) return *f;
    if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
    return -1;
  };
  auto exact = properties.find(name);
  if (exact != properties.end()) return as_double(exact->second);
  for (auto it = properties.lower_bound(name); it != properties.end(); ++it) {
    if (it->first.compare(0, name.size(), name) != 0) break;
    return as_double(it->second);
  }
  return -1;
}

CostSummary CostSummary::from(const std::map<std::string, AttributeValue>& properties) {
  CostSummary s;
  s.flops = cost_property(properties, "flops");
  s.transcendentals = cost_property(properties, "transcendentals");
  s.bytes_accessed = cost_property(properties, "bytes accessed");
  s.optimal_seconds = cost_property(properties, "optimal_seconds");
  s.utilization = cost_property(properties, "utilization");
  return s;
}

UnloadedExecutable::UnloadedExecutable(std::shared_ptr<const Api> api, abi::Executable* exe)
    : api_(std::move(api)), exe_(exe) {}

UnloadedExecutable::~UnloadedExecutable() {
  try {
    abi::Executable_Destroy_Args args{};
    args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Executable_Destroy_Args, executable);
    args.executable = exe_;
    api_->call(abi::kExecutable_Destroy, &args, "PJRT_Executable_Destroy");
  } catch (...) {
  }
}

std::string UnloadedExecutable::name() const {
  abi::Executable_Name_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Executable_Name_Args, executable_name_size);
  args.executable = exe_;
  api_->call(abi::kExecutable_Name, &args, "PJRT_Executable_Name");
  return std::string(args.executable_name, args.executable_name_size);
}

size_t UnloadedExecutable::num_outputs() const {
  abi::Executable_NumOutputs_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Executable_NumOutputs_Args, num_outputs);
  args.executable = exe_;
  api_->call(abi::kExecutable_NumOutputs, &args, "PJRT_Executable_NumOutputs");
  return args.num_outputs;
}

size_t UnloadedExecutable::num_partitions() const {
  abi::Executable_NumPartitions_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Executable_NumPartitions_Args, num_partitions);
  args.executable = exe_;
  api_->call(abi::kExecutable_NumPartitions, &args, "PJRT_Executable_NumPartitions");
  return args.num_partitions;
}

size_t UnloadedExecutable::num_replicas() const {
  abi::Executable_NumReplicas_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Executable_NumReplicas_Args, num_replicas);
  args.executable = exe_;
  api_->call(abi::kExecutable_NumReplicas, &args, "PJRT_Executable_NumReplicas");
  return args.num_replicas;
}

std::map<std::string, AttributeValue> UnloadedExecutable::cost_analysis() const {
  abi::Executable_GetCostAnalysis_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Executable_GetCostAnalysis_Args, properties);
  args.executable = exe_;
  api_->call(abi::kExecutable_GetCostAnalysis, &args, "PJRT_Executable_GetCostAnalysis");
  return read_named_values(args.properties, args.num_properties);
}

std::string UnloadedExecutable::optimized_program() const {
  if (!api_->has(abi::kExecutable_OptimizedProgram)) return "";
  abi::Program program{};
  program.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Program, format_size);
  abi::Executable_OptimizedProgram_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Executable_OptimizedProgram_Args, program);
  args.executable = exe_;
  args.program = &program;
  api_->call(abi::kExecutable_OptimizedProgram, &args, "PJRT_Executable_OptimizedProgram");
  std::string code(program.code_size, '\0');
  if (code.empty()) return code;
  program.code = code.data();
  api_->call(abi::kExecutable_OptimizedProgram, &args, "PJRT_Executable_OptimizedProgram");
  return code;
}

CompiledMemoryStats UnloadedExecutable::memory_stats() const {
  abi::Executable_GetCompiledMemoryStats_Args args{};
  args.struct_size =
      TPU_PJRT_STRUCT_SIZE(abi::Executable_GetCompiledMemoryStats_Args, peak_unpadded_heap_bytes);
  args.executable = exe_;
  // Pre-set the outputs so fields an older plugin does not know about read as -1.
  int64_t* first = &args.generated_code_size_in_bytes;
  int64_t* last = &args.peak_unpadded_heap_bytes;
  for (int64_t* p = first; p <= last; ++p) *p = -1;
  api_->call(abi::kExecutable_GetCompiledMemoryStats, &args,
             "PJRT_Executable_GetCompiledMemoryStats");
  CompiledMemoryStats s;
  s.generated_code_size_in_bytes = args.generated_code_size_in_bytes;
  s.argument_size_in_bytes = args.argument_size_in_bytes;
  s.output_size_in_bytes = args.output_size_in_bytes;
  s.alias_size_in_bytes = args.alias_size_in_bytes;
  s.temp_size_in_bytes = args.temp_size_in_bytes;
  s.host_generated_code_size_in_bytes = args.host_generated_code_size_in_bytes;
  s.host_argument_size_in_bytes = args.host_argument_size_in_bytes;
  s.host_output_size_in_bytes = args.host_output_size_in_bytes;
  s.host_alias_size_in_bytes = args.host_alias_size_in_bytes;
  s.host_temp_size_in_bytes = args.host_temp_size_in_bytes;
  s.peak_memory_in_bytes = args.peak_memory_in_bytes;
  s.total_size_in_bytes = args.total_size_in_bytes;
  s.total_allocation_bytes = args.total_allocation_bytes;
  s.indefinite_allocations = args.indefinite_allocations;
  s.peak_unpadded_heap_bytes = args.peak_unpadded_heap_bytes;
  return s;
}

std::string UnloadedExecutable::serialize() const {
  abi::Executable_Serialize_Args args{};
  args.struct_size =
      TPU_PJRT_STRUCT_SIZE(abi::Executable_Serialize_Args, serialized_executable_deleter);
  args.executable = exe_;
  api_->call(abi::kExecutable_Serialize, &args, "PJRT_Executable_Serialize");
  std::string bytes(args.serialized_bytes, args.serialized_bytes_size);
  if (args.serialized_executable_deleter != nullptr) {
    args.serialized_executable_deleter(args.serialized_executable);
  }
  return bytes;
}

std::unique_ptr<UnloadedExecutable> compile_for_topology(std::shared_ptr<const Api> api,
                                                         const Topology& topology,
                                                         const std::string& mlir,
                                                         const CompileOptions& options) {
  if (api.get() != topology.api_ptr().get()) {
    throw PjrtError(abi::kInvalidArgument,
                    "compile_for_topology: the topology was made by a different PJRT plugin");
  }
  std::string code = mlir;
  static const char kFormat[] = "mlir";
  abi::Program program{};
  program.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Program, format_size);
  program.code = code.data();
  program.code_size = code.size();
  program.format = kFormat;
  program.format_size = sizeof(kFormat) - 1;
  std::string encoded = options.encode();
  abi::Compile_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Compile_Args, executable);
  args.topology = topology.raw();
  args.program = &program;
  args.compile_options = encoded.data();
  args.compile_options_size = encoded.size();
  args.client = nullptr;
  std::string what = "PJRT_Compile(topology \"" + topology.name() + "\")";
  api->call(abi::kCompile, &args, what.c_str());
  return std::make_unique<UnloadedExecutable>(std::move(api), args.executable);
}

}  // namespace tpu::pjrt
