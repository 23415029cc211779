// copy_, fill_, zero_, clone: writing values into (views of) existing tensors.
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

std::vector<Value> copy(Context& c) {  // copy(self, src): src converted and broadcast to self
  return {cast_to(c.b, c.tensor(1), c.out().dtype, c.out().shape)};
}

std::vector<Value> fill(Context& c) {
  return {cast_to(c.b, c.tensor(1), c.out().dtype, c.out().shape)};
}

std::vector<Value> zero(Context& c) { return {zeros(c.b, c.out())}; }

std::vector<Value> clone(Context& c) { return {convert(c.b, c.tensor(0), c.out().dtype)}; }

const Registrar registrar({
    {"copy", copy},
    {"fill.Scalar", fill},
    {"fill.Tensor", fill},
    {"zero", zero},
    {"clone", clone},
});

// A contiguous copy is a padded prefix only with size-1 dims before the padded one.
const PaddedOperandsRegistrar padded_operands({
    {"clone", PaddedOperands::Contiguous},
});

}  // namespace
}  // namespace tpu::lowering
