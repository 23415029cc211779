// segment_reduce and _segment_reduce_backward: reductions over consecutive segments of `data`
// along `axis`, the segments given by runtime lengths or offsets (the output size is static: one
// value per segment). Each (segment, element) pair gets a membership flag from the segment's
// [start, end) range, so every reduction is a masked reduce over the axis.
//
// The CPU kernel's conventions: an empty segment gives `initial`, else -inf (max), +inf (min), 0
// (sum), 1 (prod), NaN (mean); NaN wins max/min; mean is (initial + sum) / length. Backward: max/min
// send the gradient to every element equal to the result (or NaN) and divide positive gradients by
// their count; prod uses output / x, or the product of the others where x is 0 or NaN.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

enum class Reduction { Max, Mean, Min, Sum, Prod };

Reduction reduction_of(const std::string& name) {
  if (name == "max" || name == "amax") return Reduction::Max;
  if (name == "mean") return Reduction::Mean;
  if (name == "min" || name == "amin") return Reduction::Min;
  if (name == "sum") return Reduction::Sum;
  if (name == "prod") return Reduction::Prod;
  throw InvalidCall("reduce argument must be either sum, prod, mean, amax or amin, got " + name);
}

int64_t product(const std::vector<int64_t>& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

// The problem in the shape (O, S, D, I): O outer rows, S segments, D positions along the axis,
// I inner elements; `member` says which positions belong to which segment.
struct Segments {
  int64_t O, S, D, I;
  Value member;  // pred (O, S, D, I)
  Value length;  // opmath (O, S, I): the segment's length
};

Segments segments(Context& c, Value data, size_t lengths_arg, size_t offsets_arg, int64_t axis, bool check,
                  DType t) {
  Builder& b = c.b;
  const auto& s = data.shape();
  Segments g;
  bool offsets = !c.has(lengths_arg);
  Value bounds = c.tensor(offsets ? offsets_arg : lengths_arg);
  if (bounds.rank() > data.rank()) throw InvalidCall("segment_reduce(): lengths/offsets have more dims than data");
  if (axis != bounds.rank() - 1) {
    throw InvalidCall(std::string("segment_reduce(): Expected axis to be the last dimension of ") +
                      (offsets ? "offsets" : "lengths") + " but got " + std::to_string(axis) + ".");
  }
  for (int64_t d = 0; d < axis; ++d) {
    if (bounds.shape()[d] != s[d]) throw NotLowerable("segment_reduce: lengths/offsets outer dims differ from data's");
  }
  g.O = product(s, 0, axis);
  g.D = s[axis];
  g.I = product(s, axis + 1, s.size());
  g.S = bounds.shape()[axis] - (offsets ? 1 : 0);
  Value bnd = reshape(b, convert(b, bounds, DType::S64), {g.O, bounds.shape()[axis]});
  Value start, end;
  if (offsets) {
    start = slice(b, bnd, {0, 0}, {g.O, g.S}, {1, 1});
    end = slice(b, bnd, {0, 1}, {g.O, g.S + 1}, {1, 1});
  } else {
    // end[s] = sum of lengths[t <= s]
    Type sst(DType::S64, {g.O, g.S, g.S});
    Value upto = compare(b, iota(b, sst, 2), iota(b, sst, 1), "LE");
    Value lens = broadcast_in_dim(b, bnd, sst.shape, {0, 2});
    end = reduce(b, select(b, upto, lens, zeros(b, lens.type)), {2}, "add");
    start = sub(b, end, bnd);
    if (check && bnd.type.numel() > 0) {
      b.assert_false(reduce(b, compare(b, bnd, zeros(b, bnd.type), "LT"), {0, 1}, "or"),
                     "lengths contains negative value!", CheckKind::RuntimeError);
      Value total = reduce(b, bnd, {1}, "add");
      b.assert_false(reduce(b, compare(b, total, constant(b, static_cast<double>(g.D), DType::S64, {g.O}), "NE"), {0}, "or"),
                     "segment_reduce(): Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) "
                     "when !unsafe.",
                     CheckKind::RuntimeError);
    }
  }
  std::vector<int64_t> shape4{g.O, g.S, g.D, g.I};
  Value pos = iota(b, Type(DType::S64, shape4), 2);
  Value st = broadcast_in_dim(b, start, shape4, {0, 1}), en = broadcast_in_dim(b, end, shape4, {0, 1});
  g.member = binary(b, "stablehlo.and", compare(b, pos, st, "GE"), compare(b, pos, en, "LT"));
  g.length = convert(b, broadcast_in_dim(b, sub(b, end, start), {g.O, g.S, g.I}, {0, 1}), t);
  return g;
}

// data (shape s) as (O, S, D, I), broadcast over the segments.
Value spread(Builder& b, Value x, const Segments& g) {
  return broadcast_in_dim(b, reshape(b, x, {g.O, g.D, g.I}), {g.O, g.S, g.D, g.I}, {0, 2, 3});
}

Value per_segment(Builder& b, Value x, const Segments& g) {  // (O, S, I) -> (O, S, D, I)
  return broadcast_in_dim(b, x, {g.O, g.S, g.D, g.I}, {0, 1, 3});
}

Value nan_of(Builder& b, const Value& like) {
  return constant(b, std::numeric_limits<double>::quiet_NaN(), like.dtype(), like.shape());
}

Value is_nan(Builder& b, Value x) { return compare(b, x, x, "NE"); }

void check_data(Value data) {
  require_dtype(is_float(data.dtype()), "_segment_reduce_cpu", data.dtype());
}

// segment_reduce(data, reduce, *, lengths?, indices?, offsets?, axis, unsafe, initial?)
std::vector<Value> segment_reduce(Context& c) {
  Builder& b = c.b;
  Value data = c.tensor(0);
  int64_t axis = wrap_dim(c.int_arg(5), data.rank());
  if (c.has(3)) throw InvalidCall("segment_reduce(): indices based reduction is not supported yet.");
  if (!c.has(2) && !c.has(4)) throw InvalidCall("segment_reduce(): Either lengths or offsets must be defined.");
  Reduction r = reduction_of(c.arg(1).s);
  check_data(data);
  DType out = c.out().dtype, t = opmath(out);
  Segments g = segments(c, data, 2, 4, axis, !c.bool_arg(6) && !c.has(4), t);
  if (c.out().numel() == 0) return {zeros(b, c.out())};
  Value x = spread(b, convert(b, data, t), g);
  bool has_init = c.has(7);
  Value init = has_init ? broadcast_in_dim(b, convert(b, c.tensor(7), t), {g.O, g.S, g.I}, {}) : Value{};
  auto masked = [&](double fill) { return select(b, g.member, x, constant(b, fill, t, x.shape())); };
  Value any_nan = reduce(b, binary(b, "stablehlo.and", g.member, is_nan(b, x)), {2}, "or");
  Value res;
  const double inf = std::numeric_limits<double>::infinity();
  switch (r) {
    case Reduction::Max:
    case Reduction::Min: {
      bool is_max = r == Reduction::Max;
      res = reduce(b, masked(is_max ? -inf : inf), {2}, is_max ? "max" : "min");
      if (has_init) res = binary(b, is_max ? "stablehlo.maximum" : "stablehlo.minimum", res, init);
      res = select(b, any_nan, nan_of(b, res), res);
      break;
    }
    case Reduction::Sum:
    case Reduction::Mean:
      res = reduce(b, masked(0), {2}, "add");
      if (has_init) res = add(b, res, init);
      if (r == Reduction::Mean) {
        Value empty = compare(b, g.length, zeros(b, g.length.type), "EQ");
        res = select(b, empty, has_init ? init : nan_of(b, res), div(b, res, g.length));
      }
      break;
    case Reduction::Prod:
      res = reduce(b, masked(1), {2}, "mul");
      if (has_init) res = mul(b, res, init);
      break;
  }
  return {convert(b, reshape(b, res, c.out().shape), out)};
}

// _segment_reduce_backward(grad, output, data, reduce, *, lengths?, offsets?, axis, initial?)
std::vector<Value> segment_reduce_backward(Context& c) {
  Builder& b = c.b;
  Value data = c.tensor(2);
  int64_t axis = wrap_dim(c.int_arg(6), data.rank());
  if (!c.has(4) && !c.has(5)) throw InvalidCall("segment_reduce(): Either lengths or offsets must be defined.");
  Reduction r = reduction_of(c.arg(3).s);
  check_data(data);
  DType out = c.out().dtype, t = opmath(out);
  Segments g = segments(c, data, 4, 5, axis, false, t);
  if (c.out().numel() == 0) return {zeros(b, c.out())};
  Value x = spread(b, convert(b, data, t), g);
  Value grad = per_segment(b, reshape(b, convert(b, c.tensor(0), t), {g.O, g.S, g.I}), g);
  Value result = per_segment(b, reshape(b, convert(b, c.tensor(1), t), {g.O, g.S, g.I}), g);
  Value zero = zeros(b, x.type), one = scalar_like(b, 1, x);
  Value gx;
  switch (r) {
    case Reduction::Max:
    case Reduction::Min: {
      Value hit = binary(b, "stablehlo.and", g.member,
                         binary(b, "stablehlo.or", is_nan(b, x), compare(b, x, result, "EQ")));
      Value count = per_segment(b, reduce(b, select(b, hit, one, zero), {2}, "add"), g);
      gx = select(b, hit, grad, zero);
      Value shared = binary(b, "stablehlo.and", compare(b, count, scalar_like(b, 2, count), "GE"),
                            compare(b, gx, zero, "GT"));
      gx = select(b, shared, div(b, gx, count), gx);
      break;
    }
    case Reduction::Sum:
      gx = select(b, g.member, grad, zero);
      break;
    case Reduction::Mean:
      gx = select(b, g.member, div(b, grad, per_segment(b, g.length, g)), zero);
      break;
    case Reduction::Prod: {
      // The product of the other members for x = 0 or NaN: the nonzero finite-or-inf product,
      // times 0 if another member is 0, times NaN if another is NaN (IEEE makes inf * 0 NaN too).
      Value special = binary(b, "stablehlo.or", is_nan(b, x), compare(b, x, zero, "EQ"));
      Value ordinary = select(b, binary(b, "stablehlo.and", g.member, unary(b, "stablehlo.not", special)), x, one);
      Value rest = per_segment(b, reduce(b, ordinary, {2}, "mul"), g);
      auto count_of = [&](Value flag) {
        return per_segment(b, reduce(b, select(b, binary(b, "stablehlo.and", g.member, flag), one, zero), {2}, "add"), g);
      };
      Value zeros_n = count_of(compare(b, x, zero, "EQ")), nans_n = count_of(is_nan(b, x));
      Value self_zero = select(b, compare(b, x, zero, "EQ"), one, zero), self_nan = select(b, is_nan(b, x), one, zero);
      Value other_zero = compare(b, sub(b, zeros_n, self_zero), zero, "GT");
      Value other_nan = compare(b, sub(b, nans_n, self_nan), zero, "GT");
      Value others = mul(b, rest, select(b, other_zero, zero, one));
      others = select(b, other_nan, nan_of(b, others), others);
      if (c.has(7)) others = mul(b, others, broadcast_in_dim(b, convert(b, c.tensor(7), t), x.shape(), {}));
      Value by_division = div(b, mul(b, grad, result), x);
      gx = select(b, g.member, select(b, special, mul(b, grad, others), by_division), zero);
      break;
    }
  }
  // Each position belongs to at most one segment: summing over the segments places it.
  Value r3 = reduce(b, gx, {1}, "add");
  return {convert(b, reshape(b, r3, c.out().shape), out)};
}

const Registrar registrar({
    {"segment_reduce", segment_reduce},
    {"_segment_reduce_backward", segment_reduce_backward},
});

}  // namespace
}  // namespace tpu::lowering
