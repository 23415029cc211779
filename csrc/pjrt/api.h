// A loaded PJRT plugin: its function table, version and attributes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "pjrt/error.h"
#include "pjrt/pjrt_abi.h"

namespace tpu::pjrt {

// Oldest PJRT minor version we accept (the oldest plugin we test against).
constexpr int kMinSupportedMinor = 81;

using AttributeValue = std::variant<std::string, int64_t, std::vector<int64_t>, float, bool>;

class Api {
 public:
  // dlopen()s `path` and reads GetPjrtApi(); throws PjrtError(NOT_FOUND / FAILED_PRECONDITION)
  // with the path and reason on failure. The library is never dlclose()d (plugins keep static
  // registries alive).
  static std::shared_ptr<Api> load(const std::string& path);

  const std::string& path() const { return path_; }
  int major_version() const { return table_->pjrt_api_version.major_version; }
  int minor_version() const { return table_->pjrt_api_version.minor_version; }
  size_t num_slots() const { return (table_->struct_size - 40) / sizeof(void*); }

  // True when the plugin's table is long enough and the slot is filled.
  bool has(abi::Slot slot) const { return slot_or_null(slot) != nullptr; }
  void* slot(abi::Slot slot) const { return slot_or_null(slot); }

  // Calls the function in `slot` with `args`, throwing PjrtError on failure or when the plugin
  // does not provide the function.
  template <class Args>
  void call(abi::Slot slot, Args* args, const char* what) const {
    void* fn = slot_or_null(slot);
    if (fn == nullptr) {
      throw PjrtError(abi::kUnimplemented,
                      std::string(what) + " is not provided by the PJRT plugin " + path_ +
                          " (PJRT " + version_string() + ")");
    }
    throw_if_error(*this, reinterpret_cast<abi::Error* (*)(Args*)>(fn)(args), what);
  }

  std::string version_string() const;
  // PJRT_Plugin_Attributes (xla_version, stablehlo_current_version, ...); empty if unsupported.
  const std::map<std::string, AttributeValue>& attributes() const { return attributes_; }
  std::string attributes_string() const;

 private:
  Api(std::string path, const abi::ApiTable* table) : path_(std::move(path)), table_(table) {}
  void* slot_or_null(abi::Slot slot) const {
    size_t index = static_cast<size_t>(slot);
    return index < num_slots() ? table_->slots[index] : nullptr;
  }
  void initialize();

  std::string path_;
  const abi::ApiTable* table_;
  std::map<std::string, AttributeValue> attributes_;
};

// Reads a PJRT_NamedValue array into a map.
std::map<std::string, AttributeValue> read_named_values(const abi::NamedValue* values, size_t n);

}  // namespace tpu::pjrt
