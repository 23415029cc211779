// The process-wide PJRT runtime under the `tpu` device: plugin, client, devices.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pjrt/client.h"

namespace tpu::engine {

struct RuntimeConfig {
  std::string plugin_path;       // chosen by discovery (torch_tpu/_discovery.py + C++)
  std::string plugin_kind;       // "cpu", "tpu", "cuda", "custom"
  int cpu_device_count = 1;      // TORCH_TPU_CPU_DEVICES
  // The CUDA plugin: the share of GPU memory its allocator may grow to (TORCH_TPU_GPU_MEMORY_FRACTION;
  // <= 0: the plugin's default). It never preallocates, so PyTorch's own CUDA allocator keeps
  // the rest.
  float gpu_memory_fraction = 0;
};

// The PJRT client options for a plugin kind (only options that plugin accepts: the GPU plugin
// rejects unknown names).
std::vector<pjrt::NamedOption> client_options(const RuntimeConfig& config);

class Runtime {
 public:
  explicit Runtime(const RuntimeConfig& config);
  const pjrt::Client& client() const { return *client_; }
  int device_count() const { return static_cast<int>(client_->devices().size()); }
  const RuntimeConfig& config() const { return config_; }
  // "cpu (PJRT 0.115, stablehlo 1.20.0)"
  std::string description() const;
  // Stable identity of the plugin build, part of every disk-cache key.
  const std::string& plugin_fingerprint() const { return fingerprint_; }

 private:
  RuntimeConfig config_;
  std::unique_ptr<pjrt::Client> client_;
  std::string fingerprint_;
};

// Identity of a plugin build, the first part of every disk-cache key:
// "platform|version|pjrt<api version>|<plugin attributes>|<size of the plugin file>", then
// "|XLA_FLAGS=..." and "|LIBTPU_INIT_ARGS=..." when set (the plugins' compiler flags).
// Computable without a client, so libtpu AOT on a CPU host (engine/aot_check.cc) produces the
// key a TPU VM with the same libtpu wheel looks up. The file's mtime is deliberately not part
// of it: pip does not preserve it, so it differs on every install.
std::string plugin_fingerprint(const std::string& platform_name,
                               const std::string& platform_version, const pjrt::Api& api);

// Configures the runtime (called once by torch_tpu at import); does not load the plugin.
void configure_runtime(const RuntimeConfig& config);
bool runtime_configured();
// Loads the plugin on first use; throws a clear error when it cannot.
Runtime& runtime();
bool runtime_initialized();
int device_count_or_zero();

}  // namespace tpu::engine
