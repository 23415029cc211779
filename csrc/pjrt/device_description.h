// What a PJRT_DeviceDescription says about a device (shared by clients and topologies).
#pragma once

#include <string>

#include "pjrt/api.h"

namespace tpu::pjrt {

struct DeviceDescription {
  abi::DeviceDescription* handle = nullptr;  // owned by the client or topology
  int id = 0;
  int process_index = 0;
  std::string kind;  // "cpu", "TPU v6 lite", ...
};

DeviceDescription describe_device(const Api& api, abi::DeviceDescription* handle);

}  // namespace tpu::pjrt
