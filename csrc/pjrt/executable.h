// RAII owner of a PJRT_LoadedExecutable: execute with donation, serialize, cost analysis.
#pragma once

#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include "pjrt/api.h"
#include "pjrt/buffer.h"
#include "pjrt/event.h"

namespace tpu::pjrt {

class Executable {
 public:
  Executable(std::shared_ptr<const Api> api, abi::LoadedExecutable* exe);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  size_t num_outputs() const { return num_outputs_; }

  // Runs on one device. Arguments named by the module as donated (tf.aliasing_output) are
  // consumed: their buffers are deleted by the runtime, the Buffer objects stay valid handles.
  // Returns at once; outputs become ready asynchronously.
  // `done`, when given, receives an event that fires when the execution has finished.
  std::vector<std::unique_ptr<Buffer>> execute(const std::vector<abi::Buffer*>& args,
                                               std::shared_ptr<Event>* done = nullptr) const;
  // SPMD / multi-device: args[d][i] for each addressable device d; returns outputs[d][o].
  std::vector<std::vector<std::unique_ptr<Buffer>>> execute_sharded(
      const std::vector<std::vector<abi::Buffer*>>& args, std::shared_ptr<Event>* done = nullptr) const;

  std::string serialize() const;
  // PJRT_Executable_GetCostAnalysis properties (flops, bytes accessed, ...); empty if absent.
  std::map<std::string, AttributeValue> cost_analysis() const;

 private:
  // The unloaded PJRT_Executable view (owned; destroyed with this object).
  abi::Executable* executable() const;

  std::shared_ptr<const Api> api_;
  abi::LoadedExecutable* exe_;
  // Completion of the latest execution: the destructor waits for it, since plans (and with them
  // executables) are evicted while their last launch may still be running.
  mutable std::mutex last_done_mu_;
  mutable std::shared_ptr<Event> last_done_;
  mutable abi::Executable* unloaded_ = nullptr;
  size_t num_outputs_ = 0;
  size_t num_devices_ = 1;
};

}  // namespace tpu::pjrt
