// conj_physical / _conj_physical: the materialised complex conjugate (what copies apply when a
// tensor's lazy conj bit differs from its destination's: engine/eager/math_bits.h). Identity
// for real types.
#include <vector>

#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

std::vector<Value> conj_physical(Context& c) {
  Builder& b = c.b;
  Value x = convert(b, c.tensor(0), c.out().dtype);
  if (!is_complex(x.dtype())) return {x};
  Type rt(real_part(x.dtype()), x.shape());
  Value re = b.emit1("stablehlo.real", {x}, rt), im = b.emit1("stablehlo.imag", {x}, rt);
  return {b.emit1("stablehlo.complex", {re, neg(b, im)}, x.type)};
}

const Registrar registrar({
    {"conj_physical", conj_physical},
    {"_conj_physical", conj_physical},
});

}  // namespace
}  // namespace tpu::lowering
