// Sorting and selection: sort, topk, and nonzero_static (the device half of nonzero).
#include <numeric>

#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// Stable sort of `x` along `dim` with its int64 positions; bool sorts as uint8.
std::pair<Value, Value> sort_with_indices(Builder& b, Value x, int64_t dim, bool descending) {
  bool is_bool = x.dtype() == DType::Pred;
  Value keys = is_bool ? convert(b, x, DType::U8) : x;
  Value positions = iota(b, Type(DType::S64, x.shape()), dim);
  std::vector<Value> sorted = sort(b, {keys, positions}, dim, descending, /*stable=*/true);
  return {is_bool ? convert(b, sorted[0], DType::Pred) : sorted[0], sorted[1]};
}

// sort.stable(self, *, stable, dim, descending) and sort(self, dim, descending).
Rule sort_rule(size_t dim_arg, size_t descending_arg) {
  return [dim_arg, descending_arg](Context& c) {
    Value x = c.tensor(0);
    if (x.rank() == 0) return std::vector<Value>{x, constant(c.b, 0, DType::S64)};
    int64_t dim = wrap_dim(c.has(dim_arg) ? c.int_arg(dim_arg) : -1, x.rank());
    bool descending = c.has(descending_arg) && c.bool_arg(descending_arg);
    auto [values, indices] = sort_with_indices(c.b, x, dim, descending);
    return std::vector<Value>{values, indices};
  };
}

// topk(self, k, dim, largest, sorted): the first k of a full sort along dim.
std::vector<Value> topk(Context& c) {
  Value x = c.tensor(0);
  int64_t k = c.int_arg(1);
  if (x.rank() == 0) {
    if (k > 1) throw std::out_of_range("topk: k (" + std::to_string(k) + ") is too big for a 0-d tensor");
    return {x, constant(c.b, 0, DType::S64)};
  }
  int64_t dim = wrap_dim(c.has(2) ? c.int_arg(2) : -1, x.rank());
  if (k < 0 || k > x.shape()[dim]) {
    throw std::out_of_range("topk: selected index k (" + std::to_string(k) +
                            ") out of range for dimension of size " + std::to_string(x.shape()[dim]));
  }
  bool largest = !c.has(3) || c.bool_arg(3);
  auto [values, indices] = sort_with_indices(c.b, x, dim, largest);
  std::vector<int64_t> start(x.rank(), 0), limit = x.shape(), strides(x.rank(), 1);
  limit[dim] = k;
  return {slice(c.b, values, start, limit, strides), slice(c.b, indices, start, limit, strides)};
}

// nonzero_static(self, *, size, fill_value): coordinates [size, rank] of the first `size`
// non-zero elements in row-major order, padded with fill_value.
std::vector<Value> nonzero_static(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  int64_t size = c.int_arg(1);
  int64_t fill = c.has(2) ? c.int_arg(2) : -1;
  int64_t rank = x.rank();
  int64_t n = x.type.numel();
  const Type& out = c.out();
  if (n == 0 || size == 0) return {constant(b, static_cast<double>(fill), DType::S64, out.shape)};
  Value flat = reshape(b, x, {n});
  Value nonzero = compare(b, flat, zeros(b, flat.type), Direction::NE);
  Value position = iota(b, Type(DType::S64, {n}), 0);
  // Non-zeros keep their position as key, zeros sort after every non-zero.
  Value key = select(b, nonzero, position, add(b, position, constant(b, static_cast<double>(n), DType::S64, {n})));
  Value sorted = sort(b, {key}, 0, /*descending=*/false, /*stable=*/true)[0];
  int64_t take = std::min(size, n);
  sorted = slice(b, sorted, {0}, {take}, {1});
  if (size > n) sorted = pad(b, sorted, constant(b, static_cast<double>(2 * n), DType::S64), {0}, {size - n}, {0});
  Value valid = compare(b, sorted, constant(b, static_cast<double>(n), DType::S64, {size}), Direction::LT);
  std::vector<Value> columns;
  int64_t stride = 1;
  std::vector<Value> reversed;
  for (int64_t d = rank - 1; d >= 0; --d) {
    Value q = div(b, sorted, constant(b, static_cast<double>(stride), DType::S64, {size}));
    Value coord = binary(b, Binary::Remainder, q, constant(b, static_cast<double>(x.shape()[d]), DType::S64, {size}));
    reversed.push_back(reshape(b, coord, {size, 1}));
    stride *= x.shape()[d];
  }
  if (rank == 0) return {constant(b, static_cast<double>(fill), DType::S64, out.shape)};
  for (auto it = reversed.rbegin(); it != reversed.rend(); ++it) columns.push_back(*it);
  Value coords = concatenate(b, columns, 1);
  Value valid2 = broadcast_in_dim(b, valid, {size, rank}, {0});
  return {select(b, valid2, coords, constant(b, static_cast<double>(fill), DType::S64, {size, rank}))};
}

const Registrar registrar({
    {"sort.stable", sort_rule(2, 3)},
    {"sort", sort_rule(1, 2)},
    {"sort.values_stable", sort_rule(2, 3)},
    {"topk", topk},
    {"topk.values", topk},
    {"nonzero_static", nonzero_static},
});

}  // namespace
}  // namespace tpu::lowering
