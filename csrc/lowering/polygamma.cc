// polygamma(n, x), as PyTorch's CPU kernel computes it: n = 0 is digamma's rule, n = 1 the
// CPU's trigamma series (reflection below 1/2, six recurrence steps, then an asymptotic
// expansion), and n >= 2 is (-1)^(n+1) n! zeta(n+1, x) with the Hurwitz zeta of Cephes
// (direct terms, then the Euler-Maclaurin tail with 12 Bernoulli terms). The CPU loops until
// the terms are small; here a fixed 30 direct terms, exact for x > -21 and accurate to a few
// ulps beyond.
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
  Value reflect = compare(b, x, k(0.5), "LT");
  Value s = unary(b, "stablehlo.sine", mul(b, k(pi), x));
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

// Hurwitz zeta(s, q) for an integer s >= 2.
Value hurwitz_zeta(Builder& b, double s, Value q) {
  auto k = [&](double v) { return scalar_like(b, v, q); };
  static const double A[] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
                             7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
                             -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18};
  const int terms = 30;
  auto inv_pow = [&](Value v) { return binary(b, "stablehlo.power", v, k(-s)); };
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
  // Poles: q = 0, -1, -2, ... (and -inf) give +inf, as Cephes.
  Value pole = binary(b, "stablehlo.and", compare(b, unary(b, "stablehlo.floor", q), q, "EQ"),
                      compare(b, q, k(0), "LE"));
  return select(b, pole, k(std::numeric_limits<double>::infinity()), sum);
}

std::vector<Value> polygamma(Context& c) {
  Builder& b = c.b;
  int64_t n = c.int_arg(0);
  if (n < 0) throw InvalidCall("polygamma(n, x) does not support negative n.");
  if (n == 0) {
    Context sub{c.b, {c.arg(1)}, c.out_types, c.compute_dtype, c.rng_key};
    return (*find_rule("digamma"))(sub);
  }
  DType out = c.out().dtype, acc = opmath(out);
  Value x = convert(b, c.tensor(1), acc);
  if (n == 1) return {convert(b, trigamma(b, x), out)};
  double factorial = std::exp(std::lgamma(static_cast<double>(n) + 1.0));
  Value r = mul(b, scalar_like(b, (n % 2 ? 1.0 : -1.0) * factorial, x), hurwitz_zeta(b, static_cast<double>(n + 1), x));
  return {convert(b, r, out)};
}

const Registrar registrar({{"polygamma", polygamma}});

}  // namespace
}  // namespace tpu::lowering
