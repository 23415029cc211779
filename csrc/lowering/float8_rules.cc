// The rules that take float8 values: copies, conversions, data movement and _scaled_mm. Their
// rules read and write float8 only through convert (hlo/float8.cc) or move it untouched, and
// PyTorch's CPU kernels implement the same ops for float8.
#include <set>
#include <string>
#include <vector>

#include "lowering/float8_rules.h"

namespace tpu::lowering {

bool lowers_float8(const std::string& rule_name) {
  static const std::set<std::string> rules{
      "_scaled_mm", "_scaled_mm_v2", "_unsafe_view", "cat", "clone", "constant_pad_nd", "copy", "fill.Scalar",
      "fill.Tensor", "flip", "index.Tensor", "index_select", "lift_fresh_copy", "repeat",
      "roll", "stack", "view_copy", "zero"};
  return rules.count(rule_name) > 0;
}

void refuse_float8_promotion(const std::vector<Value>& xs) {
  for (const Value& x : xs) {
    for (const Value& y : xs) {
      if (x.dtype() != y.dtype() && is_float8(x.dtype())) {
        throw InvalidCall(std::string("Promotion for Float8 Types is not supported, attempted to promote ") +
                          hlo::torch_name(x.dtype()) + " and " + hlo::torch_name(y.dtype()));
      }
    }
  }
}

}  // namespace tpu::lowering
