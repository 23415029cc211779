// The tpu random generator: a (seed, offset) pair; each random op consumes one offset and
// derives its THREE_FRY key from both, so results are deterministic under a seed.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace tpu::engine {

class TpuGenerator : public c10::GeneratorImpl {
 public:
  explicit TpuGenerator(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);
  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;
  // State: 16 bytes, seed then offset (little endian uint64).
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  // Returns the key for one random op and advances the offset.
  std::pair<uint64_t, uint64_t> next_key() { return next_keys(1); }
  // Reserves `n` consecutive offsets (a compiled graph's random ops) and returns the first key.
  std::pair<uint64_t, uint64_t> next_keys(uint64_t n);

 private:
  TpuGenerator* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);

}  // namespace tpu::engine
