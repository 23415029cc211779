// Helpers shared by the spatial rule files (conv.cc, pooling.cc, upsampling.cc): parameter
// lists, window arithmetic and separable linear maps over the last two dims.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hlo/builder.h"

namespace tpu::lowering::spatial {

// A conv/pool parameter list of n values: empty -> n copies of dflt, one value -> n copies of it.
std::vector<int64_t> expand(const std::vector<int64_t>& v, size_t n, int64_t dflt);
// lo, lo + 1, ..., hi - 1.
std::vector<int64_t> range(int64_t lo, int64_t hi);
// The extent of s positions dilated by d.
int64_t dilate(int64_t s, int64_t d);

// A constant [rows, cols] matrix of dtype f32 (or f64).
hlo::Value matrix(hlo::Builder& b, const std::vector<double>& m, int64_t rows, int64_t cols, hlo::DType dt);
// y[..., o, p] = sum_{h, w} Mh[o, h] * x[..., h, w] * Mw[p, w]
hlo::Value separable(hlo::Builder& b, hlo::Value x, hlo::Value mh, hlo::Value mw);
// A pooling window along one dim: output size (PyTorch's pooling_output_shape, with ceil_mode)
// and the low/high padding that makes reduce_window produce it (negative: cut the input).
struct PoolGeom {
  int64_t out, lo, hi;
};
PoolGeom pool_geom(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode);

// Per-position divisors of avg_pool along one dim (PyTorch's CPU kernel formula).
std::vector<int64_t> avg_counts(int64_t in, int64_t k, int64_t s, int64_t p, int64_t out, bool include_pad);

// The transpose of a 2-D matrix.
hlo::Value transpose2(hlo::Builder& b, hlo::Value m);

}  // namespace tpu::lowering::spatial

namespace tpu::lowering::spatial {

// Windowed sums along `dim`: result j (the new extent of `dim` is starts.size()) is the sum of
// x[starts[j] + k] for 0 <= k < lens[j]. Each output reads only its own window (a gather and a
// masked reduce, not a dense matrix product), so a NaN or inf reaches only the windows holding it.
hlo::Value window_sum(hlo::Builder& b, hlo::Value x, int64_t dim, const std::vector<int64_t>& starts,
                      const std::vector<int64_t>& lens);

// Adaptive pooling windows along one dim: output o covers [floor(o*in/out), ceil((o+1)*in/out)).
int64_t adaptive_start(int64_t o, int64_t in, int64_t out);
int64_t adaptive_end(int64_t o, int64_t in, int64_t out);

// Adaptive average pooling over the last n dims of x (output sizes `os`), and its gradient
// (the gradient `g` spread back over an input of spatial sizes `in`), both by window sums.
hlo::Value adaptive_avg(hlo::Builder& b, hlo::Value x, const std::vector<int64_t>& os);
hlo::Value adaptive_avg_grad(hlo::Builder& b, hlo::Value g, const std::vector<int64_t>& in);
// A pooling backward's grad_output must have self's batch and channel dims (all but the last
// `spatial`): the CPU kernels read it with self's and go out of bounds otherwise.
void check_grad_leading_dims(const std::string& op, hlo::Value grad, hlo::Value self, int64_t spatial);

}  // namespace tpu::lowering::spatial
