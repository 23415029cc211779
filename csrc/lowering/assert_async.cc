// _assert_async(self[, assert_msg]) (torch._assert_async, the traced form of `assert tensor`):
// a device-side check (Builder::assert_false) that raises the CPU's RuntimeError at the next
// host sync instead of syncing now. The module computes nothing else.
#include <string>
#include <vector>

#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

std::vector<Value> assert_async(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  int64_t n = x.type.numel();
  if (n == 0) throw InvalidCall("Boolean value of Tensor with no values is ambiguous");
  if (n > 1) throw InvalidCall("Boolean value of Tensor with more than one value is ambiguous");
  std::string msg = c.has(1) ? c.arg(1).s : "";
  if (msg.empty()) msg = "Expected Tensor with single nonzero value, but got zero";
  Value zero = x.dtype() == DType::Pred ? unary(b, Unary::Not, x) : compare(b, x, zeros(b, x.type), Direction::EQ);
  b.assert_false(reshape(b, zero, {}), msg, CheckKind::RuntimeError);
  return {};
}

const Registrar registrar({
    {"_assert_async", assert_async},
    {"_assert_async.msg", assert_async},
});

}  // namespace
}  // namespace tpu::lowering
