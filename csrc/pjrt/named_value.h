// Options passed to PJRT as PJRT_NamedValue arrays (client and topology creation).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "pjrt/pjrt_abi.h"

namespace tpu::pjrt {

using NamedOption =
    std::pair<std::string, std::variant<int64_t, std::string, bool, std::vector<int64_t>, float>>;

// The ABI view of `options`; it points into `options`, which must outlive it.
std::vector<abi::NamedValue> to_named_values(const std::vector<NamedOption>& options);

}  // namespace tpu::pjrt
