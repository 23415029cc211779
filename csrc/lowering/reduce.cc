// Reductions: sum, mean, prod, amax/amin, max/min (with indices), argmax/argmin, var/std,
// vector norms, logsumexp, cumulative sums/products, any/all.
#include <cmath>
#include <limits>

#include "lowering/complex_math.h"
#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// Reduced dimensions of argument `i` (an int, int list or None; empty/None means all).
std::vector<int64_t> reduce_dims(const Context& c, size_t i, int64_t rank) {
  std::vector<int64_t> dims;
  if (c.has(i)) {
    const Arg& a = c.arg(i);
    if (a.kind == Arg::Kind::Int) dims = {a.i};
    else if (a.kind == Arg::Kind::IntList) dims = a.ints;
  }
  if (rank == 0) {
    for (int64_t d : dims) wrap_dim(d, 0);  // validates
    return {};
  }
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
    return dims;
  }
  std::vector<int64_t> w = wrap_dims(dims, rank);
  for (size_t k = 1; k < w.size(); ++k) {
    if (w[k] == w[k - 1]) throw std::invalid_argument("dim " + std::to_string(w[k]) + " appears multiple times in the list of dims");
  }
  return w;
}

int64_t count(const Value& x, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= x.shape()[d];
  return n;
}

// max/min reduction that propagates NaN like PyTorch (XLA's reduce may drop it).
Value extreme_reduce(Builder& b, Value x, const std::vector<int64_t>& dims, const std::string& kind) {
  Value r = reduce(b, x, dims, kind);
  if (!is_float(x.dtype()) || dims.empty()) return r;
  Value any_nan = reduce(b, compare(b, x, x, Direction::NE), dims, "or");
  return select(b, any_nan, scalar_like(b, std::nan(""), r), r);
}

// Reduction of x over dims, reshaped to the output shape (handles keepdim).
Value reduce_to(Builder& b, Value x, const std::vector<int64_t>& dims, const std::string& kind,
                const std::vector<int64_t>& out_shape) {
  if (kind == "max" || kind == "min") return reshape(b, extreme_reduce(b, x, dims, kind), out_shape);
  return reshape(b, reduce(b, x, dims, kind), out_shape);
}

// Broadcasts a reduced value (keepdim or not) back to x's shape.
Value expand_back(Builder& b, Value r, const Value& x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> kept_shape, kept_dims;
  for (int64_t i = 0; i < x.rank(); ++i) {
    bool reduced = false;
    for (int64_t d : dims) reduced |= d == i;
    if (!reduced) {
      kept_shape.push_back(x.shape()[i]);
      kept_dims.push_back(i);
    }
  }
  return broadcast_in_dim(b, reshape(b, r, kept_shape), x.shape(), kept_dims);
}

// sum / prod style: input converted to the (accumulation type of the) output dtype.
Rule accumulate_rule(const std::string& kind, size_t dim_arg) {
  return [kind, dim_arg](Context& c) {
    Value x = c.tensor(0);
    DType out = c.out().dtype;
    DType acc = opmath(out);
    std::vector<int64_t> dims = reduce_dims(c, dim_arg, x.rank());
    // The input is cast to the result dtype first (sum(x, dtype=float16) is sum(x.to(float16)),
    // as documented and as the CPU computes), then accumulated in opmath.
    Value r = reduce_to(c.b, convert(c.b, convert(c.b, x, out), acc), dims, kind, c.out().shape);
    return std::vector<Value>{convert(c.b, r, out)};
  };
}
constexpr size_t kNoDim = 1000;

std::vector<Value> mean_impl(Context& c, size_t dim_arg) {
  Value x = c.tensor(0);
  DType out = c.out().dtype;
  DType acc = opmath(out);
  std::vector<int64_t> dims = reduce_dims(c, dim_arg, x.rank());
  Value s = reduce_to(c.b, convert(c.b, convert(c.b, x, out), acc), dims, "add", c.out().shape);
  Value n = constant(c.b, static_cast<double>(count(x, dims)), acc, c.out().shape);
  return {convert(c.b, div(c.b, s, n), out)};
}

