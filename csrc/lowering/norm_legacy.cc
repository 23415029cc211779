// The legacy torch.norm overloads (norm.Scalar, norm.ScalarOpt_dim, norm.ScalarOpt_dtype,
// norm.ScalarOpt_dim_dtype and their out= forms): linalg_vector_norm's rule with their
// arguments (p defaults to 2; the dtype is already in the result type).
#include <vector>

#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

Rule legacy_norm(bool has_dim) {
  return [has_dim](Context& c) {
    std::vector<Arg> args(5);
    args[0] = c.arg(0);
    if (c.has(1)) {
      args[1] = c.arg(1);
    } else {
      args[1].kind = Arg::Kind::Tensor;
      args[1].tensor = constant(c.b, 2, DType::F32);
    }
    if (has_dim) args[2] = c.arg(2);
    args[3].kind = Arg::Kind::Bool;
    args[3].b = has_dim && c.bool_arg(3);
    Context sub{c.b, std::move(args), c.out_types, c.compute_dtype, c.rng_key};
    return (*find_rule("linalg_vector_norm"))(sub);
  };
}

const Registrar registrar({
    {"norm.Scalar", legacy_norm(false)},
    {"norm.ScalarOpt_dtype", legacy_norm(false)},
    {"norm.ScalarOpt_dim", legacy_norm(true)},
    {"norm.ScalarOpt_dim_dtype", legacy_norm(true)},
    {"norm.out", legacy_norm(true)},
    {"norm.dtype_out", legacy_norm(true)},
});

}  // namespace
}  // namespace tpu::lowering
