// PrivateUse1HooksInterface: what PyTorch asks a backend about itself.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include "engine/device/host_allocator.h"
#include <ATen/core/CachingHostAllocator.h>

#include "engine/device/generator.h"
#include "engine/device/guard.h"
#include "engine/device/runtime.h"
#include "engine/device/storage.h"

namespace tpu::engine {
namespace {

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count_or_zero() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return runtime_initialized(); }
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(device_count_or_zero());
  }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  c10::DeviceIndex getCurrentDevice() const override {
    return static_cast<c10::DeviceIndex>(current_device());
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = getCurrentDevice();
    set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override {
    return default_generator(d < 0 ? static_cast<c10::DeviceIndex>(current_device()) : d);
  }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override {
    return new_generator(d < 0 ? static_cast<c10::DeviceIndex>(current_device()) : d);
  }
  at::Device getDeviceFromPtr(void*) const override {
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(current_device()));
  }
  // Host memory is ordinary pageable memory: PJRT copies it synchronously, so "pinned" host
  // tensors come from PyTorch's CPU caching host allocator and are only marked as such.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage, newsize);
  }
  bool isPinnedPtr(const void* data) const override {
    return is_pinned_host_ptr(data);
  }
  at::Allocator* getPinnedMemoryAllocator() const override {
    return at::getHostAllocator(at::kPrivateUse1);
  }
};

struct Register {
  Register() { at::RegisterPrivateUse1HooksInterface(new TpuHooks()); }
} g_register;

}  // namespace
}  // namespace tpu::engine