// amax / amin over dims, NaN propagating.
Rule extreme_rule(const std::string& kind, size_t dim_arg) {
  return [kind, dim_arg](Context& c) {
    Value x = c.tensor(0);
    std::vector<int64_t> dims = reduce_dims(c, dim_arg, x.rank());
    if (count(x, dims) == 0 && x.shape().size() > 0) {
      throw std::invalid_argument("Expected reduction dim to have non-zero size (zero-size reduction)");
    }
    if (c.out().numel() == 0) return std::vector<Value>{zeros(c.b, c.out())};  // nothing to reduce (the CPU checks no dtype then)
    require_dtype(!is_complex(x.dtype()), kind == "max" ? "max_values_cpu" : "min_values_cpu", x.dtype());
    return std::vector<Value>{reduce_to(c.b, x, dims, kind, c.out().shape)};
  };
}

// The value and the first index of the max/min along `dim` (x's dims), NaN winning.
std::pair<Value, Value> extreme_with_index(Builder& b, Value x, int64_t dim, const std::string& kind) {
  if (x.shape()[dim] == 0) {
    throw std::out_of_range("cannot compute " + kind + " over an empty dimension");
  }
  Value m = extreme_reduce(b, x, {dim}, kind);
  Value mb = expand_back(b, m, x, {dim});
  Value match = compare(b, x, mb, Direction::EQ);
  if (is_float(x.dtype())) {
    Value both_nan = binary(b, Binary::And, compare(b, x, x, Direction::NE), compare(b, mb, mb, Direction::NE));
    match = binary(b, Binary::Or, match, both_nan);
  }
  Value idx = iota(b, Type(DType::S64, x.shape()), dim);
  Value big = constant(b, static_cast<double>(x.shape()[dim]), DType::S64, x.shape());
  Value first = reduce(b, select(b, match, idx, big), {dim}, "min");
  return {m, first};
}

// max.dim / min.dim(self, dim, keepdim) -> (values, indices)
Rule extreme_dim_rule(const std::string& kind) {
  return [kind](Context& c) {
    Value x = c.tensor(0);
    if (x.rank() == 0) {
      wrap_dim(c.int_arg(1), 0);
      return std::vector<Value>{reshape(c.b, x, c.out(0).shape),
                                constant(c.b, 0, DType::S64, c.out(1).shape)};
    }
    int64_t dim = wrap_dim(c.int_arg(1), x.rank());
    auto [m, i] = extreme_with_index(c.b, x, dim, kind);
    return std::vector<Value>{reshape(c.b, m, c.out(0).shape), reshape(c.b, i, c.out(1).shape)};
  };
}

// argmax / argmin(self, dim?, keepdim)
Rule arg_extreme_rule(const std::string& kind) {
  return [kind](Context& c) {
    Value x = c.tensor(0);
    if (x.dtype() == DType::Pred) throw InvalidCall("arg" + kind + "(): does not support bool input");
    if (!c.has(1)) {
      if (x.type.numel() == 0) throw std::invalid_argument("Expected reduction dim to be specified for input.numel() == 0.");
      Value flat = reshape(c.b, x, {x.type.numel()});
      return std::vector<Value>{reshape(c.b, extreme_with_index(c.b, flat, 0, kind).second, c.out().shape)};
    }
    if (x.rank() == 0) {
      wrap_dim(c.int_arg(1), 0);
      return std::vector<Value>{constant(c.b, 0, DType::S64, c.out().shape)};
    }
    int64_t dim = wrap_dim(c.int_arg(1), x.rank());
    return std::vector<Value>{reshape(c.b, extreme_with_index(c.b, x, dim, kind).second, c.out().shape)};
  };
}

// max / min of all elements. Of no elements: max() raises RuntimeError as on the CPU, while the
// CPU's max(x, out=) returns the reduction's identity (-inf, the type's lowest), and so do we.
Rule full_extreme_rule(const std::string& kind, bool empty_gives_identity = false) {
  return [kind, empty_gives_identity](Context& c) {
    Value x = c.tensor(0);
    if (x.type.numel() == 0 && !empty_gives_identity) {
      throw InvalidCall(kind + "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
    }
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < x.rank(); ++d) dims.push_back(d);
    return std::vector<Value>{reduce_to(c.b, x, dims, kind, c.out().shape)};
  };
}

// Binary maximum/minimum (max.other, max.out).
Rule binary_extreme(Binary op) {
  return [op](Context& c) {
    DType t = c.out().dtype;
    Value x = cast_to(c.b, c.tensor(0), t, c.out().shape), y = cast_to(c.b, c.tensor(1), t, c.out().shape);
    return std::vector<Value>{nan_propagating(c.b, op, x, y)};  // max(a, b): NaN from either
  };
}

