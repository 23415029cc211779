#include "pjrt/device_description.h"

namespace tpu::pjrt {

DeviceDescription describe_device(const Api& api, abi::DeviceDescription* handle) {
  DeviceDescription d;
  d.handle = handle;
  abi::DeviceDescription_Id_Args id{};
  id.struct_size = TPU_PJRT_STRUCT_SIZE(abi::DeviceDescription_Id_Args, id);
  id.device_description = handle;
  api.call(abi::kDeviceDescription_Id, &id, "PJRT_DeviceDescription_Id");
  d.id = id.id;
  abi::DeviceDescription_Kind_Args kind{};
  kind.struct_size = TPU_PJRT_STRUCT_SIZE(abi::DeviceDescription_Kind_Args, device_kind_size);
  kind.device_description = handle;
  api.call(abi::kDeviceDescription_Kind, &kind, "PJRT_DeviceDescription_Kind");
  d.kind.assign(kind.device_kind, kind.device_kind_size);
  if (api.has(abi::kDeviceDescription_ProcessIndex)) {
    abi::DeviceDescription_ProcessIndex_Args pi{};
    pi.struct_size = TPU_PJRT_STRUCT_SIZE(abi::DeviceDescription_ProcessIndex_Args, process_index);
    pi.device_description = handle;
    api.call(abi::kDeviceDescription_ProcessIndex, &pi, "PJRT_DeviceDescription_ProcessIndex");
    d.process_index = pi.process_index;
  }
  return d;
}

}  // namespace tpu::pjrt
