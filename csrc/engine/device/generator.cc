#include "engine/device/generator.h"

#include <ATen/Functions.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/core/TensorImpl.h>

#include <deque>
#include <mutex>
#include <random>

#include "engine/device/runtime.h"

namespace tpu::engine {

TpuGenerator::TpuGenerator(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void TpuGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t TpuGenerator::seed() {
  uint64_t s = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  set_current_seed(s);
  return s;
}

void TpuGenerator::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.numel() == 16 && new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
              "tpu generator state must be a uint8 tensor of 16 bytes (seed, offset)");
  const auto* bytes = static_cast<const uint64_t*>(new_state.data());
  seed_ = bytes[0];
  offset_ = bytes[1];
}

c10::intrusive_ptr<c10::TensorImpl> TpuGenerator::get_state() const {
  at::Tensor state = at::empty({16}, at::kByte);
  auto* bytes = state.data_ptr<uint8_t>();
  std::memcpy(bytes, &seed_, 8);
  std::memcpy(bytes + 8, &offset_, 8);
  return state.getIntrusivePtr();
}

std::pair<uint64_t, uint64_t> TpuGenerator::next_keys(uint64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::pair<uint64_t, uint64_t> key{seed_, offset_};
  offset_ += n;
  return key;
}

TpuGenerator* TpuGenerator::clone_impl() const {
  auto* g = new TpuGenerator(device().index(), seed_);
  g->offset_ = offset_;
  return g;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::mutex mu;
  static std::deque<at::Generator> generators;  // deque: references stay valid
  std::lock_guard<std::mutex> lock(mu);
  while (static_cast<int>(generators.size()) <= device) {
    generators.push_back(at::make_generator<TpuGenerator>(static_cast<c10::DeviceIndex>(generators.size())));
  }
  return generators[device];
}

at::Generator new_generator(c10::DeviceIndex device) {
  return at::make_generator<TpuGenerator>(device < 0 ? 0 : device);
}

}  // namespace tpu::engine