// var/std/mean pieces: (var, mean) over dims with correction (a runtime scalar or None -> 1).
std::pair<Value, Value> var_mean_impl(Context& c, Value x, const std::vector<int64_t>& dims, DType acc) {
  Builder& b = c.b;
  x = convert(b, x, acc);
  int64_t n = count(x, dims);
  Value sum = reduce(b, x, dims, "add");
  Value mean = div(b, sum, constant(b, static_cast<double>(n), acc, sum.shape()));
  Value d = sub(b, x, expand_back(b, mean, x, dims));
  Value ss = reduce(b, mul(b, d, d), dims, "add");
  Value corr = c.has(2) ? convert(b, c.tensor(2), acc) : constant(b, 1, acc);
  // The CPU's std::max(0, N - correction): a NaN correction gives 0 (so inf), not NaN.
  Value n_minus = sub(b, constant(b, static_cast<double>(n), acc), corr);
  Value denom = select(b, compare(b, n_minus, constant(b, 0, acc), Direction::GT), n_minus, constant(b, 0, acc));
  Value var = div(b, ss, broadcast_in_dim(b, denom, ss.shape(), {}));
  // Over no elements the CPU's variance is NaN whatever the correction (0 / (0 - correction) is
  // not: a negative correction made it 0).
  if (n == 0) var = constant(b, NAN, acc, ss.shape());
  return {var, mean};
}

// var.correction / std.correction(self, dim?, *, correction?, keepdim)
Rule var_rule(bool take_sqrt, bool with_mean) {
  return [take_sqrt, with_mean](Context& c) {
    Value x = c.tensor(0);
    if (!is_float(x.dtype()) && !is_complex(x.dtype())) {
      throw InvalidCall("std and var only support floating point and complex dtypes");
    }
    std::vector<int64_t> dims = reduce_dims(c, 1, x.rank());
    if (is_complex(x.dtype())) {  // var(z) = var(re) + var(im); the mean keeps both parts
      DType part = real_part(x.dtype());
      Type pt(part, x.shape());
      auto [var_re, mean_re] = var_mean_impl(c, real(c.b, x), dims, part);
      auto [var_im, mean_im] = var_mean_impl(c, imag(c.b, x), dims, part);
      Value var = add(c.b, var_re, var_im);
      if (take_sqrt) var = unary(c.b, Unary::Sqrt, var);
      std::vector<Value> r{reshape(c.b, var, c.out(0).shape)};
      if (with_mean) {
        Value mean = complex(c.b, mean_re, mean_im);
        r.push_back(reshape(c.b, mean, c.out(1).shape));
      }
      return r;
    }
    bool keepdim = c.has(3) && c.bool_arg(3);
    (void)keepdim;
    DType acc = opmath(c.out().dtype);
    auto [var, mean] = var_mean_impl(c, x, dims, acc);
    if (take_sqrt) var = unary(c.b, Unary::Sqrt, var);
    std::vector<Value> r{reshape(c.b, var, c.out(0).shape)};
    if (with_mean) {
      // The CPU's Welford update turns an infinite running mean into NaN at the next element
      // (inf - inf), so var_mean/std_mean report NaN, not ±inf, once n > 1.
      if (count(x, dims) > 1) {
        Value inf = compare(c.b, unary(c.b, Unary::Abs, mean), scalar_like(c.b, INFINITY, mean), Direction::EQ);
        mean = select(c.b, inf, scalar_like(c.b, NAN, mean), mean);
      }
      r.push_back(reshape(c.b, mean, c.out(1).shape));
    }
    return r;
  };
}

