// linalg_lstsq for float32/float64, through the SVD (linalg_svd.cc): the minimum-norm
// solution x = V diag(1/s_i for s_i > rcond * s_max) U^T b, with rank = that count.
//
// LAPACK's default driver (gelsy, a pivoted QR) finds the same minimum-norm solution and
// (up to how a nearly singular value is classed) the same rank; gels assumes full rank, where
// all drivers agree. Outputs follow the driver as on the CPU: residuals (the squared norm of
// A x - b per column) for gels with m > n, rank for all but gels, singular values for
// gelsd/gelss. gelsd/gelss with m > n report residuals only when every matrix has full rank,
// a shape that depends on the data: those calls run on the CPU fallback.
#include <algorithm>
#include <string>
#include <vector>

#include "lowering/linalg_common.h"
#include "lowering/math_helpers.h"

namespace tpu::lowering {
namespace {

using namespace hlo;
using namespace linalg;

// linalg_lstsq(A, B, rcond=None, *, driver=None) -> (solution, residuals, rank, singular_values)
std::vector<Value> lstsq(Context& c) {
  Builder& b = c.b;
  Value a = c.tensor(0), rhs = c.tensor(1);
  require_f32_f64(a.dtype(), "linalg_lstsq_cpu");
  std::string driver = c.has(3) ? c.arg(3).s : "gelsy";
  int64_t m = a.shape()[a.rank() - 2], n = a.shape().back();
  DType t = a.dtype();
  if (rhs.dtype() != t) throw NotLowerable("lstsq of mixed dtypes");  // the meta kernel rejects them
  if (m == 0 || n == 0 || c.out(0).numel() == 0) throw NotLowerable("lstsq of an empty matrix");
  if ((driver == "gelsd" || driver == "gelss") && m > n) throw NotLowerable("lstsq residuals depend on the rank");
  const Type& tx = c.out(0);
  bool vector = tx.rank() == a.rank() - 1;  // B was a (batch of) vector(s)
  if (vector) {
    std::vector<int64_t> s = rhs.shape();
    s.push_back(1);
    rhs = reshape(b, rhs, s);
  }
  int64_t k = rhs.shape().back();
  std::vector<int64_t> batch = broadcast_shapes(std::vector<int64_t>(a.shape().begin(), a.shape().end() - 2),
                                                std::vector<int64_t>(rhs.shape().begin(), rhs.shape().end() - 2));
  auto with = [&](std::vector<int64_t> last) {
    std::vector<int64_t> s = batch;
    s.insert(s.end(), last.begin(), last.end());
    return s;
  };
  Value A = as_batch(b, broadcast_to(b, a, with({m, n}))), B = as_batch(b, broadcast_to(b, rhs, with({m, k})));
  int64_t Bt = A.shape()[0], kk = std::min(m, n);
  b.assert_false(any_nan(b, A),
                 "linalg.lstsq: The algorithm failed to converge because the input matrix contained non-finite values.",
                 CheckKind::RuntimeError);
  Svd f = svd_decompose(b, A, false, true);  // U [Bt, m, kk], S [Bt, kk], V [Bt, n, kk]
  double rcond = c.has(2) ? c.double_arg(2) : -1;
  if (!(rcond >= 0)) rcond = epsilon(t) * std::max(m, n);  // PyTorch's default (and LAPACK's for < 0)
  Value smax = broadcast_in_dim(b, slice(b, f.s, {0, 0}, {Bt, 1}, {1, 1}), {Bt, kk}, {0, 1});
  Value kept = compare(b, f.s, mul(b, smax, constant(b, rcond, t, {Bt, kk})), Direction::GT);
  Value sinv = select(b, kept, div(b, constant(b, 1, t, {Bt, kk}), f.s), zeros(b, f.s.type));
  Value utb = dot_general(b, f.u, B, {0}, {0}, {1}, {1}, t);  // U^T B: [Bt, kk, k]
  utb = mul(b, utb, broadcast_in_dim(b, sinv, {Bt, kk, k}, {0, 1}));
  Value x = dot_general(b, f.v, utb, {0}, {0}, {2}, {1}, t);  // [Bt, n, k]
  std::vector<Value> outs{reshape(b, x, tx.shape)};
  const Type &tres = c.out(1), &trank = c.out(2), &tsv = c.out(3);
  if (tres.numel() > 0) {  // gels, m > n
    Value r = sub(b, dot_general(b, A, x, {0}, {0}, {2}, {1}, t), B);
    outs.push_back(reshape(b, reduce(b, mul(b, r, r), {1}, "add"), tres.shape));
  } else {
    outs.push_back(zeros(b, tres));
  }
  outs.push_back(trank.numel() > 0 ? reshape(b, reduce(b, convert(b, kept, DType::S64), {1}, "add"), trank.shape)
                                   : zeros(b, trank));
  outs.push_back(tsv.numel() > 0 ? reshape(b, f.s, tsv.shape) : zeros(b, tsv));
  return outs;
}

const Registrar registrar({
    {"linalg_lstsq", lstsq},
});

}  // namespace
}  // namespace tpu::lowering
