// segment_reduce and _segment_reduce_backward: reductions over consecutive segments of `data`
// along `axis`, the segments given by runtime lengths or offsets (the output size is static: one
// value per segment). Each position finds its segment (a prefix count of segment ends), values are
// scattered into their segments (add/mul/max/min) and gradients gathered back: the cost is linear
// in the data, not segments x positions.
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

// Inclusive prefix sum along dim 1 of an (O, N) S64 tensor in log2(N) doubling steps.
Value prefix_sum(Builder& b, Value x) {
  int64_t O = x.shape()[0], n = x.shape()[1];
  for (int64_t k = 1; k < n; k *= 2) {
    Value earlier = pad(b, slice(b, x, {0, 0}, {O, n - k}, {1, 1}), constant(b, 0, DType::S64), {0, k}, {0, 0}, {0, 0});
    x = add(b, x, earlier);
  }
  return x;
}

// The problem in the shape (O, D, I) -> (O, S, I): O outer rows, D positions along the axis, I
// inner elements, S segments. Each position gets its segment's coordinates (o, segment), with
// segment S (out of range: scatters drop it) for positions outside every segment.
struct Segments {
  int64_t O, S, D, I;
  Value where;   // S64 (O, D, 2)
  Value member;  // pred (O, D, I)
  Value length;  // opmath (O, S, I)
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
  if (g.S < 0) throw NotLowerable("segment_reduce: empty offsets");
  Value bnd = reshape(b, convert(b, bounds, DType::S64), {g.O, bounds.shape()[axis]});
  Value start, end;
  if (offsets) {
    start = slice(b, bnd, {0, 0}, {g.O, g.S}, {1, 1});
    end = slice(b, bnd, {0, 1}, {g.O, g.S + 1}, {1, 1});
  } else {
    end = prefix_sum(b, bnd);
    start = sub(b, end, bnd);
    if (check && bnd.type.numel() > 0) {
      b.assert_false(reduce(b, compare(b, bnd, zeros(b, bnd.type), Direction::LT), {0, 1}, "or"),
                     "lengths contains negative value!", CheckKind::RuntimeError);
      Value total = reduce(b, bnd, {1}, "add");
      b.assert_false(reduce(b, compare(b, total, constant(b, static_cast<double>(g.D), DType::S64, {g.O}), Direction::NE), {0}, "or"),
                     "segment_reduce(): Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) "
                     "when !unsafe.",
                     CheckKind::RuntimeError);
    }
  }
  g.length = convert(b, broadcast_in_dim(b, sub(b, end, start), {g.O, g.S, g.I}, {0, 1}), t);
  std::vector<int64_t> od{g.O, g.D};
  Value pos = iota(b, Type(DType::S64, od), 1);
  Value inside = constant(b, 0, DType::Pred, od);
  Value segment = constant(b, static_cast<double>(g.S), DType::S64, od);
  if (g.S > 0 && g.O * g.D > 0) {
    // A position's segment: the number of segment ends at or before it (ends at D drop out).
    ScatterDims sd;
    sd.inserted_window_dims = {0, 1};
    sd.scatter_dims_to_operand_dims = {0, 1};
    sd.index_vector_dim = 2;
    Value rows = iota(b, Type(DType::S64, {g.O, g.S, 1}), 0);
    Value at_end = concatenate(b, {rows, reshape(b, end, {g.O, g.S, 1})}, 2);
    Value marks = scatter(b, zeros(b, Type(DType::S64, od)), at_end, constant(b, 1, DType::S64, {g.O, g.S}), sd, "add");
    Value first = broadcast_in_dim(b, reshape(b, slice(b, start, {0, 0}, {g.O, 1}, {1, 1}), {g.O}), od, {0});
    Value last = broadcast_in_dim(b, reshape(b, slice(b, end, {0, g.S - 1}, {g.O, g.S}, {1, 1}), {g.O}), od, {0});
    inside = binary(b, Binary::And, compare(b, pos, first, Direction::GE), compare(b, pos, last, Direction::LT));
    segment = select(b, inside, prefix_sum(b, marks), segment);
  }
  g.where = concatenate(b, {iota(b, Type(DType::S64, {g.O, g.D, 1}), 0), reshape(b, segment, {g.O, g.D, 1})}, 2);
  g.member = broadcast_in_dim(b, inside, {g.O, g.D, g.I}, {0, 1});
  return g;
}

// Combines (O, D, I) values into their segments of an (O, S, I) tensor starting at `init`.
Value to_segments(Builder& b, Value x, const Segments& g, const std::string& combine, double init) {
  ScatterDims sd;
  sd.update_window_dims = {2};
  sd.inserted_window_dims = {0, 1};
  sd.scatter_dims_to_operand_dims = {0, 1};
  sd.index_vector_dim = 2;
  return scatter(b, constant(b, init, x.dtype(), {g.O, g.S, g.I}), g.where, x, sd, combine);
}