// linalg_vector_norm(self, ord (runtime Scalar), dim?, keepdim, *, dtype?)
std::vector<Value> vector_norm(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  DType out = c.out().dtype;
  DType acc = opmath(real_part(out));
  std::vector<int64_t> dims = reduce_dims(c, 2, x.rank());
  // |z| of a complex input (the modulus), then the real norm of the moduli.
  Value a = is_complex(x.dtype()) ? convert(b, complex_abs(b, x), acc)
                                  : unary(b, Unary::Abs, convert(b, x, acc));
  const auto& os = c.out().shape;
  Value ord = cast_to(b, c.tensor(1), acc, os);
  double inf = std::numeric_limits<double>::infinity();
  Value amax = count(x, dims) == 0 ? constant(b, 0, acc, os) : reduce_to(b, a, dims, "max", os);
  Value amin = count(x, dims) == 0 ? constant(b, inf, acc, os) : reduce_to(b, a, dims, "min", os);
  Value nonzero = reduce_to(b, convert(b, compare(b, a, zeros(b, a.type), Direction::NE), acc), dims, "add", os);
  Value l1 = reduce_to(b, a, dims, "add", os);
  Value l2 = unary(b, Unary::Sqrt, reduce_to(b, mul(b, a, a), dims, "add", os));
  Value ordb = expand_back(b, ord, a, dims);
  Value lp = reduce_to(b, binary(b, Binary::Power, a, ordb), dims, "add", os);
  lp = binary(b, Binary::Power, lp, div(b, constant(b, 1, acc, os), ord));
  // Over one element the CPU returns |x| for every ord but 0 (also NaN, and where |x|^ord overflows).
  if (count(x, dims) == 1) lp = l2 = l1;
  auto is = [&](double v) { return compare(b, ord, constant(b, v, acc, os), Direction::EQ); };
  Value r = select(b, is(2), l2, lp);
  r = select(b, is(1), l1, r);
  r = select(b, is(0), nonzero, r);
  r = select(b, is(inf), amax, r);
  r = select(b, is(-inf), amin, r);
  return {convert(b, r, out)};
}

// logsumexp(self, dim, keepdim)
std::vector<Value> logsumexp(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  if (is_complex(x.dtype())) throw NotLowerable("complex logsumexp");
  DType out = c.out().dtype;
  // A complex out= of a real input receives the real result (computed in its real type).
  DType acc = opmath(is_complex(out) ? real_part(out) : out);
  x = convert(b, x, acc);
  std::vector<int64_t> dims = reduce_dims(c, 1, x.rank());
  double inf = std::numeric_limits<double>::infinity();
  Value m = reduce(b, x, dims, "max");
  // An all -inf (or +inf) slice must not become inf - inf.
  Value finite = compare(b, unary(b, Unary::Abs, m), constant(b, inf, acc, m.shape()), Direction::NE);
  m = select(b, finite, m, zeros(b, m.type));
  Value e = unary(b, Unary::Exponential, sub(b, x, expand_back(b, m, x, dims)));
  Value r = add(b, unary(b, Unary::Log, reduce(b, e, dims, "add")), m);
  return {convert(b, reshape(b, r, c.out().shape), out)};
}

// Inclusive scan along `dim` with reduce_window.
Value scan(Builder& b, Value x, int64_t dim, const std::string& kind) {
  int64_t n = x.shape()[dim];
  if (n <= 1) return x;
  std::vector<int64_t> window(x.rank(), 1), strides(x.rank(), 1);
  std::vector<std::pair<int64_t, int64_t>> padding(x.rank(), {0, 0});
  window[dim] = n;
  padding[dim] = {n - 1, 0};
  return reduce_window(b, x, kind, window, strides, padding);
}

Rule scan_rule(const std::string& kind) {
  return [kind](Context& c) {
    Value x = c.tensor(0);
    DType out = c.out().dtype;
    if (x.rank() == 0) {
      wrap_dim(c.int_arg(1), 0);
      return std::vector<Value>{convert(c.b, x, out)};
    }
    int64_t dim = wrap_dim(c.int_arg(1), x.rank());
    // dtype= converts the input first (an int64 beyond float16's range is inf, and 0 * inf NaN).
    Value r = scan(c.b, convert(c.b, convert(c.b, x, out), opmath(out)), dim, kind);
    return std::vector<Value>{convert(c.b, r, out)};
  };
}

// any / all over dims (result bool, or uint8 for uint8 input: the driver converts).
Rule logical_reduce(const std::string& kind, size_t dim_arg) {
  return [kind, dim_arg](Context& c) {
    Value x = c.tensor(0);
    std::vector<int64_t> dims = reduce_dims(c, dim_arg, x.rank());
    Value p = convert(c.b, x, DType::Pred);
    // all/any.dims with an empty list reduce nothing (unlike sum's empty list): element-wise.
    bool no_dims = dim_arg != kNoDim && c.has(dim_arg) && c.arg(dim_arg).kind == Arg::Kind::IntList &&
                   c.ints(dim_arg).empty();
    if (no_dims) return std::vector<Value>{reshape(c.b, p, c.out().shape)};
    return std::vector<Value>{reduce_to(c.b, p, dims, kind, c.out().shape)};
  };
}

