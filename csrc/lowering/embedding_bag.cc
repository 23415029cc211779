// embedding_bag: _embedding_bag / _embedding_bag_forward_only (sum, mean, max; offsets,
// include_last_offset, per_sample_weights, padding_idx), _embedding_bag_dense_backward and
// _embedding_bag_per_sample_weights_backward.
//
// Bags are found per index position with a binary search over the offsets (position i belongs
// to the last bag whose offset is <= i), then rows are gathered and combined with scatters
// into [num_bags, dim]. The auxiliary results follow the shapes PyTorch's meta kernel gives a
// non-CPU device (as on CUDA): offset2bag [N], bag_size [offsets.size(0)] (entries that are not
// padding, per bag), max_indices [num_bags, dim] in max mode (the winning weight row; 0 for
// an empty bag) else [0].
//
// CPU semantics kept: max mode takes a bag's first entry, then replaces it only by strictly
// greater values (so a NaN first entry wins, later NaNs are skipped); with include_last_offset,
// sum/mean add entries only up to offsets[-1] but count all of the last bag's entries in its
// size. Indices outside [0, num_weights) are asserted on the device (IndexError at the next
// sync; the CPU raises RuntimeError at the op), as are offsets that do not start at 0.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

enum { kSum = 0, kMean = 1, kMax = 2 };

Value gather_1d(Builder& b, Value v, Value idx) {  // v[n], idx[k] -> [k]
  int64_t k = idx.type.numel();
  GatherDims d;
  d.collapsed_slice_dims = {0};
  d.start_index_map = {0};
  d.index_vector_dim = 1;
  return gather(b, v, reshape(b, idx, {k, 1}), d, {1}, {k});
}

Value gather_rows(Builder& b, Value w, Value idx) {  // w[n, D], idx[k] -> [k, D]
  int64_t k = idx.type.numel(), D = w.shape()[1];
  GatherDims d;
  d.offset_dims = {1};
  d.collapsed_slice_dims = {0};
  d.start_index_map = {0};
  d.index_vector_dim = 1;
  return gather(b, w, reshape(b, idx, {k, 1}), d, {1, D}, {k, D});
}

// base[idx[i], :] (combine)= upd[i, :]
Value scatter_rows(Builder& b, Value base, Value idx, Value upd, const std::string& combine) {
  int64_t k = idx.type.numel();
  ScatterDims d;
  d.update_window_dims = {1};
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  return scatter(b, base, reshape(b, idx, {k, 1}), upd, d, combine);
}

Value scatter_1d(Builder& b, Value base, Value idx, Value upd, const std::string& combine) {
  int64_t k = idx.type.numel();
  ScatterDims d;
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  return scatter(b, base, reshape(b, idx, {k, 1}), upd, d, combine);
}

// Bag of every position 0..N-1: (number of offs entries <= i) - 1, by a binary search (offs is
// non-decreasing).
Value bag_of_positions(Builder& b, Value offs, int64_t N) {
  int64_t B = offs.type.numel();
  std::vector<int64_t> s{N};
  Value pos = iota(b, Type(DType::S64, s), 0);
  Value start = constant(b, 0, DType::S64, s), end = constant(b, static_cast<double>(B), DType::S64, s);
  Value one = constant(b, 1, DType::S64, s), two = constant(b, 2, DType::S64, s);
  Value last = constant(b, static_cast<double>(B - 1), DType::S64, s);
  int steps = 0;
  for (int64_t m = B; m > 0; m >>= 1) ++steps;
  for (int i = 0; i < steps; ++i) {
    Value mid = add(b, start, div(b, sub(b, end, start), two));
    Value active = compare(b, start, end, Direction::LT);
    Value v = gather_1d(b, offs, min(b, mid, last));
    Value right = binary(b, Binary::And, active, compare(b, v, pos, Direction::LE));
    Value left = binary(b, Binary::And, active, unary(b, Unary::Not, compare(b, v, pos, Direction::LE)));
    start = select(b, right, add(b, mid, one), start);
    end = select(b, left, mid, end);
  }
  return sub(b, start, one);
}

Value any_true(Builder& b, Value p) {
  std::vector<int64_t> all;
  for (int64_t i = 0; i < p.rank(); ++i) all.push_back(i);
  return reduce(b, p, all, "or");
}

