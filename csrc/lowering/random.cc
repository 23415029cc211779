// Random ops (normal_, uniform_, bernoulli, random_, exponential_, multinomial, randperm).
// The non-random factories (arange, linspace, eye) are in factories.cc.
//
// Random ops draw from stablehlo.rng_bit_generator keyed by the device generator: the driver
// passes ctx.rng_key = (seed, per-op counter); op_key() spreads the counter so successive ops
// get disjoint counter ranges. Values differ from the CPU generator's but are reproducible
// under the same seed.
#include <cmath>
#include <limits>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

Value u64_constant(Builder& b, uint64_t v, const std::vector<int64_t>& shape) {
  Type t(DType::U64, shape);
  return b.emit1("stablehlo.constant", {}, t, "value = dense<" + std::to_string(v) + "> : " + t.str());
}

Value op_key(Builder& b, Value key) {
  Value seed = slice(b, key, {0}, {1}, {1});
  Value ctr = slice(b, key, {1}, {2}, {1});
  Value hi = binary(b, Binary::ShiftRightLogical, ctr, u64_constant(b, 32, {1}));
  Value lo = binary(b, Binary::ShiftLeft, ctr, u64_constant(b, 32, {1}));
  seed = add(b, seed, mul(b, hi, u64_constant(b, 11400714819323198485ull, {1})));
  return concatenate(b, {seed, lo}, 0);
}

Value key_of(Context& c) {
  if (!c.rng_key.valid()) throw NotLowerable("random op without an rng key");
  return op_key(c.b, c.rng_key);
}

Value bits(Builder& b, Value& key, DType t, const std::vector<int64_t>& shape) {
  auto r = rng_bit_generator(b, key, Type(t, shape));
  key = r[0];
  return r[1];
}

// Uniform floats in [0, 1): f64 for f64 results, else f32.
Value uniform01(Builder& b, Value& key, const std::vector<int64_t>& shape, DType out) {
  if (out == DType::F64) {
    Value x = bits(b, key, DType::U64, shape);
    Value m = binary(b, Binary::ShiftRightLogical, x, u64_constant(b, 12, shape));
    Value one = binary(b, Binary::Or, m, u64_constant(b, 0x3FF0000000000000ull, shape));
    return sub(b, bitcast_convert(b, one, DType::F64), constant(b, 1, DType::F64, shape));
  }
  Value x = bits(b, key, DType::U32, shape);
  Value m = binary(b, Binary::ShiftRightLogical, x, constant(b, 9, DType::U32, shape));
  Value one = binary(b, Binary::Or, m, constant(b, 0x3F800000u, DType::U32, shape));
  return sub(b, bitcast_convert(b, one, DType::F32), constant(b, 1, DType::F32, shape));
}

// Standard normal draws of type `acc` (Box-Muller).
Value standard_normal(Builder& b, Value& key, const std::vector<int64_t>& shape, DType acc) {
  Value u1 = uniform01(b, key, shape, acc);
  Value u2 = uniform01(b, key, shape, acc);
  Value one = constant(b, 1, acc, shape);
  Value r = unary(b, Unary::Sqrt, mul(b, constant(b, -2, acc, shape), unary(b, Unary::Log, sub(b, one, u1))));
  return mul(b, r, unary(b, Unary::Cosine, mul(b, constant(b, 2 * M_PI, acc, shape), u2)));
}

// normal_(self, mean, std, generator). Complex tensors, as in PyTorch: the real and imaginary
// parts are each normal(mean, std / sqrt(2)), so |z - mean| has variance std^2.
std::vector<Value> normal(Context& c) {
  Builder& b = c.b;
  const Type& out = c.out();
  bool complex = is_complex(out.dtype);
  if (!is_float(out.dtype) && !complex) throw NotLowerable("normal_ on a non-float tensor");
  double mean = c.has(1) ? c.double_arg(1) : 0.0, std = c.has(2) ? c.double_arg(2) : 1.0;
  if (std < 0) throw std::invalid_argument("normal expects std >= 0.0, but found std " + std::to_string(std));
  DType acc = float_opmath(complex ? real_part(out.dtype) : out.dtype);
  Value key = key_of(c);
  auto draw = [&](double scale) {
    Value z = standard_normal(b, key, out.shape, acc);
    return add(b, mul(b, z, constant(b, scale, acc, out.shape)), constant(b, mean, acc, out.shape));
  };
  if (!complex) return {convert(b, draw(std), out.dtype)};
  Value re = draw(std / std::sqrt(2.0)), im = draw(std / std::sqrt(2.0));
  DType rt = real_part(out.dtype);
  return {hlo::complex(b, convert(b, re, rt), convert(b, im, rt))};
}

