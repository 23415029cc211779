#include "pjrt/executable.h"

namespace tpu::pjrt {

Executable::Executable(std::shared_ptr<const Api> api, abi::LoadedExecutable* exe)
    : api_(std::move(api)), exe_(exe) {
  abi::Executable_NumOutputs_Args outputs{};
  outputs.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Executable_NumOutputs_Args, num_outputs);
  outputs.executable = executable();
  api_->call(abi::kExecutable_NumOutputs, &outputs, "PJRT_Executable_NumOutputs");
  num_outputs_ = outputs.num_outputs;

  abi::LoadedExecutable_AddressableDevices_Args devices{};
  devices.struct_size =
      TPU_PJRT_STRUCT_SIZE(abi::LoadedExecutable_AddressableDevices_Args, num_addressable_devices);
  devices.executable = exe_;
  api_->call(abi::kLoadedExecutable_AddressableDevices, &devices,
             "PJRT_LoadedExecutable_AddressableDevices");
  num_devices_ = devices.num_addressable_devices;
}

Executable::~Executable() {
  try {
    if (last_done_) last_done_->await("execution of an executable being destroyed");
  } catch (...) {
    // Its error went to the outputs' buffers; the executable is still destroyed below.
  }
  try {
    if (unloaded_ != nullptr) {
      abi::Executable_Destroy_Args args{};
      args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Executable_Destroy_Args, executable);
      args.executable = unloaded_;
      api_->call(abi::kExecutable_Destroy, &args, "PJRT_Executable_Destroy");
    }
    abi::LoadedExecutable_Destroy_Args args{};
    args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::LoadedExecutable_Destroy_Args, executable);
    args.executable = exe_;
    api_->call(abi::kLoadedExecutable_Destroy, &args, "PJRT_LoadedExecutable_Destroy");
  } catch (...) {
  }
}

abi::Executable* Executable::executable() const {
  if (unloaded_ == nullptr) {
    abi::LoadedExecutable_GetExecutable_Args args{};
    args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::LoadedExecutable_GetExecutable_Args, executable);
    args.loaded_executable = exe_;
    api_->call(abi::kLoadedExecutable_GetExecutable, &args, "PJRT_LoadedExecutable_GetExecutable");
    unloaded_ = args.executable;
  }
  return unloaded_;
}

std::vector<std::unique_ptr<Buffer>> Executable::execute(
    const std::vector<abi::Buffer*>& args, std::shared_ptr<Event>* done) const {
  auto outputs = execute_sharded({args}, done);
  return std::move(outputs.at(0));
}

std::vector<std::vector<std::unique_ptr<Buffer>>> Executable::execute_sharded(
    const std::vector<std::vector<abi::Buffer*>>& args, std::shared_ptr<Event>* done) const {
  if (args.size() != num_devices_) {
    throw PjrtError(abi::kInvalidArgument, "executable runs on " + std::to_string(num_devices_) +
                                               " devices but got " + std::to_string(args.size()) +
                                               " argument lists");
  }
  abi::ExecuteOptions options{};
  options.struct_size = TPU_PJRT_STRUCT_SIZE(abi::ExecuteOptions, num_hlo_output_callbacks);

  std::vector<abi::Buffer* const*> arg_lists;
  std::vector<std::vector<abi::Buffer*>> raw_outputs(args.size(),
                                                     std::vector<abi::Buffer*>(num_outputs_));
  std::vector<abi::Buffer**> output_lists;
  for (size_t d = 0; d < args.size(); ++d) {
    arg_lists.push_back(args[d].data());
    output_lists.push_back(raw_outputs[d].data());
  }
  abi::LoadedExecutable_Execute_Args exec{};
  exec.struct_size = TPU_PJRT_STRUCT_SIZE(abi::LoadedExecutable_Execute_Args, execute_device);
  exec.executable = exe_;
  exec.options = &options;
  exec.argument_lists = arg_lists.data();
  exec.num_devices = args.size();
  exec.num_args = args.empty() ? 0 : args[0].size();
  exec.output_lists = output_lists.data();
  std::vector<abi::Event*> events(args.size(), nullptr);
  exec.device_complete_events = events.data();
  api_->call(abi::kLoadedExecutable_Execute, &exec, "PJRT_LoadedExecutable_Execute");

  // Wait on the last device's event; destroy the others right away.
  for (size_t d = 0; d + 1 < events.size(); ++d) Event(api_, events[d]);
  auto finished = std::make_shared<Event>(api_, events.back());
  {
    std::lock_guard<std::mutex> lock(last_done_mu_);
    last_done_ = finished;
  }
  if (done != nullptr) *done = std::move(finished);
  std::vector<std::vector<std::unique_ptr<Buffer>>> outputs(args.size());
  for (size_t d = 0; d < args.size(); ++d) {
    for (abi::Buffer* b : raw_outputs[d]) outputs[d].push_back(std::make_unique<Buffer>(api_, b));
  }
  return outputs;
}

std::string Executable::serialize() const {
  abi::Executable_Serialize_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Executable_Serialize_Args, serialized_executable_deleter);
  args.executable = executable();
  api_->call(abi::kExecutable_Serialize, &args, "PJRT_Executable_Serialize");
  std::string bytes(args.serialized_bytes, args.serialized_bytes_size);
  if (args.serialized_executable_deleter != nullptr) {
    args.serialized_executable_deleter(args.serialized_executable);
  }
  return bytes;
}

std::map<std::string, AttributeValue> Executable::cost_analysis() const {
  if (!api_->has(abi::kExecutable_GetCostAnalysis)) return {};
  abi::Executable_GetCostAnalysis_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Executable_GetCostAnalysis_Args, properties);
  args.executable = executable();
  api_->call(abi::kExecutable_GetCostAnalysis, &args, "PJRT_Executable_GetCostAnalysis");
  return read_named_values(args.properties, args.num_properties);
}

}  // namespace tpu::pjrt
