// The cyclic Jacobi methods' shared pieces (linalg_eigh.cc: two-sided rotations of a symmetric
// matrix; linalg_svd.cc: one-sided rotations of columns). n/2 disjoint pairs [p | q] rotate at
// once, in the round-robin order of linalg::tournament, so a step is vector arithmetic over
// [Bt, r, n/2] halves and a sweep is n - 1 steps.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "lowering/registry.h"

namespace tpu::lowering::linalg {

// Sweeps a solver may take: sweeps stop early once settled, and NaN cannot hang.
constexpr int64_t kMaxJacobiSweeps = 40;

// The last-dim halves [p | q] of x [Bt, r, 2h].
std::pair<Value, Value> halves(Builder& b, Value x);
// [c*p - s*q | s*p + c*q] for p, q [Bt, r, h] and c, s [Bt, h]: [p | q] J.
Value rotate(Builder& b, Value p, Value q, Value c, Value s);

// The rotation J = [[c, s], [-s, c]] zeroing the off-diagonal of [[alpha, gamma], [gamma, beta]]
// (Golub & Van Loan's symmetric Schur), with t = s / c; the identity (t = 0) where !rot.
struct Rotation {
  Value c, s, t;
};
Rotation jacobi_rotation(Builder& b, Value alpha, Value beta, Value gamma, Value rot);

// The sweep loop around `step`, which maps the carried values to their rotated successors (same
// types) and the pairs still unsettled ([Bt, h] i1). The loop stops after a sweep in which no
// pair was unsettled, or after kMaxJacobiSweeps sweeps. Returns the carried values.
using JacobiStep = std::function<std::pair<std::vector<Value>, Value>(Builder&, const std::vector<Value>&)>;
std::vector<Value> jacobi_sweeps(Builder& b, const std::vector<Value>& carried, int64_t n, const JacobiStep& step);

}  // namespace tpu::lowering::linalg