// (weight 0, indices 1, offsets 2, scale_grad_by_freq 3, mode 4, sparse 5, per_sample_weights? 6,
//  include_last_offset 7, padding_idx 8) -> (output, offset2bag, bag_size, max_indices)
std::vector<Value> embedding_bag(Context& c) {
  Builder& b = c.b;
  Value w = c.tensor(0);
  if (w.rank() != 2) throw std::runtime_error("embedding_bag: weight has to be a 2D Tensor");
  Value indices = c.tensor(1), offsets = c.tensor(2);
  if (indices.rank() != 1) throw std::runtime_error("embedding_bag: input has to be a 1D or 2D Tensor");
  if (offsets.rank() != 1) throw std::runtime_error("embedding_bag: offsets has to be a 1D Tensor");
  int64_t mode = c.int_arg(4);
  bool include_last = c.bool_arg(7);
  int64_t num_weights = w.shape()[0], D = w.shape()[1];
  int64_t padding_idx = c.has(8) ? c.int_arg(8) : -1;
  int64_t N = indices.type.numel(), O = offsets.type.numel();
  int64_t B = include_last ? O - 1 : O;
  if (mode != kSum && mode != kMean && mode != kMax) throw std::runtime_error("embedding_bag: unknown mode");
  if (c.has(6) && mode != kSum) {
    throw std::runtime_error("embedding_bag: per_sample_weights only supported with mode='sum'");
  }
  const Type& out_t = c.out(0);
  DType acc = opmath(out_t.dtype);
  Value idx = convert(b, indices, DType::S64);
  Value offs_all = convert(b, offsets, DType::S64);
  if (N > 0) {
    Value bad = binary(b, Binary::Or, compare(b, idx, constant(b, 0, DType::S64, {N}), Direction::LT),
                       compare(b, idx, constant(b, static_cast<double>(num_weights), DType::S64, {N}), Direction::GE));
    b.assert_false(any_true(b, bad), "embedding_bag: an index is not in the valid range [0, " +
                                         std::to_string(num_weights) + ")");
  }
  if (O > 0) {
    Value first = reshape(b, slice(b, offs_all, {0}, {1}, {1}), {});
    b.assert_false(compare(b, first, constant(b, 0, DType::S64), Direction::NE),
                   "embedding_bag: offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                   "position 0");
    Value lastoff = reshape(b, slice(b, offs_all, {O - 1}, {O}, {1}), {});
    b.assert_false(compare(b, lastoff, constant(b, static_cast<double>(N), DType::S64), Direction::GT),
                   "embedding_bag: offsets[-1] can not be greater than input's length " + std::to_string(N));
  }
  auto aux = [&](size_t i, Value v) {  // fitted to the meta kernel's shape (or empty)
    const Type& t = c.out(i);
    if (t.numel() == 0) return zeros(b, t);
    return reshape(b, convert(b, v, t.dtype), t.shape);
  };
  if (B <= 0 || N == 0 || D == 0) {
    return {zeros(b, out_t), zeros(b, c.out(1)), zeros(b, c.out(2)), zeros(b, c.out(3))};
  }
  Value offs = slice(b, offs_all, {0}, {B}, {1});
  Value bag = bag_of_positions(b, offs, N);  // [N], in [0, B)
  bag = clamp(b, constant(b, 0, DType::S64, {N}), bag, constant(b, static_cast<double>(B - 1), DType::S64, {N}));
  Value safe_idx = clamp(b, constant(b, 0, DType::S64, {N}), idx, constant(b, static_cast<double>(num_weights - 1), DType::S64, {N}));
  Value not_pad = compare(b, idx, constant(b, static_cast<double>(padding_idx), DType::S64, {N}), Direction::NE);
  if (padding_idx < 0) not_pad = constant(b, 1, DType::Pred, {N});
  Value counts = scatter_1d(b, constant(b, 0, DType::S64, {B}), bag, convert(b, not_pad, DType::S64), "add");
  Value rows = convert(b, gather_rows(b, w, safe_idx), acc);  // [N, D]
  Value output, max_idx;
  if (mode == kSum || mode == kMean) {
    Value keep = not_pad;
    if (include_last) {  // entries past offsets[-1] are not added (PyTorch's CPU kernel)
      Value end = broadcast_in_dim(b, reshape(b, slice(b, offs_all, {O - 1}, {O}, {1}), {}), {N}, {});
      keep = binary(b, Binary::And, keep, compare(b, iota(b, Type(DType::S64, {N}), 0), end, Direction::LT));
    }
    if (c.has(6)) rows = mul(b, rows, broadcast_in_dim(b, convert(b, c.tensor(6), acc), {N, D}, {0}));
    rows = select(b, broadcast_in_dim(b, keep, {N, D}, {0}), rows, zeros(b, rows.type));
    output = scatter_rows(b, zeros(b, Type(acc, {B, D})), bag, rows, "add");
    if (mode == kMean) {
      Value n = broadcast_in_dim(b, convert(b, max(b, counts, constant(b, 1, DType::S64, {B})), acc), {B, D}, {0});
      output = div(b, output, n);
    }
  } else {
    // First non-padding position of each bag.
    Value pos = iota(b, Type(DType::S64, {N}), 0);
    Value big = constant(b, static_cast<double>(N), DType::S64, {N});
    Value first = scatter_1d(b, constant(b, static_cast<double>(N), DType::S64, {B}), bag, select(b, not_pad, pos, big), "min");
    Value first_pos = clamp(b, constant(b, 0, DType::S64, {B}), first, constant(b, static_cast<double>(N - 1), DType::S64, {B}));
    Value first_val = gather_rows(b, rows, first_pos);  // [B, D]
    Value first_row = gather_1d(b, safe_idx, first_pos);  // [B]
    // The maximum over the bag's non-NaN entries (the first entry included).
    Value ninf = constant(b, -std::numeric_limits<double>::infinity(), acc, {N, D});
    Value usable = binary(b, Binary::And, broadcast_in_dim(b, not_pad, {N, D}, {0}), compare(b, rows, rows, Direction::EQ));
    Value cand = select(b, usable, rows, ninf);
    Value best = scatter_rows(b, constant(b, -std::numeric_limits<double>::infinity(), acc, {B, D}), bag, cand, "max");
    // Its first position in the bag.
    Value best_at = gather_rows(b, best, bag);  // [N, D]
    Value hit = binary(b, Binary::And, usable, compare(b, rows, best_at, Direction::EQ));
    Value posd = broadcast_in_dim(b, pos, {N, D}, {0});
    Value where = scatter_rows(b, constant(b, static_cast<double>(N), DType::S64, {B, D}), bag,
                               select(b, hit, posd, constant(b, static_cast<double>(N), DType::S64, {N, D})), "min");
    where = clamp(b, constant(b, 0, DType::S64, {B, D}), where, constant(b, static_cast<double>(N - 1), DType::S64, {B, D}));
    Value best_row = reshape(b, gather_1d(b, safe_idx, reshape(b, where, {B * D})), {B, D});
    // A NaN first entry stays; an empty bag gives 0.
    Value first_nan = compare(b, first_val, first_val, Direction::NE);
    Value first_row_d = broadcast_in_dim(b, first_row, {B, D}, {0});
    output = select(b, first_nan, first_val, best);
    max_idx = select(b, first_nan, first_row_d, best_row);
    Value empty = broadcast_in_dim(b, compare(b, counts, constant(b, 0, DType::S64, {B}), Direction::EQ), {B, D}, {0});
    output = select(b, empty, zeros(b, output.type), output);
    max_idx = select(b, empty, zeros(b, max_idx.type), max_idx);
  }
  Value bag_size = counts;
  if (c.out(2).numel() == B + 1) bag_size = concatenate(b, {counts, constant(b, 0, DType::S64, {1})}, 0);
  Value maxes = mode == kMax ? max_idx : (mode == kMean ? bag_size : constant(b, 0, DType::S64, {c.out(3).numel()}));
  return {convert(b, output, out_t.dtype), aux(1, bag), aux(2, bag_size), aux(3, maxes)};
}

// _embedding_bag_dense_backward(grad 0, indices 1, offset2bag 2, bag_size 3, maximum_indices 4,
// num_weights 5, scale_grad_by_freq 6, mode 7, per_sample_weights? 8, padding_idx 9);
// _embedding_bag_backward has `offsets` after indices and `sparse` after mode (shift = 1).
std::vector<Value> dense_backward(Context& c, size_t shift) {
  Builder& b = c.b;
  const Type& out = c.out();
  DType acc = opmath(out.dtype);
  auto at = [&](size_t i) { return i < 2 ? i : (i + shift + (i >= 8 ? shift : 0)); };
  if (c.bool_arg(at(6))) throw NotLowerable("embedding_bag backward with scale_grad_by_freq");
  if (shift && c.bool_arg(9)) throw NotLowerable("sparse embedding_bag backward");
  Value g = convert(b, c.tensor(0), acc);  // [B, D]
  // The CPU kernel indexes these without checks; malformed ones are an error here.
  if (g.rank() != 2) throw InvalidCall("embedding_bag backward: grad must be 2-D, got " + g.type.str());
  int64_t B = g.shape()[0], D = g.shape()[1];
  Value bag_size = c.tensor(at(3));
  if (bag_size.rank() != 1 || bag_size.shape()[0] < B) {
    throw InvalidCall("embedding_bag backward: bag_size must be 1-D with at least " + std::to_string(B) +
                      " elements (one per bag), got " + bag_size.type.str());
  }
  int64_t num_weights = c.int_arg(at(5)), mode = c.int_arg(at(7));
  int64_t padding_idx = c.has(at(9)) ? c.int_arg(at(9)) : -1;
  Value idx = convert(b, c.tensor(1), DType::S64);
  int64_t N = idx.type.numel();
  Value grad_w = zeros(b, Type(acc, {num_weights, D}));
  if (N == 0 || B == 0 || D == 0) return {convert(b, grad_w, out.dtype)};
  Value sizes = slice(b, convert(b, bag_size, DType::S64), {0}, {B}, {1});
  if (mode == kMax) {
    Value mi = convert(b, c.tensor(at(4)), DType::S64);  // [B, D]
    Value live = broadcast_in_dim(b, compare(b, sizes, constant(b, 0, DType::S64, {B}), Direction::GT), {B, D}, {0});
    Value col = iota(b, Type(DType::S64, {B, D}), 1);
    Value coords = concatenate(b, {reshape(b, mi, {B, D, 1}), reshape(b, col, {B, D, 1})}, 2);
    ScatterDims d;
    d.inserted_window_dims = {0, 1};
    d.scatter_dims_to_operand_dims = {0, 1};
    d.index_vector_dim = 2;
    Value upd = select(b, live, g, zeros(b, g.type));
    return {convert(b, scatter(b, grad_w, coords, upd, d, "add"), out.dtype)};
  }
  Value bag = convert(b, c.tensor(at(2)), DType::S64);
  if (bag.type.numel() != N) throw NotLowerable("embedding_bag backward without offset2bag");
  Value rows = gather_rows(b, g, bag);  // [N, D]
  if (mode == kMean) {
    Value n = convert(b, max(b, gather_1d(b, sizes, bag), constant(b, 1, DType::S64, {N})), acc);
    rows = div(b, rows, broadcast_in_dim(b, n, {N, D}, {0}));
  }
  if (c.has(at(8))) rows = mul(b, rows, broadcast_in_dim(b, convert(b, c.tensor(at(8)), acc), {N, D}, {0}));
  if (padding_idx >= 0) {
    Value keep = compare(b, idx, constant(b, static_cast<double>(padding_idx), DType::S64, {N}), Direction::NE);
    rows = select(b, broadcast_in_dim(b, keep, {N, D}, {0}), rows, zeros(b, rows.type));
  }
  return {convert(b, scatter_rows(b, grad_w, idx, rows, "add"), out.dtype)};
}

// _embedding_bag_per_sample_weights_backward(grad 0, weight 1, indices 2, offsets 3,
// offset2bag 4, mode 5, padding_idx 6): d/d psw[i] = <grad[bag(i)], weight[indices[i]]>.
std::vector<Value> per_sample_weights_backward(Context& c) {
  Builder& b = c.b;
  const Type& out = c.out();
  DType acc = opmath(out.dtype);
  if (c.int_arg(5) != kSum) {
    throw std::runtime_error("embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  }
  Value g = convert(b, c.tensor(0), acc), w = convert(b, c.tensor(1), acc);
  Value idx = convert(b, c.tensor(2), DType::S64);
  int64_t N = idx.type.numel();
  if (N == 0) return {zeros(b, out)};
  Value bag = convert(b, c.tensor(4), DType::S64);
  if (bag.type.numel() != N) throw NotLowerable("per_sample_weights backward without offset2bag");
  int64_t num_weights = w.shape()[0];
  Value safe = clamp(b, constant(b, 0, DType::S64, {N}), idx, constant(b, static_cast<double>(num_weights - 1), DType::S64, {N}));
  Value r = reduce(b, mul(b, gather_rows(b, g, bag), gather_rows(b, w, safe)), {1}, "add");
  int64_t padding_idx = c.has(6) ? c.int_arg(6) : -1;
  if (padding_idx >= 0) {
    Value keep = compare(b, idx, constant(b, static_cast<double>(padding_idx), DType::S64, {N}), Direction::NE);
    r = select(b, keep, r, zeros(b, r.type));
  }
  return {convert(b, r, out.dtype)};
}

const Registrar registrar({
    {"_embedding_bag", embedding_bag},
    {"_embedding_bag_forward_only", embedding_bag},
    {"_embedding_bag_dense_backward", [](Context& c) { return dense_backward(c, 0); }},
    {"_embedding_bag_backward", [](Context& c) { return dense_backward(c, 1); }},
    {"_embedding_bag_per_sample_weights_backward", per_sample_weights_backward},
});

}  // namespace
}  // namespace tpu::lowering
