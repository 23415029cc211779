// A PJRT client: devices, host<->device transfers, compile and deserialize.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "pjrt/api.h"
#include "pjrt/buffer.h"
#include "pjrt/compile_options.h"
#include "pjrt/executable.h"
#include "pjrt/named_value.h"

namespace tpu::pjrt {

struct DeviceInfo {
  abi::Device* handle = nullptr;
  int id = 0;
  int local_hardware_id = -1;
  std::string kind;
};

struct MemoryStats {
  bool supported = false;
  int64_t bytes_in_use = 0;
  int64_t peak_bytes_in_use = 0;
  int64_t bytes_limit = 0;
};


class Client {
 public:
  Client(std::shared_ptr<const Api> api, const std::vector<NamedOption>& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Api& api() const { return *api_; }
  std::shared_ptr<const Api> api_ptr() const { return api_; }
  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }
  const std::vector<DeviceInfo>& devices() const { return devices_; }

  // Copies `data` (dense row-major) to `device`; the host memory may be reused on return.
  std::unique_ptr<Buffer> buffer_from_host(const void* data, abi::BufferType type,
                                           const std::vector<int64_t>& dims, int device) const;
  // Compiles StableHLO (MLIR text or bytecode).
  std::unique_ptr<Executable> compile(const std::string& mlir, const CompileOptions& options) const;
  std::unique_ptr<Executable> deserialize(const std::string& bytes) const;
  // nullptr (and the plugin's message in *error) when the plugin rejects the bytes, without
  // throwing: a C++ exception unwinding right after a failed XLA:CPU deserialization crashed in
  // libgcc's unwinder in a long test run (issue 10 note), so the cache's expected miss path
  // does not throw.
  std::unique_ptr<Executable> try_deserialize(const std::string& bytes, std::string* error) const;
  MemoryStats memory_stats(int device) const;

 private:
  std::shared_ptr<const Api> api_;
  abi::Client* client_ = nullptr;
  std::string platform_name_;
  std::string platform_version_;
  std::vector<DeviceInfo> devices_;
};

}  // namespace tpu::pjrt
