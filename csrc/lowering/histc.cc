// histc(self, bins, min, max): counts in `bins` equal bins over [min, max] (the data's own
// range when min == max), as PyTorch's CPU kernel bins them: position
// trunc((x - lo) * bins / (hi - lo)) in the input's dtype (bfloat16 rounds after each step),
// the last bin closed, values outside [lo, hi] and NaN skipped. The range checks need the data
// or runtime Scalars: device-side checks (docs/limits.md).
#include <limits>
#include <string>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

std::vector<Value> histc(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  DType dt = x.dtype();
  require_dtype(is_float(dt), "histogram_cpu", dt);
  int64_t bins = c.int_arg(1);
  if (bins <= 0) throw InvalidCall("torch.histogram(): bins must be > 0, but got " + std::to_string(bins) + " for dimension 0");
  const Type& out = c.out();
  DType acc = opmath(dt);  // the edges are doubles on the CPU; f32 here unless the input is f64
  int64_t n = x.type.numel();
  Value lo = convert(b, c.tensor(2), acc), hi = convert(b, c.tensor(3), acc);
  Value xf = reshape(b, convert(b, x, acc), {n});
  if (n > 0) {
    // min == max: the data's range (a NaN in the data makes it NaN, which the check reports).
    Value use_data = compare(b, lo, hi, Direction::EQ);
    Value has_nan = reduce(b, compare(b, xf, xf, Direction::NE), {0}, "or");
    Value nan = constant(b, std::numeric_limits<double>::quiet_NaN(), acc);
    Value dmin = select(b, has_nan, nan, reduce(b, xf, {0}, "min"));
    Value dmax = select(b, has_nan, nan, reduce(b, xf, {0}, "max"));
    lo = select(b, use_data, dmin, lo);
    hi = select(b, use_data, dmax, hi);
  }
  Value same = compare(b, lo, hi, Direction::EQ);
  lo = select(b, same, sub(b, lo, constant(b, 1, acc)), lo);
  hi = select(b, same, add(b, hi, constant(b, 1, acc)), hi);
  auto not_finite = [&](Value v) {
    return binary(b, Binary::Or, compare(b, v, v, Direction::NE),
                  compare(b, unary(b, Unary::Abs, v), constant(b, std::numeric_limits<double>::infinity(), acc), Direction::EQ));
  };
  Value bad_range = binary(b, Binary::Or, not_finite(lo), not_finite(hi));
  b.assert_false(bad_range, "torch.histc: range of [min, max] is not finite", CheckKind::RuntimeError);
  b.assert_false(binary(b, Binary::And, unary(b, Unary::Not, bad_range), compare(b, lo, hi, Direction::GE)),
                 "torch.histc: max must be larger than min", CheckKind::RuntimeError);
  if (n == 0) return {zeros(b, out)};
  // Arithmetic in the input's dtype, as the CPU kernel's input_t.
  auto r = [&](Value v) { return dt == acc ? v : convert(b, convert(b, v, dt), acc); };
  Value lo_n = r(broadcast_in_dim(b, lo, {n}, {})), hi_n = r(broadcast_in_dim(b, hi, {n}, {}));
  Value keep = binary(b, Binary::And, compare(b, xf, lo_n, Direction::GE), compare(b, xf, hi_n, Direction::LE));
  Value t = r(mul(b, r(sub(b, xf, lo_n)), r(constant(b, static_cast<double>(bins), acc, {n}))));
  t = r(div(b, t, r(sub(b, hi_n, lo_n))));
  Value pos = convert(b, select(b, keep, t, constant(b, 0, acc, {n})), DType::S64);  // truncates
  Value last = constant(b, static_cast<double>(bins - 1), DType::S64, {n});
  pos = clamp(b, constant(b, 0, DType::S64, {n}), pos, last);
  ScatterDims sd;
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  Value counts = scatter(b, zeros(b, Type(DType::S64, {bins})), reshape(b, pos, {n, 1}),
                         convert(b, keep, DType::S64), sd, "add");
  return {convert(b, counts, out.dtype)};
}

const Registrar registrar({{"histc", histc}});

}  // namespace
}  // namespace tpu::lowering
