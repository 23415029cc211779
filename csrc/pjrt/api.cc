#include "pjrt/api.h"

#include <dlfcn.h>

#include <mutex>
#include <sstream>

namespace tpu::pjrt {

std::map<std::string, AttributeValue> read_named_values(const abi::NamedValue* values, size_t n) {
  std::map<std::string, AttributeValue> out;
  for (size_t i = 0; i < n; ++i) {
    const abi::NamedValue& v = values[i];
    std::string name(v.name, v.name_size);
    switch (v.type) {
      case abi::kString: out[name] = std::string(v.string_value, v.value_size); break;
      case abi::kInt64: out[name] = v.int64_value; break;
      case abi::kInt64List:
        out[name] = std::vector<int64_t>(v.int64_array_value, v.int64_array_value + v.value_size);
        break;
      case abi::kFloat: out[name] = v.float_value; break;
      case abi::kBool: out[name] = v.bool_value; break;
    }
  }
  return out;
}

std::shared_ptr<Api> Api::load(const std::string& path) {
  // RTLD_LOCAL keeps the plugins' LLVM/absl copies apart from each other and from torch.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw PjrtError(abi::kNotFound,
                    "cannot load PJRT plugin '" + path + "': " + (why ? why : "dlopen failed"));
  }
  using GetApiFn = const abi::ApiTable* (*)();
  auto get_api = reinterpret_cast<GetApiFn>(dlsym(handle, "GetPjrtApi"));
  if (get_api == nullptr) {
    throw PjrtError(abi::kFailedPrecondition,
                    "'" + path + "' is not a PJRT plugin: it exports no GetPjrtApi symbol");
  }
  const abi::ApiTable* table = get_api();
  if (table == nullptr || table->struct_size < 40 + 8 * (abi::kLoadedExecutable_Execute + 1)) {
    throw PjrtError(abi::kFailedPrecondition, "PJRT plugin '" + path +
                                                  "' returned a function table that is too small");
  }
  std::shared_ptr<Api> api(new Api(path, table));
  if (api->major_version() != 0 || api->minor_version() < kMinSupportedMinor) {
    throw PjrtError(abi::kFailedPrecondition,
                    "PJRT plugin '" + path + "' has PJRT API " + api->version_string() +
                        "; torch-tpu needs 0." + std::to_string(kMinSupportedMinor) + " or newer");
  }
  api->initialize();
  return api;
}

void Api::initialize() {
  // PJRT_Plugin_Initialize must run once per process per plugin.
  static std::mutex mu;
  static std::map<const abi::ApiTable*, bool> initialized;
  std::lock_guard<std::mutex> lock(mu);
  if (!initialized[table_] && has(abi::kPlugin_Initialize)) {
    abi::Plugin_Initialize_Args args{};
    args.struct_size = sizeof(args);
    call(abi::kPlugin_Initialize, &args, "PJRT_Plugin_Initialize");
  }
  initialized[table_] = true;
  if (has(abi::kPlugin_Attributes)) {
    abi::Plugin_Attributes_Args args{};
    args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Plugin_Attributes_Args, num_attributes);
    call(abi::kPlugin_Attributes, &args, "PJRT_Plugin_Attributes");
    attributes_ = read_named_values(args.attributes, args.num_attributes);
  }
}

std::string Api::version_string() const {
  return std::to_string(major_version()) + "." + std::to_string(minor_version());
}

std::string Api::attributes_string() const {
  std::ostringstream out;
  bool first = true;
  for (const auto& [name, value] : attributes_) {
    out << (first ? "" : ", ") << name << "=";
    first = false;
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            for (size_t i = 0; i < v.size(); ++i) out << (i ? "." : "") << v[i];
          } else {
            out << v;
          }
        },
        value);
  }
  return out.str();
}

}  // namespace tpu::pjrt
