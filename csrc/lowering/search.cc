// Binary search: searchsorted (Tensor and Scalar values, right/side, sorter) and bucketize.
//
// The search is PyTorch's CPU binary search, step for step: a fixed number of halving steps
// (the bit length of the sequence length), each a gather of the middle element for every value.
// Emulating the search rather than counting matches PyTorch where the sequence is not sorted
// or holds NaNs (NaN compares false, so `!(mid >= v)` moves right).
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// seq [B, M] at (batch row, idx[B, K]) -> [B, K].
Value gather_rows(Builder& b, Value seq, Value idx) {
  int64_t B = idx.shape()[0], K = idx.shape()[1];
  Value rows = iota(b, Type(DType::S64, {B, K, 1}), 0);
  Value coords = concatenate(b, {rows, reshape(b, idx, {B, K, 1})}, 2);
  GatherDims d;
  d.collapsed_slice_dims = {0, 1};
  d.start_index_map = {0, 1};
  d.index_vector_dim = 2;
  return gather(b, seq, coords, d, {1, 1}, {B, K});
}

// Positions of `values` [B, K] in the rows of `seq` [B, M] (same compare type).
Value search(Builder& b, Value seq, Value values, bool right) {
  int64_t B = values.shape()[0], K = values.shape()[1], M = seq.shape()[1];
  std::vector<int64_t> s{B, K};
  Value start = constant(b, 0, DType::S64, s);
  if (M == 0) return start;
  Value end = constant(b, static_cast<double>(M), DType::S64, s);
  Value one = constant(b, 1, DType::S64, s), two = constant(b, 2, DType::S64, s);
  Value last = constant(b, static_cast<double>(M - 1), DType::S64, s);
  int steps = 0;
  for (int64_t m = M; m > 0; m >>= 1) ++steps;
  for (int i = 0; i < steps; ++i) {
    Value mid = add(b, start, div(b, sub(b, end, start), two));
    Value active = compare(b, start, end, Direction::LT);
    Value mid_val = gather_rows(b, seq, min(b, mid, last));
    // lower bound: !(mid >= v) moves right; upper bound: !(mid > v).
    Value stay = compare(b, mid_val, values, right ? Direction::GT : Direction::GE);
    Value go_right = binary(b, Binary::And, active, unary(b, Unary::Not, stay));
    Value go_left = binary(b, Binary::And, active, stay);
    start = select(b, go_right, add(b, mid, one), start);
    end = select(b, go_left, mid, end);
  }
  return start;
}

// sorted [..., M] (or 1-D), values [..., K] (any shape for a 1-D sequence), sorter like sorted.
Value searchsorted_impl(Context& c, Value sorted, Value values, bool right, const Value* sorter) {
  Builder& b = c.b;
  DType t = c.compute_dtype;
  if (t == DType::Pred || is_complex(t)) throw NotLowerable("searchsorted of bool or complex");
  if (sorted.rank() == 0) throw std::runtime_error("torch.searchsorted(): boundaries tensor should have positive dimension");
  int64_t M = sorted.shape().back();
  int64_t B = 1, K;
  if (sorted.rank() == 1) {
    K = values.type.numel();
  } else {
    if (values.rank() != sorted.rank()) {
      throw std::runtime_error("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                               "dimensions of boundaries tensor and input value tensor must match");
    }
    for (int64_t d = 0; d + 1 < sorted.rank(); ++d) {
      if (sorted.shape()[d] != values.shape()[d]) {
        throw std::runtime_error("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                                 "dimensions of boundaries tensor and input value tensor must match");
      }
      B *= sorted.shape()[d];
    }
    K = values.shape().back();
  }
  const Type& out = c.out();
  if (out.numel() == 0) return zeros(b, out);
  Value seq = reshape(b, convert(b, sorted, t), {B, M});
  if (sorter != nullptr) {
    if (sorter->shape() != sorted.shape()) {
      throw std::runtime_error("torch.searchsorted(): boundary and sorter must have the same size");
    }
    Value idx = reshape(b, convert(b, *sorter, DType::S64), {B, M});
    if (M > 0) {
      Value bad = binary(b, Binary::Or, compare(b, idx, constant(b, 0, DType::S64, {B, M}), Direction::LT),
                         compare(b, idx, constant(b, static_cast<double>(M), DType::S64, {B, M}), Direction::GE));
      b.assert_false(reduce(b, bad, {0, 1}, "or"), "torch.searchsorted(): sorter index out of range");
      seq = gather_rows(b, seq, idx);
    }
  }
  Value v = reshape(b, convert(b, values, t), {B, K});
  Value r = search(b, seq, v, right);
  return reshape(b, convert(b, r, out.dtype), out.shape);
}

bool right_of(const Context& c, size_t right_arg, size_t side_arg) {
  bool right = c.bool_arg(right_arg);
  if (c.has(side_arg)) {
    const std::string& side = c.arg(side_arg).s;
    if (side != "left" && side != "right") {
      throw std::runtime_error("torch.searchsorted(): side can only be 'left' or 'right' but got " + side);
    }
    if (right && side == "left") {
      throw std::runtime_error("torch.searchsorted(): side and right can't be set to opposites, got side of left "
                               "while right was True");
    }
    right = side == "right";
  }
  return right;
}

// searchsorted.Tensor / .Scalar(sorted_sequence, self, *, out_int32, right, side, sorter)
std::vector<Value> searchsorted(Context& c) {
  bool right = right_of(c, 3, 4);
  Value sorter;
  if (c.has(5)) sorter = c.tensor(5);
  return {searchsorted_impl(c, c.tensor(0), c.tensor(1), right, c.has(5) ? &sorter : nullptr)};
}

// bucketize.Tensor / .Scalar(self, boundaries, *, out_int32, right)
std::vector<Value> bucketize(Context& c) {
  Value boundaries = c.tensor(1);
  if (boundaries.rank() != 1) {
    throw std::runtime_error("bucketize(): boundaries tensor must be 1 dimension, but got dim(" +
                             std::to_string(boundaries.rank()) + ")");
  }
  return {searchsorted_impl(c, boundaries, c.tensor(0), c.bool_arg(3), nullptr)};
}

const Registrar registrar({
    {"searchsorted.Tensor", searchsorted},
    {"searchsorted.Scalar", searchsorted},
    {"bucketize.Tensor", bucketize},
    {"bucketize.Scalar", bucketize},
});

}  // namespace
}  // namespace tpu::lowering
