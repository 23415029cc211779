// Complex arithmetic as PyTorch's CPU kernels do it, where XLA's differs at signed zeros, NaN
// and infinities. Real inputs are not expected except where a function says so.
#pragma once

#include <cmath>
#include <string>
#include <utility>

#include "hlo/builder.h"
#include "hlo/ops.h"

namespace tpu::lowering {

// (re, im) of a complex value.
inline std::pair<hlo::Value, hlo::Value> complex_parts(hlo::Builder& b, hlo::Value z) {
  hlo::Type rt(hlo::real_part(z.dtype()), z.shape());
  return {hlo::real(b, z), hlo::imag(b, z)};
}

inline hlo::Value make_complex(hlo::Builder& b, hlo::Value re, hlo::Value im, const hlo::Type& type) {
  return hlo::complex(b, re, im);
}

inline hlo::Value conjugate(hlo::Builder& b, hlo::Value z) {
  auto [re, im] = complex_parts(b, z);
  return make_complex(b, re, hlo::neg(b, im), z.type);
}

// |z| with C's hypot semantics: +inf if a part is infinite, else NaN if a part is NaN (XLA's abs
// gives |re| * sqrt(2) for a NaN imaginary part, and NaN for (nan, inf)).
inline hlo::Value complex_abs(hlo::Builder& b, hlo::Value z) {
  auto [re, im] = complex_parts(b, z);
  const hlo::Type& rt = re.type;
  auto is_inf = [&](hlo::Value x) {
    return hlo::compare(b, hlo::unary(b, hlo::Unary::Abs, x), hlo::constant(b, INFINITY, rt.dtype, rt.shape), hlo::Direction::EQ);
  };
  auto is_nan = [&](hlo::Value x) { return hlo::compare(b, x, x, hlo::Direction::NE); };
  hlo::Value any_inf = hlo::binary(b, hlo::Binary::Or, is_inf(re), is_inf(im));
  hlo::Value any_nan = hlo::binary(b, hlo::Binary::Or, is_nan(re), is_nan(im));
  hlo::Value r = hlo::unary(b, hlo::Unary::Abs, z);
  r = hlo::select(b, any_nan, hlo::constant(b, NAN, rt.dtype, rt.shape), r);
  return hlo::select(b, any_inf, hlo::constant(b, INFINITY, rt.dtype, rt.shape), r);
}

// v * (1 + 0i) by parts, as the CPU's complex multiply by a true bool or by alpha = 1: an
// infinite part times the zero imaginary part is NaN (XLA folds a multiplication by one away).
inline hlo::Value times_complex_one(hlo::Builder& b, hlo::Value v) {
  auto [re, im] = complex_parts(b, v);
  hlo::Value zero = hlo::zeros(b, re.type);
  return make_complex(b, hlo::sub(b, re, hlo::mul(b, im, zero)), hlo::add(b, hlo::mul(b, re, zero), im), v.type);
}

// chlo.asin/acos/acosh/asinh of z (any dtype) on their branch cuts: XLA ignores the sign of a
// zero part there (asin(2.5-0j) comes out as 1.57+1.57j); PyTorch's CPU follows C99, where the
// signed zero picks the side of the cut. The functions' symmetries give that side exactly:
// f(conj z) = conj f(z) for all four, and asinh is odd as well.
inline hlo::Value complex_branch_cut_aware(hlo::Builder& b, hlo::Unary op, hlo::Value z) {
  if (!hlo::is_complex(z.dtype())) return hlo::unary(b, op, z);
  auto [re, im] = complex_parts(b, z);
  auto signbit = [&](hlo::Value x) {  // the sign bit itself, so that -0.0 counts
    hlo::Value bits = hlo::bitcast_convert(b, x, re.dtype() == hlo::DType::F64 ? hlo::DType::S64 : hlo::DType::S32);
    return hlo::compare(b, bits, hlo::zeros(b, bits.type), hlo::Direction::LT);
  };
  auto abs = [&](hlo::Value x) { return hlo::unary(b, hlo::Unary::Abs, x); };
  if (op == hlo::Unary::Asinh) {
    // asinh(z) = -conj(asinh(-conj z)), and -conj z = (-re, im): evaluate at |re|.
    hlo::Value w = hlo::unary(b, op, make_complex(b, abs(re), im, z.type));
    return hlo::select(b, signbit(re), hlo::neg(b, conjugate(b, w)), w);
  }
  // asin, acos, acosh: f(z) = conj(f(conj z)): evaluate at |im|.
  hlo::Value w = hlo::unary(b, op, make_complex(b, re, abs(im), z.type));
  return hlo::select(b, signbit(im), conjugate(b, w), w);
}

}  // namespace tpu::lowering
