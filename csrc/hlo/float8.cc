// f32 -> float8 with PyTorch's rounding (c10/util/Float8_*.h): round to nearest even straight
// from f32; e4m3fn has no infinity and saturates overflow and ±inf to ±448, e5m2 overflows to
// ±inf; NaN stays NaN. The value is rounded in f32 first, so the final convert is exact and the
// plugin's own rounding path (which may go through f16, rounding twice) never matters.
#include <cmath>

#include "hlo/ops.h"

namespace tpu::hlo {
namespace {

struct Float8Format {
  int mantissa_bits;
  int min_normal_exponent;
  double max_finite;
};

Float8Format format_of(DType t) {
  if (t == DType::F8E4M3FN) return {3, -6, 448.0};
  return {2, -14, 57344.0};
}

// Rounds f32 normals to `m` mantissa bits, ties to even, on the bit pattern (a carry into the
// exponent gives the next power of two, as it should).
Value round_normal(Builder& b, Value x, int m) {
  int drop = 23 - m;
  auto u32 = [&](double v) { return constant(b, v, DType::U32, x.shape()); };
  Value bits = bitcast_convert(b, x, DType::U32);
  Value lsb = binary(b, Binary::And, binary(b, Binary::ShiftRightLogical, bits, u32(drop)), u32(1));
  bits = add(b, bits, add(b, u32(std::ldexp(1.0, drop - 1) - 1), lsb));
  bits = binary(b, Binary::And, bits, u32(4294967296.0 - std::ldexp(1.0, drop)));
  return bitcast_convert(b, bits, DType::F32);
}

}  // namespace

Value to_float8(Builder& b, Value x, DType dtype) {
  Float8Format f = format_of(dtype);
  auto f32 = [&](double v) { return constant(b, v, DType::F32, x.shape()); };
  Value mag = unary(b, Unary::Abs, x);
  // Below the smallest normal the spacing is fixed: scale it to 1 and round to an integer.
  double spacing = std::ldexp(1.0, f.min_normal_exponent - f.mantissa_bits);
  Value sub = mul(b, unary(b, Unary::RoundNearestEven, mul(b, x, f32(1.0 / spacing))), f32(spacing));
  Value r = select(b, compare(b, mag, f32(std::ldexp(1.0, f.min_normal_exponent)), Direction::LT), sub,
                   round_normal(b, x, f.mantissa_bits));
  r = select(b, compare(b, mag, f32(INFINITY), Direction::LT), r, x);  // ±inf and NaN as they are
  if (dtype == DType::F8E4M3FN) {
    r = select(b, compare(b, r, f32(f.max_finite), Direction::GT), f32(f.max_finite), r);
    r = select(b, compare(b, r, f32(-f.max_finite), Direction::LT), f32(-f.max_finite), r);
  }
  return b.emit1("stablehlo.convert", {r}, Type(dtype, x.shape()));
}

}  // namespace tpu::hlo