const Registrar registrar({
    {"sum", accumulate_rule("add", kNoDim)},
    {"sum.dim_IntList", accumulate_rule("add", 1)},
    {"sum.IntList_out", accumulate_rule("add", 1)},
    {"mean", [](Context& c) { return mean_impl(c, kNoDim); }},
    {"mean.dim", [](Context& c) { return mean_impl(c, 1); }},
    {"mean.out", [](Context& c) { return mean_impl(c, 1); }},
    {"mean.dtype_out", [](Context& c) { return mean_impl(c, kNoDim); }},
    {"prod", accumulate_rule("mul", kNoDim)},
    {"prod.dim_int", accumulate_rule("mul", 1)},
    {"prod.int_out", accumulate_rule("mul", 1)},
    {"amax", extreme_rule("max", 1)},
    {"amin", extreme_rule("min", 1)},
    {"max.dim", extreme_dim_rule("max")},
    {"min.dim", extreme_dim_rule("min")},
    {"max.dim_max", extreme_dim_rule("max")},
    {"min.dim_min", extreme_dim_rule("min")},
    {"max", full_extreme_rule("max")},
    {"min", full_extreme_rule("min")},
    {"max.unary_out", full_extreme_rule("max", true)},
    {"min.unary_out", full_extreme_rule("min", true)},
    {"max.other", binary_extreme(Binary::Maximum)},
    {"min.other", binary_extreme(Binary::Minimum)},
    {"max.out", binary_extreme(Binary::Maximum)},
    {"min.out", binary_extreme(Binary::Minimum)},
    {"argmax", arg_extreme_rule("max")},
    {"argmin", arg_extreme_rule("min")},
    {"var.correction", var_rule(false, false)},
    {"std.correction", var_rule(true, false)},
    {"var_mean.correction", var_rule(false, true)},
    {"std_mean.correction", var_rule(true, true)},
    {"linalg_vector_norm", vector_norm},
    {"logsumexp", logsumexp},
    {"cumsum", scan_rule("add")},
    {"cumprod", scan_rule("mul")},
    {"any", logical_reduce("or", kNoDim)},
    {"any.dim", logical_reduce("or", 1)},
    {"any.dims", logical_reduce("or", 1)},
    {"any.all_out", logical_reduce("or", kNoDim)},
    {"any.out", logical_reduce("or", 1)},  // any.dim's out= (the name alone would find `any`)
    {"all", logical_reduce("and", kNoDim)},
    {"all.dim", logical_reduce("and", 1)},
    {"all.dims", logical_reduce("and", 1)},
    {"all.all_out", logical_reduce("and", kNoDim)},
    {"all.out", logical_reduce("and", 1)},
});

// Reductions along a padded dim are masked by the padder; mean, var, std and vector norms divide
// by the static extent, so they take a padded operand only where the padded dim is kept. cumsum
// is a prefix scan; sum/all/any of every element mask the spare rows with their identity.
const PaddedOperandsRegistrar padded_operands({
    {"sum.dim_IntList", PaddedOperands::Exact},
    {"amax", PaddedOperands::Exact},
    {"amin", PaddedOperands::Exact},
    {"max.dim", PaddedOperands::Exact},
    {"min.dim", PaddedOperands::Exact},
    {"any.dim", PaddedOperands::Exact},
    {"any.dims", PaddedOperands::Exact},
    {"all.dim", PaddedOperands::Exact},
    {"all.dims", PaddedOperands::Exact},
    {"logsumexp", PaddedOperands::Exact},
    {"prod.dim_int", PaddedOperands::Exact},
    {"cumsum", PaddedOperands::Prefix},
    {"mean.dim", PaddedOperands::KeepsDim},
    {"var.correction", PaddedOperands::KeepsDim},
    {"std.correction", PaddedOperands::KeepsDim},
    {"var_mean.correction", PaddedOperands::KeepsDim},
    {"std_mean.correction", PaddedOperands::KeepsDim},
    {"linalg_vector_norm", PaddedOperands::KeepsDim},
    {"sum", PaddedOperands::FullReduction},
    {"all", PaddedOperands::FullReduction},
    {"any", PaddedOperands::FullReduction},
});

}  // namespace
}  // namespace tpu::lowering
