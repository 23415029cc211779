// Householder QR for float32/float64: geqrf, linalg_qr (reduced / complete / r),
// linalg_householder_product (orgqr) and ormqr.
//
// StableHLO has no QR op (and a TPU has no LAPACK): the factorization is LAPACK's unblocked
// geqr2 written as a stablehlo.while over the columns (linalg_common.cc), so geqrf's output
// matches LAPACK's layout and sign convention (R's diagonal is -sign(alpha) * norm) and
// linalg_qr's Q and R match the CPU's up to rounding. Complex inputs go to the CPU fallback.
#include <algorithm>
#include <string>
#include <vector>

#include "lowering/linalg_common.h"
#include "lowering/math_helpers.h"

namespace tpu::lowering {
namespace {

using namespace hlo;
using namespace linalg;

bool any_empty(const Context& c) {
  for (const Type& t : c.out_types) if (t.numel() == 0) return true;
  return false;
}

void check_rank(const Value& a, const std::string& message) {
  if (a.rank() < 2) throw InvalidCall(message);
}

// Upper-triangular part of rows [0, rows) of a [Bt, m, n].
Value upper(Builder& b, Value a, int64_t rows) {
  int64_t Bt = a.shape()[0], m = a.shape()[1], n = a.shape()[2];
  Value r = a;
  if (rows < m) r = slice(b, a, {0, 0, 0}, {Bt, rows, n}, {1, 1, 1});
  if (rows > m) r = pad(b, a, zeros(b, Type(a.dtype(), {})), {0, 0, 0}, {0, rows - m, 0}, {0, 0, 0});
  return select(b, diag_mask(b, Bt, rows, n, Direction::LE), r, zeros(b, r.type));
}

// geqrf(A) -> (a, tau)
std::vector<Value> geqrf(Context& c) {
  Builder& b = c.b;
  Value a = c.tensor(0);
  check_rank(a, "torch.geqrf: input must have at least 2 dimensions.");
  require_f32_f64(a.dtype(), "geqrf_cpu");
  if (any_empty(c)) return {reshape(b, a, c.out(0).shape), zeros(b, c.out(1))};
  Qr f = householder_qr(b, as_batch(b, a));
  return {reshape(b, f.a, c.out(0).shape), reshape(b, f.tau, c.out(1).shape)};
}

// linalg_qr(A, mode="reduced") -> (Q, R)
std::vector<Value> qr(Context& c) {
  Builder& b = c.b;
  Value a = c.tensor(0);
  check_rank(a, "linalg.qr: The input tensor A must have at least 2 dimensions.");
  require_f32_f64(a.dtype(), "geqrf_cpu");
  std::string mode = c.has(1) ? c.arg(1).s : "reduced";
  if (mode != "reduced" && mode != "complete" && mode != "r") {
    throw InvalidCall("qr received unrecognized mode '" + mode +
                      "' but expected one of 'reduced' (default), 'r', or 'complete'");
  }
  Value ab = as_batch(b, a);
  int64_t Bt = ab.shape()[0], m = ab.shape()[1], n = ab.shape()[2], k = std::min(m, n);
  int64_t qcols = mode == "complete" ? m : k;
  const Type &tq = c.out(0), &tr = c.out(1);
  if (Bt == 0 || (k == 0 && (mode == "r" || qcols == 0))) return {zeros(b, tq), zeros(b, tr)};
  if (k == 0) return {reshape(b, eye(b, a.dtype(), Bt, m, m), tq.shape), zeros(b, tr)};  // Q = I
  Qr f = householder_qr(b, ab);
  Value r = reshape(b, upper(b, f.a, mode == "complete" ? m : k), tr.shape);
  if (mode == "r") return {zeros(b, tq), r};
  return {reshape(b, householder_product(b, f.a, f.tau, qcols), tq.shape), r};
}

// Batch shape of the reflectors must equal the other operands' (no broadcasting, as the CPU).
void check_batch(const Value& a, const Value& x, const std::string& op, const std::string& name, int64_t drop) {
  std::vector<int64_t> ab(a.shape().begin(), a.shape().end() - 2), xb(x.shape().begin(), x.shape().end() - drop);
  if (ab != xb) {
    throw InvalidCall(op + ": Expected batch dimensions of " + name + " to be equal to input.shape[:-2], but got " +
                      name + ".shape[:-" + std::to_string(drop) + "] = " + shape_str(xb) +
                      " and input.shape[:-2] = " + shape_str(ab));
  }
}

// linalg_householder_product(input, tau) -> Q[..., :m, :n]
std::vector<Value> householder(Context& c) {
  Builder& b = c.b;
  Value v = c.tensor(0), tau = c.tensor(1);
  const std::string op = "torch.linalg.householder_product";
  check_rank(v, op + ": input must have at least 2 dimensions.");
  int64_t m = v.shape()[v.rank() - 2], n = v.shape().back();
  if (m < n) throw InvalidCall(op + ": input.shape[-2] must be greater than or equal to input.shape[-1]");
  if (tau.rank() < 1 || n < tau.shape().back()) {
    throw InvalidCall(op + ": input.shape[-1] must be greater than or equal to tau.shape[-1]");
  }
  if (tau.rank() != v.rank() - 1) throw InvalidCall(op + ": input.dim() - tau.dim() must be equal to 1");
  check_batch(v, tau, op, "tau", 1);
  require_f32_f64(v.dtype(), "orgqr_cpu");
  if (tau.dtype() != v.dtype()) {
    throw InvalidCall(op + ": tau dtype " + torch_name(tau.dtype()) + " does not match input dtype " + torch_name(v.dtype()));
  }
  if (any_empty(c)) return {zeros(b, c.out())};
  Value vb = as_batch(b, v);
  Value tb = reshape(b, tau, {vb.shape()[0], tau.shape().back()});
  return {reshape(b, householder_product(b, vb, tb, n), c.out().shape)};
}

// ormqr(input, tau, other, left=True, transpose=False): Q other, Q^T other, other Q, other Q^T.
std::vector<Value> ormqr(Context& c) {
  Builder& b = c.b;
  Value v = c.tensor(0), tau = c.tensor(1), other = c.tensor(2);
  bool left = !c.has(3) || c.bool_arg(3), trans = c.has(4) && c.bool_arg(4);
  const std::string op = "torch.ormqr";
  check_rank(v, op + ": input must have at least 2 dimensions.");
  check_rank(other, op + ": other must have at least 2 dimensions.");
  int64_t rows = v.shape()[v.rank() - 2];
  int64_t other_dim = left ? other.shape()[other.rank() - 2] : other.shape().back();
  if (other_dim != rows) {
    throw InvalidCall(op + ": other.shape[" + (left ? "-2" : "-1") + "] must be equal to input.shape[-2]");
  }
  int64_t kk = std::min(other_dim, v.shape().back());
  if (tau.rank() < 1 || tau.shape().back() != kk) {
    throw InvalidCall(op + ": tau.shape[-1] must be equal to min(other.shape[" + (left ? "-2" : "-1") +
                      "], input.shape[-1])");
  }
  check_batch(v, tau, op, "tau", 1);
  check_batch(v, other, op, "other", 2);
  require_f32_f64(v.dtype(), "ormqr_cpu");
  if (any_empty(c)) return {zeros(b, c.out())};
  Value vb = as_batch(b, v), ob = as_batch(b, other);
  Value tb = reshape(b, tau, {vb.shape()[0], tau.shape().back()});
  // other Q = (Q^T other^T)^T and other Q^T = (Q other^T)^T.
  Value r = left ? apply_q(b, vb, tb, ob, trans) : transpose_last2(b, apply_q(b, vb, tb, transpose_last2(b, ob), !trans));
  return {reshape(b, r, c.out().shape)};
}

const Registrar registrar({
    {"geqrf", geqrf},
    {"geqrf.a", geqrf},  // out= (rule_for knows only overloads named like "out")
    {"linalg_qr", qr},
    {"linalg_householder_product", householder},
    {"ormqr", ormqr},
});

}  // namespace
}  // namespace tpu::lowering