// uniform_(self, from, to, generator)
std::vector<Value> uniform(Context& c) {
  Builder& b = c.b;
  const Type& out = c.out();
  if (!is_float(out.dtype)) throw NotLowerable("uniform_ on a non-float tensor");
  DType acc = float_opmath(out.dtype);
  double from = c.has(1) ? c.double_arg(1) : 0.0, to = c.has(2) ? c.double_arg(2) : 1.0;
  if (from > to) throw std::invalid_argument("uniform_ expects to return a [from, to) range, but found from=" + std::to_string(from) + " > to=" + std::to_string(to));
  Value key = key_of(c);
  Value u = uniform01(b, key, out.shape, acc);
  Value r = add(b, mul(b, u, constant(b, to - from, acc, out.shape)), constant(b, from, acc, out.shape));
  Value rc = convert(b, r, out.dtype);
  // Rounding to a narrower type may reach `to`: keep the range half-open like PyTorch.
  if (out.dtype != acc && to > from) {
    Value top = constant(b, to, out.dtype, out.shape);
    Value ge = compare(b, rc, top, Direction::GE);
    rc = select(b, ge, convert(b, constant(b, from, acc, out.shape), out.dtype), rc);
  }
  return {rc};
}

// exponential_(self, lambd, generator)
std::vector<Value> exponential(Context& c) {
  Builder& b = c.b;
  const Type& out = c.out();
  if (!is_float(out.dtype)) throw NotLowerable("exponential_ on a non-float tensor");
  DType acc = float_opmath(out.dtype);
  double lambd = c.has(1) ? c.double_arg(1) : 1.0;
  if (!(lambd > 0)) throw std::invalid_argument("exponential_ expects lambda > 0.0, but found lambda=" + std::to_string(lambd));
  Value key = key_of(c);
  Value u = uniform01(b, key, out.shape, acc);
  Value r = div(b, neg(b, unary(b, Unary::LogPlusOne, neg(b, u))), constant(b, lambd, acc, out.shape));
  return {convert(b, r, out.dtype)};
}

// bernoulli_.float(self, p, generator) / bernoulli.p(self, p, generator)
std::vector<Value> bernoulli_float(Context& c) {
  Builder& b = c.b;
  const Type& out = c.out();
  double p = c.has(1) ? c.double_arg(1) : 0.5;
  if (p < 0 || p > 1) throw std::invalid_argument("bernoulli_ expects p to be in [0, 1], but got p=" + std::to_string(p));
  Value key = key_of(c);
  Value u = uniform01(b, key, out.shape, float_opmath(out.dtype));
  Value r = compare(b, u, constant(b, p, u.dtype(), out.shape), Direction::LT);
  return {convert(b, r, out.dtype)};
}

// bernoulli_.Tensor(self, p, generator) / bernoulli(self, generator): p is a tensor.
Rule bernoulli_tensor(size_t p_arg) {
  return [p_arg](Context& c) {
    Builder& b = c.b;
    const Type& out = c.out();
    Value key = key_of(c);
    DType acc = float_opmath(c.tensor(p_arg).dtype());
    Value u = uniform01(b, key, out.shape, acc);
    Value p = cast_to(b, c.tensor(p_arg), acc, out.shape);
    return std::vector<Value>{convert(b, compare(b, u, p, Direction::LT), out.dtype)};
  };
}

// Largest value random_() draws for dtype t (inclusive).
uint64_t default_max(DType t) {
  switch (t) {
    case DType::Pred: return 1;
    case DType::F16: return 1ull << 11;
    case DType::BF16: return 1ull << 8;
    case DType::F32: return 1ull << 24;
    case DType::F64: return 1ull << 53;
    case DType::U8: return 255;
    case DType::S8: return 127;
    case DType::S16: return 32767;
    case DType::U16: return 65535;
    case DType::S32: return 2147483647ull;
    case DType::U32: return 4294967295ull;
    case DType::S64: return 9223372036854775807ull;
    default: throw NotLowerable("random_ dtype");
  }
}

// Integers uniform in [from, from + range) (range 0 means 2^64).
Value random_range(Context& c, int64_t from, uint64_t range) {
  Builder& b = c.b;
  const Type& out = c.out();
  Value key = key_of(c);
  Value x = bits(b, key, DType::U64, out.shape);
  if (range != 0) x = binary(b, Binary::Remainder, x, u64_constant(b, range, out.shape));
  x = add(b, x, u64_constant(b, static_cast<uint64_t>(from), out.shape));
  Value s = bitcast_convert(b, x, DType::S64);
  return convert(b, s, out.dtype);
}

