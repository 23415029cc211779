#include "lowering/linalg_jacobi.h"

#include "lowering/linalg_common.h"
#include "lowering/math_helpers.h"

namespace tpu::lowering::linalg {
namespace {

using namespace hlo;

// sqrt(1 + z^2) without overflow.
Value hypot1(Builder& b, Value z) {
  Value az = unary(b, Unary::Abs, z), one = scalar_like(b, 1, z);
  Value big = max(b, az, one), small = min(b, az, one);
  Value r = div(b, small, big);
  return mul(b, big, unary(b, Unary::Sqrt, add(b, one, mul(b, r, r))));
}

}  // namespace

std::pair<Value, Value> halves(Builder& b, Value x) {
  int64_t Bt = x.shape()[0], r = x.shape()[1], h = x.shape()[2] / 2;
  return {slice(b, x, {0, 0, 0}, {Bt, r, h}, {1, 1, 1}), slice(b, x, {0, 0, h}, {Bt, r, 2 * h}, {1, 1, 1})};
}

Value rotate(Builder& b, Value p, Value q, Value c, Value s) {
  const std::vector<int64_t>& shape = p.shape();
  Value cc = broadcast_in_dim(b, c, shape, {0, 2}), ss = broadcast_in_dim(b, s, shape, {0, 2});
  return concatenate(b, {sub(b, mul(b, cc, p), mul(b, ss, q)), add(b, mul(b, ss, p), mul(b, cc, q))}, 2);
}

Rotation jacobi_rotation(Builder& b, Value alpha, Value beta, Value gamma, Value rot) {
  Value one = scalar_like(b, 1, gamma);
  Value g = select(b, rot, gamma, one);
  Value zeta = div(b, sub(b, beta, alpha), mul(b, scalar_like(b, 2, g), g));
  Value t = div(b, sign_or_one(b, zeta), add(b, unary(b, Unary::Abs, zeta), hypot1(b, zeta)));
  t = select(b, rot, t, zeros(b, t.type));
  Value c = div(b, one, unary(b, Unary::Sqrt, add(b, one, mul(b, t, t))));
  return {c, mul(b, c, t), t};
}

std::vector<Value> jacobi_sweeps(Builder& b, const std::vector<Value>& carried, int64_t n, const JacobiStep& step) {
  // Loop state: {step count, a pair was unsettled in this sweep, done, carried...}.
  Type tk(DType::S64, {}), tp(DType::Pred, {});
  std::vector<Type> state{tk, tp, tp};
  for (const Value& v : carried) state.push_back(v.type);
  int64_t steps = n - 1;
  std::string cond = b.region(state, [&](Builder& rb, const std::vector<Value>& x) {
    Value more = compare(rb, x[0], s64(rb, kMaxJacobiSweeps * steps), Direction::LT);
    return std::vector<Value>{logical_and(rb, more, unary(rb, Unary::Not, x[2]))};
  });
  std::string body = b.region(state, [&](Builder& rb, const std::vector<Value>& x) {
    auto [next, unsettled] = step(rb, std::vector<Value>(x.begin() + 3, x.end()));
    std::vector<Value> out{add(rb, x[0], s64(rb, 1)), x[1], x[2]};
    out.insert(out.end(), next.begin(), next.end());
    // A sweep is over when the schedule has come round; stop after one with no unsettled pair.
    Value unsettled_sweep = logical_or(rb, x[1], reduce(rb, unsettled, {0, 1}, "or"));
    Value sweep_end = compare(rb, binary(rb, Binary::Remainder, out[0], s64(rb, steps)), s64(rb, 0), Direction::EQ);
    out[2] = logical_and(rb, sweep_end, unary(rb, Unary::Not, unsettled_sweep));
    out[1] = select(rb, sweep_end, constant(rb, 0, DType::Pred), unsettled_sweep);
    return out;
  });
  std::vector<Value> init{s64(b, 0), constant(b, 0, DType::Pred), constant(b, 0, DType::Pred)};
  init.insert(init.end(), carried.begin(), carried.end());
  std::vector<Value> r = b.emit("stablehlo.while", init, state, "", {cond, body});
  return std::vector<Value>(r.begin() + 3, r.end());
}

}  // namespace tpu::lowering::linalg
