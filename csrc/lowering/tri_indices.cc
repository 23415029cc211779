// tril_indices / triu_indices (their out= overloads; the eager functional kernels allocate the
// result and call them, engine/eager/host_read_ops.cc). The coordinates of element k of the
// row-major triangle come from a binary search of k in the rows' start positions (known when
// lowering), so the module stays O(rows) in size and O(N log rows) in work.
#include <algorithm>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// `table`[idx] for idx [N] (values of a constant vector).
Value lookup(Builder& b, Value table, Value idx) {
  int64_t N = idx.shape()[0];
  GatherDims d;
  d.collapsed_slice_dims = {0};
  d.start_index_map = {0};
  d.index_vector_dim = 1;
  return gather(b, table, reshape(b, idx, {N, 1}), d, {1}, {N});
}

// (row, col, offset) -> [2, N]: lower (tril) or upper (triu) triangle coordinates.
Rule tri_indices(bool lower) {
  return [lower](Context& c) {
    Builder& b = c.b;
    int64_t rows = c.int_arg(0), cols = c.int_arg(1), offset = c.int_arg(2);
    const Type& out = c.out();
    int64_t N = out.shape.at(1);
    if (N == 0) return std::vector<Value>{zeros(b, out)};
    std::vector<int64_t> start(rows, 0), first_col(rows, 0);
    int64_t total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t lo = lower ? 0 : std::clamp<int64_t>(r + offset, 0, cols);
      int64_t hi = lower ? std::clamp<int64_t>(r + offset + 1, 0, cols) : cols;
      start[r] = total;
      first_col[r] = lo;
      total += std::max<int64_t>(hi - lo, 0);
    }
    Value starts = constant_i64_vector(b, start), firsts = constant_i64_vector(b, first_col);
    Value k = iota(b, Type(DType::S64, {N}), 0);
    // The row of k: the last row whose start is <= k (empty rows share their successor's start).
    Value row = constant(b, 0, DType::S64, {N});
    int64_t step = 1;
    while (step * 2 <= rows) step *= 2;
    for (; step >= 1; step /= 2) {
      Value cand = add(b, row, constant(b, static_cast<double>(step), DType::S64, {N}));
      Value valid = compare(b, cand, constant(b, static_cast<double>(rows), DType::S64, {N}), Direction::LT);
      Value safe = select(b, valid, cand, row);
      Value ok = binary(b, Binary::And, valid, compare(b, lookup(b, starts, safe), k, Direction::LE));
      row = select(b, ok, cand, row);
    }
    Value col = add(b, sub(b, k, lookup(b, starts, row)), lookup(b, firsts, row));
    Value r = concatenate(b, {reshape(b, row, {1, N}), reshape(b, col, {1, N})}, 0);
    return std::vector<Value>{convert(b, r, out.dtype)};
  };
}

const Registrar registrar({
    {"tril_indices", tri_indices(true)},
    {"triu_indices", tri_indices(false)},
});

}  // namespace
}  // namespace tpu::lowering