// random_.from(self, from, to?, generator)
std::vector<Value> random_from(Context& c) {
  int64_t from = c.int_arg(1);
  uint64_t range;
  if (c.has(2)) {
    int64_t to = c.int_arg(2);
    if (from >= to) throw std::invalid_argument("random_ expects 'from' to be less than 'to', but got from=" + std::to_string(from) + " >= to=" + std::to_string(to));
    range = static_cast<uint64_t>(to) - static_cast<uint64_t>(from);
  } else {
    range = default_max(c.out().dtype) - static_cast<uint64_t>(from) + 1;
  }
  return {random_range(c, from, range)};
}

std::vector<Value> random_to(Context& c) {
  int64_t to = c.int_arg(1);
  if (to <= 0) throw std::invalid_argument("random_ expects 'from' to be less than 'to', but got from=0 >= to=" + std::to_string(to));
  return {random_range(c, 0, static_cast<uint64_t>(to))};
}

std::vector<Value> random_default(Context& c) {
  return {random_range(c, 0, default_max(c.out().dtype) + 1)};
}

// multinomial(self, num_samples, replacement, generator)
std::vector<Value> multinomial(Context& c) {
  Builder& b = c.b;
  Value p = c.tensor(0);
  int64_t s = c.int_arg(1);
  bool replacement = c.bool_arg(2);
  if (p.rank() < 1 || p.rank() > 2) throw std::invalid_argument("prob_dist must be 1 or 2 dim");
  DType acc = float_opmath(p.dtype());
  int64_t n = p.rank() == 2 ? p.shape()[0] : 1;
  int64_t cats = p.shape().back();
  if (!replacement && s > cats) throw std::invalid_argument("cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  p = reshape(b, convert(b, p, acc), {n, cats});
  Value key = key_of(c);
  Value idx;
  if (replacement) {
    std::vector<std::pair<int64_t, int64_t>> pad{{0, 0}, {cats - 1, 0}};
    Value cdf = cats > 1 ? reduce_window(b, p, "add", {1, cats}, {1, 1}, pad) : p;
    Value total = broadcast_in_dim(b, reduce(b, p, {1}, "add"), {n, cats}, {0});
    cdf = div(b, cdf, total);
    Value u = uniform01(b, key, {n, s}, acc);
    Value ub = broadcast_in_dim(b, u, {n, s, cats}, {0, 1});
    Value cb = broadcast_in_dim(b, cdf, {n, s, cats}, {0, 2});
    Value le = convert(b, compare(b, cb, ub, Direction::LE), DType::S64);
    idx = reduce(b, le, {2}, "add");
    idx = min(b, idx, constant(b, static_cast<double>(cats - 1), DType::S64, {n, s}));
  } else {
    // Gumbel-top-k: argsort of log(p) + Gumbel noise.
    Value u = uniform01(b, key, {n, cats}, acc);
    Value one = constant(b, 1, acc, {n, cats});
    Value g = neg(b, unary(b, Unary::Log, neg(b, unary(b, Unary::Log, sub(b, one, u)))));
    Value k = add(b, unary(b, Unary::Log, p), g);
    Value ids = iota(b, Type(DType::S64, {n, cats}), 1);
    auto sorted = sort(b, {k, ids}, 1, /*descending=*/true, /*stable=*/true);
    idx = slice(b, sorted[1], {0, 0}, {n, s}, {1, 1});
  }
  return {convert(b, reshape(b, idx, c.out().shape), c.out().dtype)};
}

// randperm.generator_out(n, *, generator, out)
std::vector<Value> randperm(Context& c) {
  Builder& b = c.b;
  int64_t n = c.out().shape.at(0);
  Value key = key_of(c);
  Value k = bits(b, key, DType::U32, {n});
  Value ids = iota(b, Type(DType::S64, {n}), 0);
  auto sorted = sort(b, {k, ids}, 0, false, true);
  return {convert(b, sorted[1], c.out().dtype)};
}

const Registrar registrar({
    {"normal", normal},
    {"normal_", normal},
    {"uniform", uniform},
    {"uniform_", uniform},
    {"exponential", exponential},
    {"exponential_", exponential},
    {"bernoulli.float", bernoulli_float},
    {"bernoulli_.float", bernoulli_float},
    {"bernoulli.p", bernoulli_float},
    {"bernoulli.Tensor", bernoulli_tensor(1)},
    {"bernoulli_.Tensor", bernoulli_tensor(1)},
    {"bernoulli", bernoulli_tensor(0)},
    {"random.from", random_from},
    {"random_.from", random_from},
    {"random.to", random_to},
    {"random_.to", random_to},
    {"random", random_default},
    {"random_", random_default},
    {"multinomial", multinomial},
    {"randperm.generator_out", randperm},
});

}  // namespace
}  // namespace tpu::lowering
