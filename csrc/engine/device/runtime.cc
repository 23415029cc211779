#include "engine/device/runtime.h"

#include <c10/util/Exception.h>
#include <sys/stat.h>

#include <cstdlib>
#include <mutex>

namespace tpu::engine {
namespace {
std::mutex g_mu;
std::unique_ptr<RuntimeConfig> g_config;
std::unique_ptr<Runtime> g_runtime;
std::string g_init_error;
}  // namespace

std::vector<pjrt::NamedOption> client_options(const RuntimeConfig& config) {
  std::vector<pjrt::NamedOption> options;
  if (config.plugin_kind == "cpu") {
    options.push_back({"cpu_device_count", static_cast<int64_t>(config.cpu_device_count)});
  } else if (config.plugin_kind == "cuda") {
    // XLA's GPU client preallocates 75-90% of the GPU by default, which would starve PyTorch's
    // CUDA allocator in the same process: allocate on demand instead.
    options.push_back({"preallocate", false});
    options.push_back({"allocator", std::string("bfc")});
    if (config.gpu_memory_fraction > 0) options.push_back({"memory_fraction", config.gpu_memory_fraction});
  }
  return options;
}

Runtime::Runtime(const RuntimeConfig& config) : config_(config) {
  auto api = pjrt::Api::load(config.plugin_path);
  client_ = std::make_unique<pjrt::Client>(api, client_options(config));
  fingerprint_ = engine::plugin_fingerprint(client_->platform_name(), client_->platform_version(), *api);
}

std::string plugin_fingerprint(const std::string& platform_name,
                               const std::string& platform_version, const pjrt::Api& api) {
  struct stat st {};
  ::stat(api.path().c_str(), &st);
  // The plugins read their compiler flags from these at load time (XLA:CPU and CUDA from
  // XLA_FLAGS, libtpu from LIBTPU_INIT_ARGS): an executable built under other flags is another
  // executable, so the disk cache must not hand it out.
  std::string flags;
  for (const char* name : {"XLA_FLAGS", "LIBTPU_INIT_ARGS"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') flags += std::string("|") + name + "=" + value;
  }
  return platform_name + "|" + platform_version + "|pjrt" + api.version_string() + "|" +
         api.attributes_string() + "|" + std::to_string(st.st_size) + flags;
}

std::string Runtime::description() const {
  const auto& attrs = client_->api().attributes();
  std::string shlo;
  auto it = attrs.find("stablehlo_current_version");
  if (it != attrs.end()) {
    if (auto* v = std::get_if<std::vector<int64_t>>(&it->second)) {
      for (size_t i = 0; i < v->size(); ++i) shlo += (i ? "." : "") + std::to_string((*v)[i]);
    }
  }
  return client_->platform_name() + " (PJRT " + client_->api().version_string() +
         (shlo.empty() ? "" : ", StableHLO " + shlo) + ", plugin " + config_.plugin_path + ")";
}

void configure_runtime(const RuntimeConfig& config) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_config = std::make_unique<RuntimeConfig>(config);
}

bool runtime_configured() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_config != nullptr && !g_config->plugin_path.empty();
}

Runtime& runtime() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_runtime) return *g_runtime;
  TORCH_CHECK(g_init_error.empty(), g_init_error);
  TORCH_CHECK(g_config && !g_config->plugin_path.empty(),
              "tpu device unavailable: no PJRT plugin was found. Install the CPU plugin "
              "(pip install xla-cpu-pjrt), libtpu on a TPU VM, or set "
              "TORCH_TPU_PJRT_PLUGIN=/path/to/plugin.so");
  try {
    g_runtime = std::make_unique<Runtime>(*g_config);
  } catch (const std::exception& e) {
    g_init_error = std::string("tpu device unavailable: failed to start the PJRT plugin: ") + e.what();
    TORCH_CHECK(false, g_init_error);
  }
  return *g_runtime;
}

bool runtime_initialized() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_runtime != nullptr;
}

int device_count_or_zero() {
  if (!runtime_configured()) return 0;
  try {
    return runtime().device_count();
  } catch (...) {
    return 0;
  }
}

}  // namespace tpu::engine
