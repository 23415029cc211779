// conj_physical / _conj_physical: the materialised complex conjugate (what copies apply when a
// tensor's lazy conj bit differs from its destination's: engine/call/math_bits.h). Identity
// for real types. Graphs also lower the lazy views _conj and _neg_view as these values.
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
  Value re = real(b, x), im = imag(b, x);
  return {complex(b, re, neg(b, im))};
}

std::vector<Value> negated(Context& c) { return {neg(c.b, c.tensor(0))}; }

const Registrar registrar({
    {"conj_physical", conj_physical},
    {"_conj_physical", conj_physical},
});

// In a graph, eager mode's lazy conj and neg bits are plain values: _conj (what x.conj() of a
// complex tensor is) computes the conjugate, _neg_view the negation.
const GraphRegistrar graph_registrar({
    {"_conj", conj_physical},
    {"_neg_view", negated},
});

}  // namespace
}  // namespace tpu::lowering
