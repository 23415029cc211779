// _masked_softmax and its backward (nn.MultiheadAttention / TransformerEncoderLayer fast paths).
//
// A true mask element is left out: the row's max and sum run over the kept elements only, left-out
// elements give 0, and a row with nothing kept gives NaN everywhere (the CPU's 1 / 0-sum), as
// PyTorch's CPU kernel does. mask_type 0 is an (L, L) attention mask and 1 a (B, L) padding mask
// of a (B, H, L, L) input; anything else needs a mask of the input's shape.
#include <limits>
#include <string>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

void require_bool_mask(Value mask) {
  if (mask.dtype() != DType::Pred) throw InvalidCall("Mask should be a boolean tensor");
}

// The mask broadcast to the input's shape, after the CPU kernel's checks.
Value full_mask(Context& c, Value x, Value mask) {
  Builder& b = c.b;
  require_bool_mask(mask);
  const auto& s = x.shape();
  int64_t type = c.has(3) ? c.int_arg(3) : -1;  // -1: None
  if (mask.rank() != 2 || x.rank() != 4) type = 2;
  if (type == 2) {
    if (mask.shape() != s) throw InvalidCall("For mask_type == 2 mask shape should match input shape");
    return mask;
  }
  if (type == 1) {
    if (s[0] != mask.shape()[0] || s[2] != mask.shape()[1]) throw InvalidCall("For mask_type == 1 mask shape should be (B, L)");
    // The CPU reads the padding mask with the key length's stride; keys and queries must agree.
    if (s[2] != s[3]) throw NotLowerable("padding mask with query length != key length");
    return broadcast_in_dim(b, mask, s, {0, 3});
  }
  if (type == 0) {
    if (s[2] != mask.shape()[0] || s[2] != mask.shape()[1]) throw InvalidCall("For mask_type == 0 mask shape should be (L, L)");
    return broadcast_in_dim(b, mask, s, {2, 3});
  }
  if (type == -1) throw InvalidCall("Mask Type should be defined");
  throw InvalidCall("Mask Type should be 0 (src_mask) or 1 (src_key_padding_mask), or 2 (default_mask)");
}

// The CPU kernel stores intermediate values in the tensor's own type (bf16/f16 differences and
// exponentials are rounded before the f32 sum): round where it does, so results agree bit for bit.
Value stored(Builder& b, Value v, DType out) {
  return v.dtype() == out ? v : convert(b, convert(b, v, out), v.dtype());
}

int64_t softmax_dim(Context& c, size_t arg, int64_t rank) {
  int64_t dim = c.has(arg) ? c.int_arg(arg) : rank - 1;
  return wrap_dim(dim, rank);
}

// _masked_softmax(self, mask, dim?, mask_type?)
std::vector<Value> masked_softmax(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  require_dtype(is_float(x.dtype()), "masked_softmax", x.dtype());
  Value mask = full_mask(c, x, c.tensor(1));
  DType out = c.out().dtype, acc = opmath(out);
  if (x.rank() == 0) {
    x = reshape(b, x, {1});
    mask = reshape(b, mask, {1});
  }
  int64_t dim = softmax_dim(c, 2, x.rank());
  if (x.type.numel() == 0) return {reshape(b, convert(b, x, out), c.out().shape)};
  x = convert(b, x, acc);
  Value zero = zeros(b, x.type);
  // The max over kept elements (-inf where none is kept: that row's sum is 0 below).
  Value lowest = constant(b, -std::numeric_limits<double>::infinity(), acc, x.shape());
  Value kept_max = reduce_keep(b, select(b, mask, lowest, x), dim, "max");
  // A row whose kept values contain NaN: the CPU's max keeps NaN when it comes first; the sum
  // below is NaN either way.
  Value e = select(b, mask, zero,
                   stored(b, unary(b, Unary::Exponential, stored(b, sub(b, x, kept_max), out)), out));
  Value sum = reduce_keep(b, e, dim, "add");
  Value empty = compare(b, sum, zero, Direction::EQ);
  Value inv = select(b, empty, constant(b, std::numeric_limits<double>::quiet_NaN(), acc, x.shape()),
                     div(b, scalar_like(b, 1, sum), sum));
  return {reshape(b, convert(b, mul(b, e, inv), out), c.out().shape)};
}

// _masked_softmax_backward(grad_output, output, mask, dim?)
std::vector<Value> masked_softmax_backward(Context& c) {
  Builder& b = c.b;
  Value g = c.tensor(0), y = c.tensor(1), mask = c.tensor(2);
  if (g.shape() != mask.shape()) throw InvalidCall("Mask shape should match grad shape");
  // The CPU kernel reads `output` with grad's layout without checking (docs/limits.md).
  if (g.shape() != y.shape()) {
    throw InvalidCall("output shape " + shape_str(y.shape()) + " must match grad_output shape " + shape_str(g.shape()));
  }
  require_bool_mask(mask);
  require_dtype(is_float(g.dtype()), "masked_softmax_backward", g.dtype());
  DType out = c.out().dtype, acc = opmath(out);
  if (g.rank() == 0) {
    g = reshape(b, g, {1});
    y = reshape(b, y, {1});
    mask = reshape(b, mask, {1});
  }
  int64_t dim = softmax_dim(c, 3, g.rank());
  if (g.type.numel() == 0) return {reshape(b, convert(b, g, out), c.out().shape)};
  g = convert(b, g, acc);
  y = convert(b, y, acc);
  Value zero = zeros(b, g.type);
  Value sum = reduce_keep(b, select(b, mask, zero, stored(b, mul(b, g, y), out)), dim, "add");
  Value r = select(b, mask, zero, mul(b, y, sub(b, g, sum)));
  return {reshape(b, convert(b, r, out), c.out().shape)};
}

const Registrar registrar({
    {"_masked_softmax", masked_softmax},
    {"_masked_softmax_backward", masked_softmax_backward},
});

}  // namespace
}  // namespace tpu::lowering
