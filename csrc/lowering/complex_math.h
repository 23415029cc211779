// Complex arithmetic as PyTorch's CPU kernels do it where XLA's differs at signed zeros and
// infinities.

// Inverse trigonometric/hyperbolic functions of complex values on their branch cuts. XLA's
// chlo.asin/acos/acosh/asinh ignore the sign of a zero part there (asin(2.5-0j) comes out as
// 1.57+1.57j); PyTorch's CPU follows C99, where the signed zero picks the side of the cut. The
// functions' symmetries give that side exactly: f(conj z) = conj f(z) for all four, and asinh is
// odd as well. Real inputs pass through unchanged.
#pragma once

#include <string>

#include "hlo/builder.h"
#include "hlo/ops.h"

namespace tpu::lowering {

// v * (1 + 0i) by parts, as the CPU's complex multiply by a true bool or by alpha = 1: an
// infinite part times the zero imaginary part is NaN (XLA folds a multiplication by one away).
inline hlo::Value times_complex_one(hlo::Builder& b, hlo::Value v) {
  hlo::Type rt(hlo::real_part(v.dtype()), v.shape());
  hlo::Value re = b.emit1("stablehlo.real", {v}, rt), im = b.emit1("stablehlo.imag", {v}, rt);
  hlo::Value zero = hlo::zeros(b, rt);
  return b.emit1("stablehlo.complex", {hlo::sub(b, re, hlo::mul(b, im, zero)), hlo::add(b, hlo::mul(b, re, zero), im)},
                 v.type);
}

inline hlo::Value complex_branch_cut_aware(hlo::Builder& b, const std::string& op, hlo::Value z) {
  using hlo::Value;
  if (!hlo::is_complex(z.dtype())) return hlo::unary(b, op, z);
  hlo::Type rt(hlo::real_part(z.dtype()), z.shape());
  Value re = b.emit1("stablehlo.real", {z}, rt), im = b.emit1("stablehlo.imag", {z}, rt);
  auto signbit = [&](Value x) {  // the sign bit itself, so that -0.0 counts
    hlo::Type bits(rt.dtype == hlo::DType::F64 ? hlo::DType::S64 : hlo::DType::S32, rt.shape);
    Value i = b.emit1("stablehlo.bitcast_convert", {x}, bits);
    return hlo::compare(b, i, hlo::zeros(b, bits), "LT");
  };
  auto conj = [&](Value w) {
    Value wr = b.emit1("stablehlo.real", {w}, rt), wi = b.emit1("stablehlo.imag", {w}, rt);
    return b.emit1("stablehlo.complex", {wr, hlo::neg(b, wi)}, w.type);
  };
  auto abs = [&](Value x) { return hlo::unary(b, "stablehlo.abs", x); };
  if (op == "chlo.asinh") {
    // asinh(z) = -conj(asinh(-conj z)), and -conj z = (-re, im): evaluate at |re|.
    Value w = hlo::unary(b, op, b.emit1("stablehlo.complex", {abs(re), im}, z.type));
    return hlo::select(b, signbit(re), hlo::neg(b, conj(w)), w);
  }
  // asin, acos, acosh: f(z) = conj(f(conj z)): evaluate at |im|.
  Value w = hlo::unary(b, op, b.emit1("stablehlo.complex", {re, abs(im)}, z.type));
  return hlo::select(b, signbit(im), conj(w), w);
}

}  // namespace tpu::lowering
