#include "pjrt/client.h"

#include "pjrt/device_description.h"
#include "pjrt/event.h"

namespace tpu::pjrt {

Client::Client(std::shared_ptr<const Api> api, const std::vector<NamedOption>& options)
    : api_(std::move(api)) {
  std::vector<abi::NamedValue> values = to_named_values(options);
  abi::Client_Create_Args create{};
  create.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Client_Create_Args, kv_try_get_user_arg);
  create.create_options = values.data();
  create.num_options = values.size();
  api_->call(abi::kClient_Create, &create, "PJRT_Client_Create");
  client_ = create.client;

  abi::Client_PlatformName_Args name{};
  name.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Client_PlatformName_Args, platform_name_size);
  name.client = client_;
  api_->call(abi::kClient_PlatformName, &name, "PJRT_Client_PlatformName");
  platform_name_.assign(name.platform_name, name.platform_name_size);

  abi::Client_PlatformVersion_Args version{};
  version.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Client_PlatformVersion_Args, platform_version_size);
  version.client = client_;
  api_->call(abi::kClient_PlatformVersion, &version, "PJRT_Client_PlatformVersion");
  platform_version_.assign(version.platform_version, version.platform_version_size);

  abi::Client_Devices_Args list{};
  list.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Client_Devices_Args, num_devices);
  list.client = client_;
  api_->call(abi::kClient_AddressableDevices, &list, "PJRT_Client_AddressableDevices");
  for (size_t i = 0; i < list.num_devices; ++i) {
    DeviceInfo info;
    info.handle = list.devices[i];
    abi::Device_GetDescription_Args desc{};
    desc.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Device_GetDescription_Args, device_description);
    desc.device = info.handle;
    api_->call(abi::kDevice_GetDescription, &desc, "PJRT_Device_GetDescription");
    DeviceDescription described = describe_device(*api_, desc.device_description);
    info.id = described.id;
    info.kind = described.kind;
    abi::Device_LocalHardwareId_Args hw{};
    hw.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Device_LocalHardwareId_Args, local_hardware_id);
    hw.device = info.handle;
    api_->call(abi::kDevice_LocalHardwareId, &hw, "PJRT_Device_LocalHardwareId");
    info.local_hardware_id = hw.local_hardware_id;
    devices_.push_back(info);
  }
}

Client::~Client() {
  // The client is process-lifetime in torch-tpu; destroying it during interpreter teardown
  // races with plugin worker threads, so only an explicit owner (tests) destroys it.
  abi::Client_Destroy_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Client_Destroy_Args, client);
  args.client = client_;
  try {
    api_->call(abi::kClient_Destroy, &args, "PJRT_Client_Destroy");
  } catch (...) {
  }
}

std::unique_ptr<Buffer> Client::buffer_from_host(const void* data, abi::BufferType type,
                                                 const std::vector<int64_t>& dims,
                                                 int device) const {
  if (type == abi::kInvalid) {  // XLA CHECK-fails on INVALID; refuse it here.
    throw PjrtError(abi::kInvalidArgument, "buffer_from_host: invalid element type");
  }
  if (device < 0 || device >= static_cast<int>(devices_.size())) {
    throw PjrtError(abi::kInvalidArgument, "buffer_from_host: device index " +
                                               std::to_string(device) + " out of range");
  }
  abi::Client_BufferFromHostBuffer_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Client_BufferFromHostBuffer_Args, buffer);
  args.client = client_;
  args.data = data;
  args.type = type;
  args.dims = dims.data();
  args.num_dims = dims.size();
  args.host_buffer_semantics = abi::kImmutableOnlyDuringCall;
  args.device = devices_[device].handle;
  api_->call(abi::kClient_BufferFromHostBuffer, &args, "PJRT_Client_BufferFromHostBuffer");
  Event done(api_, args.done_with_host_buffer);  // destroyed here; data was copied
  return std::make_unique<Buffer>(api_, args.buffer);
}

std::unique_ptr<Executable> Client::compile(const std::string& mlir,
                                            const CompileOptions& options) const {
  std::string encoded = options.encode();
  static const char kFormat[] = "mlir";
  abi::Program program{};
  program.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Program, format_size);
  program.code = const_cast<char*>(mlir.data());
  program.code_size = mlir.size();
  program.format = kFormat;
  program.format_size = sizeof(kFormat) - 1;
  abi::Client_Compile_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Client_Compile_Args, executable);
  args.client = client_;
  args.program = &program;
  args.compile_options = encoded.data();
  args.compile_options_size = encoded.size();
  api_->call(abi::kClient_Compile, &args, "PJRT_Client_Compile");
  return std::make_unique<Executable>(api_, args.executable);
}

std::unique_ptr<Executable> Client::deserialize(const std::string& bytes) const {
  abi::Executable_DeserializeAndLoad_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Executable_DeserializeAndLoad_Args, load_options);
  args.client = client_;
  args.serialized_executable = bytes.data();
  args.serialized_executable_size = bytes.size();
  api_->call(abi::kExecutable_DeserializeAndLoad, &args, "PJRT_Executable_DeserializeAndLoad");
  return std::make_unique<Executable>(api_, args.loaded_executable);
}

std::unique_ptr<Executable> Client::try_deserialize(const std::string& bytes, std::string* error) const {
  abi::Executable_DeserializeAndLoad_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Executable_DeserializeAndLoad_Args, load_options);
  args.client = client_;
  args.serialized_executable = bytes.data();
  args.serialized_executable_size = bytes.size();
  void* fn = api_->slot(abi::kExecutable_DeserializeAndLoad);
  if (fn == nullptr) {
    *error = "PJRT_Executable_DeserializeAndLoad is not provided by the plugin";
    return nullptr;
  }
  abi::Error* failed = reinterpret_cast<abi::Error* (*)(abi::Executable_DeserializeAndLoad_Args*)>(fn)(&args);
  if (failed != nullptr) {
    *error = take_error(*api_, failed, "PJRT_Executable_DeserializeAndLoad").what();
    return nullptr;
  }
  return std::make_unique<Executable>(api_, args.loaded_executable);
}

MemoryStats Client::memory_stats(int device) const {
  MemoryStats stats;
  if (!api_->has(abi::kDevice_MemoryStats)) return stats;
  abi::Device_MemoryStats_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Device_MemoryStats_Args, peak_allocated_bytes_is_set);
  args.device = devices_.at(device).handle;
  try {
    api_->call(abi::kDevice_MemoryStats, &args, "PJRT_Device_MemoryStats");
  } catch (const PjrtError&) {
    return stats;  // the CPU plugin answers UNIMPLEMENTED
  }
  stats.supported = true;
  stats.bytes_in_use = args.bytes_in_use;
  stats.peak_bytes_in_use = args.peak_bytes_in_use_is_set ? args.peak_bytes_in_use : 0;
  stats.bytes_limit = args.bytes_limit_is_set ? args.bytes_limit : 0;
  return stats;
}

}  // namespace tpu::pjrt
