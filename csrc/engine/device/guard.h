// Current-device state and the DeviceGuardImpl for PrivateUse1.
#pragma once

namespace tpu::engine {
int current_device();
void set_current_device(int device);
}  // namespace tpu::engine
