// More element-wise ops: xlogy, nan_to_num, signbit, rsub, ldexp, floor_divide, gcd/lcm, bit
// shifts, and the complex constructors and angle (angle, polar, complex).
//
// Semantics follow PyTorch's CPU kernels, checked against them for NaN, +-inf, -0.0 and
// out-of-range shift amounts (tests/python/test_ops_activations_losses.py).
#include <cmath>
#include <limits>
#include <numeric>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

Value operand(Context& c, size_t i, DType t) { return cast_to(c.b, c.tensor(i), t, c.out().shape); }
Value k(Builder& b, double v, const Value& like) { return scalar_like(b, v, like); }
std::vector<int64_t> all_dims(const Value& x) {
  std::vector<int64_t> d(x.rank());
  std::iota(d.begin(), d.end(), 0);
  return d;
}

// Constant `v` of x's type and shape, rounded from f64 (so 1e40 becomes inf in f32 as in C++).
Value rounded_constant(Builder& b, double v, const Value& x) {
  return convert(b, constant(b, v, DType::F64, x.shape()), x.dtype());
}

// The sign bit of a float (true for -0.0 and negative NaNs) or x < 0 for other types.
Value signbit_of(Builder& b, Value x) {
  if (is_float(x.dtype())) {
    int bits = bit_width(x.dtype());
    DType s = bits == 16 ? DType::S16 : bits == 32 ? DType::S32 : DType::S64;
    Value i = bitcast_convert(b, x, s);
    return compare(b, i, k(b, 0, i), Direction::LT);
  }
  if (is_unsigned(x.dtype()) || x.dtype() == DType::Pred) return constant(b, 0, DType::Pred, x.shape());
  return compare(b, x, k(b, 0, x), Direction::LT);
}

// xlogy(x, y) = x * log(y), 0 where x == 0, NaN where y is NaN (all three overloads).
std::vector<Value> xlogy(Context& c) {
  Builder& b = c.b;
  if (is_complex(c.out().dtype)) throw NotLowerable("xlogy of a complex type");  // the CPU raises
  DType t = opmath(c.out().dtype);
  Value x = operand(c, 0, t), y = operand(c, 1, t);
  Value r = mul(b, x, unary(b, Unary::Log, y));
  r = select(b, compare(b, x, k(b, 0, x), Direction::EQ), k(b, 0, r), r);
  r = select(b, is_nan(b, y), y, r);
  return {convert(b, r, c.out().dtype)};
}

