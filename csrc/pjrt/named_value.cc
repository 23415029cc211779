#include "pjrt/named_value.h"

#include <type_traits>

namespace tpu::pjrt {

std::vector<abi::NamedValue> to_named_values(const std::vector<NamedOption>& options) {
  std::vector<abi::NamedValue> values(options.size());
  for (size_t i = 0; i < options.size(); ++i) {
    abi::NamedValue& v = values[i];
    v.struct_size = TPU_PJRT_STRUCT_SIZE(abi::NamedValue, value_size);
    v.name = options[i].first.c_str();
    v.name_size = options[i].first.size();
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            v.type = abi::kInt64;
            v.int64_value = x;
            v.value_size = 1;
          } else if constexpr (std::is_same_v<T, std::string>) {
            v.type = abi::kString;
            v.string_value = x.c_str();
            v.value_size = x.size();
          } else if constexpr (std::is_same_v<T, bool>) {
            v.type = abi::kBool;
            v.bool_value = x;
            v.value_size = 1;
          } else if constexpr (std::is_same_v<T, float>) {
            v.type = abi::kFloat;
            v.float_value = x;
            v.value_size = 1;
          } else {
            v.type = abi::kInt64List;
            v.int64_array_value = x.data();
            v.value_size = x.size();
          }
        },
        options[i].second);
  }
  return values;
}

}  // namespace tpu::pjrt
