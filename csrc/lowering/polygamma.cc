// polygamma(n, x), as PyTorch's CPU kernel computes it: n = 0 is digamma's rule, n = 1 the
// CPU's trigamma series (reflection below 1/2, six recurrence steps, then an asymptotic
// expansion), and n >= 2 is (-1)^(n+1) n! zeta(n+1, x) with the Hurwitz zeta of Cephes
// (direct terms, then the Euler-Maclaurin tail with 12 Bernoulli terms). The CPU loops until
// the terms are small, in double; here a fixed 30 direct terms in the input's type, with the
// cancelling terms of negative arguments paired (hurwitz_zeta).
#include <cmath>
#include <limits>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

Value trigamma(Builder& b, Value x) {
  auto k = [&](double v) { return scalar_like(b, v, x); };
  const double pi = M_PI;
  Value reflect = compare(b, x, k(0.5), Direction::LT);
  Value s = unary(b, Unary::Sine, mul(b, k(pi), x));
  Value result = select(b, reflect, neg(b, div(b, k(pi * pi), mul(b, s, s))), k(0));
  Value y = select(b, reflect, sub(b, k(1), x), x);
  for (int i = 0; i < 6; ++i) {
    result = add(b, result, div(b, k(1), mul(b, y, y)));
    y = add(b, y, k(1));
  }
  Value ixx = div(b, k(1), mul(b, y, y));
  Value series = sub(b, k(1.0 / 30), mul(b, ixx, k(1.0 / 42)));
  series = sub(b, k(1.0 / 6), mul(b, ixx, series));
  series = add(b, add(b, k(1), div(b, k(1), mul(b, k(2), y))), mul(b, ixx, series));
  result = add(b, result, div(b, series, y));
  return select(b, reflect, neg(b, result), result);
}

// Hurwitz zeta(s, q) for an integer s >= 2 and q > -21 (30 direct terms, then the tail).
Value hurwitz_zeta_series(Builder& b, double s, Value q) {
  auto k = [&](double v) { return scalar_like(b, v, q); };
  static const double A[] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
                             7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
                             -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18};
  const int terms = 30;
  auto inv_pow = [&](Value v) { return binary(b, Binary::Power, v, k(-s)); };
  Value w = add(b, q, k(terms));
  Value bw = inv_pow(w);
  // The smallest terms first.
  Value sum = bw;
  for (int j = terms - 1; j >= 0; --j) sum = add(b, sum, inv_pow(add(b, q, k(j))));
  sum = add(b, sum, div(b, mul(b, bw, w), k(s - 1)));
  sum = sub(b, sum, mul(b, k(0.5), bw));
  Value a = k(1), t = bw;
  double kk = 0;
  for (int i = 0; i < 12; ++i) {
    a = mul(b, a, k(s + kk));
    t = div(b, t, w);
    sum = add(b, sum, div(b, mul(b, a, t), k(A[i])));
    kk += 1;
    a = mul(b, a, k(s + kk));
    t = div(b, t, w);
  }
  return sum;
}

// Hurwitz zeta(s, q). A negative non-integer q = f - m (0 < f < 1) has m negative terms
// (f - m + j), |.| = 1 - f + i, that nearly cancel positive ones (f + i) for odd s: summed as
// pairs (f + i)^-s + (-1)^s (1 - f + i)^-s, then zeta(s, f + m), so float32 keeps its digits
// where the plain series would add and subtract large terms (up to m = 100; below -100 the
// plain series, whose terms cancel).
Value hurwitz_zeta(Builder& b, double s, Value q) {
  auto k = [&](double v) { return scalar_like(b, v, q); };
  const int max_pairs = 100;
  Value fl = unary(b, Unary::Floor, q);
  Value paired = binary(b, Binary::And, compare(b, q, k(0), Direction::LT), compare(b, fl, k(-max_pairs), Direction::GE));
  Value m = select(b, paired, neg(b, fl), k(0));
  Value f = add(b, q, m);  // in [0, 1)
  Value sum = hurwitz_zeta_series(b, s, select(b, paired, add(b, f, m), q));
  auto inv_pow = [&](Value v) { return binary(b, Binary::Power, v, k(-s)); };
  double sign = std::fmod(s, 2.0) == 0 ? 1.0 : -1.0;
  for (int i = max_pairs - 1; i >= 0; --i) {
    // (f + i) = q + m + i and (1 - f + i) = -(q + m - 1 - i): offsets of q by integers, as
    // exact as the plain series' terms (f itself is rounded).
    Value pos = add(b, q, add(b, m, k(i)));
    Value negm = neg(b, add(b, q, sub(b, m, k(1 + i))));
    Value pair = add(b, inv_pow(pos), mul(b, k(sign), inv_pow(negm)));
    sum = add(b, sum, select(b, compare(b, k(i), m, Direction::LT), pair, k(0)));
  }
  // Poles: q = 0, -1, -2, ... (and -inf) give +inf, as Cephes.
  Value pole = binary(b, Binary::And, compare(b, fl, q, Direction::EQ), compare(b, q, k(0), Direction::LE));
  return select(b, pole, k(std::numeric_limits<double>::infinity()), sum);
}

std::vector<Value> polygamma(Context& c) {
  Builder& b = c.b;
  // polygamma(n, self) and polygamma.out take n first; the in-place polygamma_(self, n) self.
  size_t self_arg = c.arg(0).kind == Arg::Kind::Tensor ? 0 : 1;
  int64_t n = c.int_arg(1 - self_arg);
  if (n < 0) throw InvalidCall("polygamma(n, x) does not support negative n.");
  if (n == 0) {
    Context sub{c.b, {c.arg(self_arg)}, c.out_types, c.compute_dtype, c.rng_key};
    return (*find_rule("digamma"))(sub);
  }
  DType out = c.out().dtype, acc = opmath(out);
  Value x = convert(b, c.tensor(self_arg), acc);
  if (n == 1) return {convert(b, trigamma(b, x), out)};
  double factorial = std::exp(std::lgamma(static_cast<double>(n) + 1.0));
  Value r = mul(b, scalar_like(b, (n % 2 ? 1.0 : -1.0) * factorial, x), hurwitz_zeta(b, static_cast<double>(n + 1), x));
  return {convert(b, r, out)};
}

const Registrar registrar({{"polygamma", polygamma}});

}  // namespace
}  // namespace tpu::lowering