// Each position's value of an (O, S, I) per-segment tensor, as (O, D, I) (0 outside segments).
Value from_segments(Builder& b, Value x, const Segments& g) {
  GatherDims gd;
  gd.offset_dims = {2};
  gd.collapsed_slice_dims = {0, 1};
  gd.start_index_map = {0, 1};
  gd.index_vector_dim = 2;
  Value v = gather(b, x, g.where, gd, {1, 1, g.I}, {g.O, g.D, g.I});
  return select(b, g.member, v, zeros(b, v.type));
}

Value nan_of(Builder& b, const Value& like) {
  return constant(b, std::numeric_limits<double>::quiet_NaN(), like.dtype(), like.shape());
}


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
  Value x = reshape(b, convert(b, data, t), {g.O, g.D, g.I});
  Value zero = zeros(b, x.type), one = scalar_like(b, 1, x);
  bool has_init = c.has(7);
  Value init = has_init ? broadcast_in_dim(b, convert(b, c.tensor(7), t), {g.O, g.S, g.I}, {}) : Value{};
  Value nan_count = to_segments(b, select(b, is_nan(b, x), one, zero), g, "add", 0);
  Value any_nan = compare(b, nan_count, zeros(b, nan_count.type), Direction::GT);
  Value res;
  const double inf = std::numeric_limits<double>::infinity();
  switch (r) {
    case Reduction::Max:
    case Reduction::Min: {
      bool is_max = r == Reduction::Max;
      res = to_segments(b, x, g, is_max ? "max" : "min", is_max ? -inf : inf);
      if (has_init) res = binary(b, is_max ? Binary::Maximum : Binary::Minimum, res, init);
      res = select(b, any_nan, nan_of(b, res), res);
      break;
    }
    case Reduction::Sum:
    case Reduction::Mean:
      res = to_segments(b, x, g, "add", 0);
      if (has_init) res = add(b, res, init);
      if (r == Reduction::Mean) {
        Value empty = compare(b, g.length, zeros(b, g.length.type), Direction::EQ);
        res = select(b, empty, has_init ? init : nan_of(b, res), div(b, res, g.length));
      }
      break;
    case Reduction::Prod:
      res = to_segments(b, x, g, "mul", 1);
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
  if (c.out().numel() == 0 || g.S == 0) return {zeros(b, c.out())};
  Value x = reshape(b, convert(b, data, t), {g.O, g.D, g.I});
  Value grad = from_segments(b, reshape(b, convert(b, c.tensor(0), t), {g.O, g.S, g.I}), g);
  Value result = from_segments(b, reshape(b, convert(b, c.tensor(1), t), {g.O, g.S, g.I}), g);
  Value zero = zeros(b, x.type), one = scalar_like(b, 1, x);
  auto count_per_segment = [&](Value flag) {  // members with `flag` in each position's segment
    return from_segments(b, to_segments(b, select(b, flag, one, zero), g, "add", 0), g);
  };
  Value gx;
  switch (r) {
    case Reduction::Max:
    case Reduction::Min: {
      Value hit = binary(b, Binary::And, g.member,
                         binary(b, Binary::Or, is_nan(b, x), compare(b, x, result, Direction::EQ)));
      Value count = count_per_segment(hit);
      gx = select(b, hit, grad, zero);
      Value shared = binary(b, Binary::And, compare(b, count, scalar_like(b, 2, count), Direction::GE),
                            compare(b, gx, zero, Direction::GT));
      gx = select(b, shared, div(b, gx, count), gx);
      break;
    }
    case Reduction::Sum:
      gx = grad;
      break;
    case Reduction::Mean:
      gx = select(b, g.member, div(b, grad, from_segments(b, g.length, g)), zero);
      break;
    case Reduction::Prod: {
      // The product of the other members for x = 0 or NaN: the product of the ordinary members,
      // times 0 if another member is 0, times NaN if another is NaN (IEEE makes inf * 0 NaN too).
      Value x_zero = compare(b, x, zero, Direction::EQ), x_nan = is_nan(b, x);
      Value special = binary(b, Binary::Or, x_nan, x_zero);
      Value rest = from_segments(b, to_segments(b, select(b, special, one, x), g, "mul", 1), g);
      Value zeros_n = count_per_segment(x_zero), nans_n = count_per_segment(x_nan);
      Value other_zero = compare(b, sub(b, zeros_n, select(b, x_zero, one, zero)), zero, Direction::GT);
      Value other_nan = compare(b, sub(b, nans_n, select(b, x_nan, one, zero)), zero, Direction::GT);
      Value others = mul(b, rest, select(b, other_zero, zero, one));
      others = select(b, other_nan, nan_of(b, others), others);
      if (c.has(7)) others = mul(b, others, broadcast_in_dim(b, convert(b, c.tensor(7), t), x.shape(), {}));
      Value by_division = div(b, mul(b, grad, result), x);
      gx = select(b, g.member, select(b, special, mul(b, grad, others), by_division), zero);
      break;
    }
  }
  return {convert(b, reshape(b, gx, c.out().shape), out)};
}

const Registrar registrar({
    {"segment_reduce", segment_reduce},
    {"_segment_reduce_backward", segment_reduce_backward},
});

}  // namespace
}  // namespace tpu::lowering