double max_finite(DType t) {
  switch (t) {
    case DType::F16: return 65504.0;
    case DType::BF16: return 3.38953138925153547590470800371487866880e+38;
    case DType::F32: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

// nan_to_num of a real float tensor: defaults 0 and the type's largest finite values.
Value nan_to_num_real(Context& c, Value x) {
  Builder& b = c.b;
  auto value = [&](size_t i, double dflt) { return rounded_constant(b, c.has(i) ? c.double_arg(i) : dflt, x); };
  double top = max_finite(x.dtype());
  Value inf = k(b, INFINITY, x);
  Value r = select(b, is_nan(b, x), value(1, 0.0), x);
  r = select(b, compare(b, x, inf, Direction::EQ), value(2, top), r);
  return select(b, compare(b, x, neg(b, inf), Direction::EQ), value(3, -top), r);
}

// nan_to_num(self, nan?, posinf?, neginf?); complex: the real and imaginary parts separately.
std::vector<Value> nan_to_num(Context& c) {
  Builder& b = c.b;
  DType t = c.out().dtype;
  Value x = convert(b, c.tensor(0), t);
  if (is_complex(t)) {
    Type rt(real_part(t), x.shape());
    Value re = nan_to_num_real(c, real(b, x));
    Value im = nan_to_num_real(c, imag(b, x));
    return {complex(b, re, im)};
  }
  if (!is_float(t)) return {x};
  return {nan_to_num_real(c, x)};
}

std::vector<Value> signbit(Context& c) {
  if (is_complex(c.tensor(0).dtype())) throw NotLowerable("signbit of a complex tensor");  // the CPU raises
  return {signbit_of(c.b, c.tensor(0))};
}

// rsub(self, other, alpha) = other - alpha * self
std::vector<Value> rsub(Context& c) {
  Builder& b = c.b;
  DType t = opmath(c.compute_dtype);
  // In the common dtype first, as alpha_rule (elementwise.cc): a number is rounded to bfloat16.
  Value x = convert(b, operand(c, 0, c.compute_dtype), t), y = convert(b, operand(c, 1, c.compute_dtype), t);
  if (c.has(2)) x = times_alpha(b, x, c.tensor(2), c.compute_dtype);
  // Rounded to the common dtype before a wider out= (as TensorIterator does).
  return {convert(b, convert(b, sub(b, y, x), c.compute_dtype), c.out().dtype)};
}

// ldexp(self, other) = self * 2^other
std::vector<Value> ldexp(Context& c) {
  Builder& b = c.b;
  DType t = opmath(c.out().dtype);
  if (is_complex(t) && !is_complex(c.tensor(1).dtype())) {
    // A real exponent: 2^e is real, and scaling each part keeps an overflow to inf from turning
    // into NaN, as the CPU's x * (inf + 0i) gives (a complex 2^e, exp(e log 2), has a NaN part).
    DType rt = real_part(t);
    Value x = operand(c, 0, t), e = operand(c, 1, rt);
    Value scale = binary(b, Binary::Power, k(b, 2, e), e);
    Type part(rt, c.out().shape);
    Value re = mul(b, real(b, x), scale);
    Value im = mul(b, imag(b, x), scale);
    return {convert(b, complex(b, re, im), c.out().dtype)};
  }
  Value x = operand(c, 0, t), e = operand(c, 1, t);
  return {convert(b, mul(b, x, binary(b, Binary::Power, k(b, 2, e), e)), c.out().dtype)};
}

// Python's floor division of floats as the CPU computes it (c10's div_floor_floating): from
// fmod rather than floor(x / y), so floor_divide(1, 0.1) is 9 like Python, and inf // 2 is NaN.
Value floor_divide_float(Builder& b, Value x, Value y) {
  Value zero = k(b, 0, x);
  Value mod = binary(b, Binary::Remainder, x, y);
  Value d = div(b, sub(b, x, mod), y);
  Value fix = logical_and(b, compare(b, mod, zero, Direction::NE),
                   compare(b, compare(b, y, zero, Direction::LT), compare(b, mod, zero, Direction::LT), Direction::NE));
  d = select(b, fix, sub(b, d, k(b, 1, d)), d);
  Value fl = unary(b, Unary::Floor, d);
  fl = select(b, compare(b, sub(b, d, fl), k(b, 0.5, d), Direction::GT), add(b, fl, k(b, 1, fl)), fl);
  Value q = div(b, x, y);
  Value signed_zero = select(b, signbit_of(b, q), neg(b, zero), zero);
  Value r = select(b, compare(b, d, zero, Direction::NE), fl, signed_zero);
  return select(b, compare(b, y, zero, Direction::EQ), q, r);
}

Value floor_divide_int(Builder& b, Value x, Value y) {
  Value q = div(b, x, y);  // truncates
  Value r = binary(b, Binary::Remainder, x, y);
  Value zero = k(b, 0, r);
  Value adjust = logical_and(b, compare(b, r, zero, Direction::NE),
                      compare(b, compare(b, r, zero, Direction::LT), compare(b, y, zero, Direction::LT), Direction::NE));
  return select(b, adjust, sub(b, q, k(b, 1, q)), q);
}

std::vector<Value> floor_divide(Context& c) {
  Builder& b = c.b;
  DType t = opmath(c.compute_dtype);
  if (t == DType::Pred || is_complex(t)) throw NotLowerable("floor_divide of bool or complex");
  Value x = operand(c, 0, t), y = operand(c, 1, t);
  Value r;
  if (is_float(t)) {
    r = floor_divide_float(b, x, y);
  } else {
    // Integer division by zero raises on the CPU; here at the next host sync.
    if (y.type.numel() > 0) {
      b.assert_false(reduce(b, compare(b, y, k(b, 0, y), Direction::EQ), all_dims(y), "or"), "ZeroDivisionError", CheckKind::RuntimeError);
    }
    r = floor_divide_int(b, x, y);
  }
  return {convert(b, r, c.out().dtype)};
}

// gcd by Euclid's algorithm in a while loop over the whole tensor (until every divisor is 0).
Value gcd_of(Builder& b, Value x, Value y) {
  Value a0 = is_unsigned(x.dtype()) ? x : unary(b, Unary::Abs, x);
  Value b0 = is_unsigned(y.dtype()) ? y : unary(b, Unary::Abs, y);
  Type t = x.type;
  std::string cond = b.region({t, t}, [&](Builder& r, const std::vector<Value>& v) {
    Value nz = compare(r, v[1], scalar_like(r, 0, v[1]), Direction::NE);
    return std::vector<Value>{t.numel() == 0 ? constant(r, 0, DType::Pred) : reduce(r, nz, all_dims(v[1]), "or")};
  });
  std::string body = b.region({t, t}, [&](Builder& r, const std::vector<Value>& v) {
    Value zero = scalar_like(r, 0, v[1]);
    Value nz = compare(r, v[1], zero, Direction::NE);
    Value safe = select(r, nz, v[1], scalar_like(r, 1, v[1]));
    Value rem = binary(r, Binary::Remainder, v[0], safe);
    return std::vector<Value>{select(r, nz, v[1], v[0]), select(r, nz, rem, zero)};
  });
  return b.emit("stablehlo.while", {a0, b0}, {t, t}, "", {cond, body}).at(0);
}

Rule gcd_lcm(bool lcm) {
  return [lcm](Context& c) {
    Builder& b = c.b;
    DType t = c.compute_dtype;
    if (!is_integer(t) || t == DType::Pred) throw NotLowerable("gcd/lcm of a non-integer type");
    // 8/16-bit values are computed in int like C++ does (lcm's a / g * b and abs), then narrowed.
    if (bit_width(t) < 32) t = DType::S32;
    Value x = operand(c, 0, t), y = operand(c, 1, t);
    Value g = gcd_of(b, x, y);
    if (!lcm) return std::vector<Value>{convert(b, g, c.out().dtype)};
    Value zero = k(b, 0, g);
    Value gz = compare(b, g, zero, Direction::EQ);
    Value q = mul(b, div(b, x, select(b, gz, k(b, 1, g), g)), y);
    if (!is_unsigned(t)) q = unary(b, Unary::Abs, q);
    return std::vector<Value>{convert(b, select(b, gz, zero, q), c.out().dtype)};
  };
}

// x << s and x >> s like the CPU: a shift amount that is negative or at least the type's width
// gives 0 (left, unsigned right) or the sign fill (signed right).
Rule shift(bool left) {
  return [left](Context& c) {
    Builder& b = c.b;
    DType t = c.compute_dtype;
    if (!is_integer(t) || t == DType::Pred) throw NotLowerable("bit shift of a non-integer type");
    Value x = operand(c, 0, t), s = operand(c, 1, t);
    double bits = bit_width(t);
    Value out_of_range = compare(b, s, k(b, bits, s), Direction::GE);
    if (!is_unsigned(t)) out_of_range = logical_or(b, out_of_range, compare(b, s, k(b, 0, s), Direction::LT));
    Value safe = select(b, out_of_range, k(b, 0, s), s);
    Value r, fill;
    if (left) {
      r = binary(b, Binary::ShiftLeft, x, safe);
      fill = k(b, 0, x);
    } else if (is_unsigned(t)) {
      r = binary(b, Binary::ShiftRightLogical, x, safe);
      fill = k(b, 0, x);
    } else {
      r = binary(b, Binary::ShiftRightArithmetic, x, safe);
      fill = select(b, compare(b, x, k(b, 0, x), Direction::LT), k(b, -1, x), k(b, 0, x));
    }
    return std::vector<Value>{convert(b, select(b, out_of_range, fill, r), c.out().dtype)};
  };
}

// angle: atan2(imag, real) for complex; pi for negative reals, 0 otherwise, NaN kept.
std::vector<Value> angle(Context& c) {
  Builder& b = c.b;
  Value z = c.tensor(0);
  DType out = c.out().dtype;
  if (is_complex(z.dtype())) {
    Type rt(real_part(z.dtype()), z.shape());
    Value re = real(b, z), im = imag(b, z);
    return {convert(b, binary(b, Binary::Atan2, im, re), out)};
  }
  Value x = convert(b, z, opmath(out));
  Value r = select(b, compare(b, x, k(b, 0, x), Direction::LT), k(b, M_PI, x), k(b, 0, x));
  return {convert(b, select(b, is_nan(b, x), x, r), out)};
}

Value make_complex(Builder& b, Value re, Value im, DType out) {
  if (!is_complex(out)) throw NotLowerable("complex result type");
  return complex(b, re, im);
}

std::vector<Value> complex(Context& c) {  // (real, imag)
  DType out = c.out().dtype;
  if (!is_complex(out)) throw NotLowerable("complex result type");
  DType t = real_part(out);
  return {make_complex(c.b, operand(c, 0, t), operand(c, 1, t), out)};
}

std::vector<Value> polar(Context& c) {  // (abs, angle)
  Builder& b = c.b;
  DType out = c.out().dtype;
  if (!is_complex(out)) throw NotLowerable("complex result type");
  DType t = real_part(out);
  Value r = operand(c, 0, t), th = operand(c, 1, t);
  Value re = mul(b, r, unary(b, Unary::Cosine, th));
  Value im = mul(b, r, unary(b, Unary::Sine, th));
  return {make_complex(b, re, im, out)};
}

const Registrar registrar({
    {"xlogy.Tensor", xlogy},
    {"xlogy.Scalar_Self", xlogy},
    {"xlogy.Scalar_Other", xlogy},
    {"xlogy.OutTensor", xlogy},  // out= overloads whose names rule_for does not recognise
    {"xlogy.OutScalar_Self", xlogy},
    {"xlogy.OutScalar_Other", xlogy},
    {"nan_to_num", nan_to_num},
    {"signbit", signbit},
    {"rsub.Tensor", rsub},
    {"rsub.Scalar", rsub},
    {"ldexp.Tensor", ldexp},
    {"floor_divide", floor_divide},
    {"floor_divide.Scalar", floor_divide},
    {"floor_divide.Tensor", floor_divide},  // the in-place floor_divide_.Tensor maps here
    {"gcd", gcd_lcm(false)},
    {"lcm", gcd_lcm(true)},
    {"bitwise_left_shift.Tensor", shift(true)},
    {"bitwise_left_shift.Tensor_Scalar", shift(true)},
    {"bitwise_left_shift.Scalar_Tensor", shift(true)},
    {"bitwise_right_shift.Tensor", shift(false)},
    {"bitwise_right_shift.Tensor_Scalar", shift(false)},
    {"bitwise_right_shift.Scalar_Tensor", shift(false)},
    {"__lshift__.Tensor", shift(true)},
    {"__lshift__.Scalar", shift(true)},
    {"__ilshift__.Tensor", shift(true)},
    {"__ilshift__.Scalar", shift(true)},
    {"__rshift__.Tensor", shift(false)},
    {"__rshift__.Scalar", shift(false)},
    {"__irshift__.Tensor", shift(false)},
    {"__irshift__.Scalar", shift(false)},
    {"angle", angle},
    {"complex", complex},
    {"polar", polar},
});

// An integer divisor of zero raises (floor_divide's check): checked on the divisor's values.
const ValueChecksRegistrar value_checks({"floor_divide", "floor_divide.Scalar", "floor_divide.Tensor"});

}  // namespace
}  // namespace tpu::lowering
