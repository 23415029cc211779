// Helpers shared by the QR, SVD and symmetric eigensolver rules (linalg_qr.cc, linalg_svd.cc,
// linalg_eigh.cc): matrices are handled as [Bt, m, n] stacks with the batch dims folded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lowering/registry.h"

namespace tpu::lowering::linalg {

// float32/float64 only: the CPU kernels reject bf16/f16 ("<kernel>" not implemented for
// 'BFloat16') and integers; complex goes to the CPU fallback.
void require_f32_f64(DType t, const std::string& kernel);

// An s64 scalar constant (loop counters, indices).
Value s64(Builder& b, int64_t v);
// Leading dims folded into one batch dim: [Bt, m, n].
Value as_batch(Builder& b, Value x);
Value transpose_last2(Builder& b, Value x);
// Identity [Bt, m, n] (ones on the main diagonal).
Value eye(Builder& b, DType t, int64_t Bt, int64_t m, int64_t n);
// Entries of a [Bt, m, n] value where (row - col) compares to `offset` by `direction`.
Value diag_mask(Builder& b, int64_t Bt, int64_t m, int64_t n, hlo::Direction direction, int64_t offset = 0);
// The diagonal of a [Bt, m, n] value: [Bt, min(m, n)].
Value diagonal(Builder& b, Value x);
// x[:, :, idx[b, j]] for x [Bt, r, c] and idx [Bt, c'] (s64): [Bt, r, c'].
Value gather_columns(Builder& b, Value x, Value idx);
// True when x has a NaN anywhere (tensor<i1>).
Value any_nan(Builder& b, Value x);
// Machine epsilon of f32/f64 (LAPACK's dlamch('E') * 2: the spacing of 1).
double epsilon(DType t);

// The round-robin (circle method) schedule of parallel Jacobi methods: x holds 2h items along
// `dim` as [top | bottom], item i of the top paired with item i of the bottom. One call moves
// every item but the first one place around the circle; 2h - 1 calls pair every two items
// once and restore the original order.
Value tournament(Builder& b, Value x, int64_t dim);
// -1 where x < 0, else 1 (sign with sign(0) = 1).
Value sign_or_one(Builder& b, Value x);

// Householder QR of [Bt, m, n] in LAPACK's geqrf layout: R on and above the diagonal, the
// reflectors' tails below it (v[k] = 1 implied), tau [Bt, min(m, n)].
struct Qr {
  Value a;
  Value tau;
};
Qr householder_qr(Builder& b, Value a);
// Q[:, :, :ncols] with Q = H_0 ... H_{k-1} (k = tau's length): LAPACK's orgqr for m x ncols.
Value householder_product(Builder& b, Value v, Value tau, int64_t ncols);
// Q c (or Q^T c when `transpose`) for c [Bt, m, p]: LAPACK's ormqr from the left.
Value apply_q(Builder& b, Value v, Value tau, Value c, bool transpose, bool trailing_columns_only = false);

// SVD of a [Bt, m, n] stack (linalg_svd.cc): U [Bt, m, k or m], S [Bt, k] descending,
// V [Bt, n, k or n] (columns are the right singular vectors), k = min(m, n) > 0; U and V are
// unset unless `uv`. NaN inputs give NaN or arbitrary values: callers check.
struct Svd {
  Value u, s, v;
};
Svd svd_decompose(Builder& b, Value a, bool full_matrices, bool uv);

}  // namespace tpu::lowering::linalg
