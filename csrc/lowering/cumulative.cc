// Cumulative ops with a non-additive combine: cummax/cummin (values and indices, the
// _cummax_helper/_cummin_helper kernels behind torch.cummax) and logcumsumexp.
//
// All are inclusive scans computed with log2(n) doubling steps (Hillis-Steele): step k combines
// each element with the one k places earlier, the first k taking an identity element. This
// needs only element-wise ops, so any combine works and the cost is O(n log n), not the
// O(n^2) of a full-length reduce_window.
//
// CPU semantics reproduced: cummax keeps the later index on ties (x >= running max) and, once
// a NaN is seen, stays NaN with the index of the latest NaN; cummin likewise with <=.
// logcumsumexp combines like the CPU's log-add-exp: equal infinities stay as they are, NaN
// propagates.
#include <cmath>
#include <functional>
#include <limits>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// combine(earlier, later) -> combined, one value per carried operand.
using Combine = std::function<std::vector<Value>(Builder&, const std::vector<Value>&, const std::vector<Value>&)>;

std::vector<Value> scan(Builder& b, std::vector<Value> xs, int64_t dim, const std::vector<Value>& identity,
                        const Combine& combine) {
  int64_t n = xs[0].shape()[dim];
  int64_t rank = xs[0].rank();
  for (int64_t k = 1; k < n; k *= 2) {
    std::vector<Value> earlier;
    for (size_t j = 0; j < xs.size(); ++j) {
      std::vector<int64_t> lo(rank, 0), hi = xs[j].shape(), st(rank, 1), plo(rank, 0), phi(rank, 0), in(rank, 0);
      hi[dim] = n - k;
      plo[dim] = k;
      Value s = slice(b, xs[j], lo, hi, st);
      earlier.push_back(pad(b, s, identity[j], plo, phi, in));
    }
    xs = combine(b, earlier, xs);
  }
  return xs;
}

Value lnot(Builder& b, Value x) { return unary(b, Unary::Not, x); }

// The lowest (cummax) or highest (cummin) value of dtype t: the scan's identity.
double extreme_of(DType t, bool lowest) {
  double inf = std::numeric_limits<double>::infinity();
  switch (t) {
    case DType::S8: return lowest ? -128.0 : 127.0;
    case DType::S16: return lowest ? -32768.0 : 32767.0;
    case DType::S32: return lowest ? -2147483648.0 : 2147483647.0;
    case DType::S64: return lowest ? -9223372036854775808.0 : 9223372036854775807.0;
    case DType::U8: return lowest ? 0.0 : 255.0;
    default: return lowest ? -inf : inf;
  }
}

// The scan's identity for x's dtype: its lowest (cummax) or highest (cummin) value.
Value identity_of(Builder& b, DType t, bool lowest) {
  if (t == DType::S64 && !lowest) {  // 2^63 - 1 has no double: the bits of ~INT64_MIN
    return unary(b, Unary::Not, constant(b, extreme_of(t, true), t));
  }
  return constant(b, extreme_of(t, lowest), t);
}

// _cummax_helper(self, values, indices, dim) -> () writes values and indices; cummax(self, dim)
// returns them (graphs see cummax itself). `dim_arg` is where dim is.
Rule cum_extreme(bool is_max, size_t dim_arg) {
  return [is_max, dim_arg](Context& c) {
    Builder& b = c.b;
    Value x = c.tensor(0);
    DType vt = c.out(0).dtype;
    DType t = x.dtype() == DType::Pred ? DType::U8 : x.dtype();
    if (is_complex(t) || t == DType::U16 || t == DType::U32 || t == DType::U64) {
      throw NotLowerable("cummax/cummin of this dtype");
    }
    // The helpers write values/indices as given (torch.cummax sizes them first); the CPU kernel
    // writes past a smaller one, so a mis-shaped one is rejected. It also takes values in self's
    // type and Long indices, and so must we: a conjugate (complex) values view the CPU rejects
    // would otherwise reach PyTorch's conj fallback, which breaks on an op returning ().
    if (dim_arg == 3) {
      if (vt != x.dtype()) {
        throw InvalidCall(std::string("expected scalar type ") + hlo::torch_name(x.dtype()) + " but found " +
                          hlo::torch_name(vt));
      }
      if (c.out(1).dtype != DType::S64) {
        throw InvalidCall(std::string("expected scalar type Long but found ") + hlo::torch_name(c.out(1).dtype));
      }
    }
    if (c.out(0).shape != x.shape() || c.out(1).shape != x.shape()) {
      throw InvalidCall("values and indices must have self's shape " + x.type.str());
    }
    x = convert(b, x, t);
    if (x.rank() == 0) {
      wrap_dim(c.int_arg(dim_arg), 0);
      return std::vector<Value>{convert(b, x, vt), constant(b, 0, c.out(1).dtype)};
    }
    int64_t dim = wrap_dim(c.int_arg(dim_arg), x.rank());
    Value idx = iota(b, Type(DType::S64, x.shape()), dim);
    bool fl = is_float(t);
    Combine pick = [is_max, fl](Builder& rb, const std::vector<Value>& e, const std::vector<Value>& l) {
      // The later element wins when it is at least as good: >= for max, <= for min; NaN beats
      // numbers and among NaNs the later wins (the later index is the larger one).
      Value later_better = compare(rb, l[0], e[0], is_max ? Direction::GE : Direction::LE);
      if (fl) {
        Value ln = is_nan(rb, l[0]), en = is_nan(rb, e[0]);
        later_better = logical_or(rb, ln, logical_and(rb, lnot(rb, en), later_better));
      }
      // Ties with the identity padding go to the later (real) element; otherwise e's index is
      // smaller, so `>=` also keeps the later index on ties.
      return std::vector<Value>{select(rb, later_better, l[0], e[0]), select(rb, later_better, l[1], e[1])};
    };
    std::vector<Value> r = scan(b, {x, idx}, dim, {identity_of(b, t, is_max), constant(b, -1, DType::S64)}, pick);
    return std::vector<Value>{convert(b, r[0], vt), convert(b, r[1], c.out(1).dtype)};
  };
}

// log(exp(x) + exp(y)) like the CPU's _log_add_exp_helper.
Value log_add_exp(Builder& b, Value x, Value y) {
  Value mn = nan_propagating(b, Binary::Minimum, x, y);
  Value mx = nan_propagating(b, Binary::Maximum, x, y);
  Value finite = unary(b, Unary::IsFinite, mn);
  Value use_formula = logical_or(b, compare(b, mn, mx, Direction::NE), finite);
  Value f = add(b, mx, unary(b, Unary::LogPlusOne, unary(b, Unary::Exponential, sub(b, mn, mx))));
  return select(b, use_formula, f, x);
}

std::vector<Value> logcumsumexp(Context& c) {  // _logcumsumexp(self, dim)
  Builder& b = c.b;
  DType out = c.out().dtype, in = c.tensor(0).dtype();
  // An out= of another dtype is rejected as torch.logcumsumexp does: PyTorch's CPU kernel for
  // _logcumsumexp.out writes the input's type into it, past its end when it is narrower.
  if (is_float(in) && out != in) {
    throw InvalidCall(std::string("expected scalar_type ") + hlo::torch_name(in) + " but found " + hlo::torch_name(out));
  }
  if (!is_float(out)) throw NotLowerable("logcumsumexp of a non-float type");
  Value x = convert(b, c.tensor(0), opmath(out));
  if (x.rank() == 0) {
    wrap_dim(c.int_arg(1), 0);
    return {convert(b, x, out)};
  }
  int64_t dim = wrap_dim(c.int_arg(1), x.rank());
  Combine lae = [](Builder& rb, const std::vector<Value>& e, const std::vector<Value>& l) {
    return std::vector<Value>{log_add_exp(rb, e[0], l[0])};
  };
  std::vector<Value> r = scan(b, {x}, dim, {constant(b, -std::numeric_limits<double>::infinity(), x.dtype())}, lae);
  return {convert(b, r[0], out)};
}

const Registrar registrar({
    {"_cummax_helper", cum_extreme(true, 3)},
    {"_cummin_helper", cum_extreme(false, 3)},
    {"cummax", cum_extreme(true, 1)},
    {"cummin", cum_extreme(false, 1)},
    {"_logcumsumexp", logcumsumexp},
    // The eager engine takes result shapes from meta kernels, and _logcumsumexp has none: the
    // public op (whose meta decomposition exists) gets the kernel, with the same arguments.
    {"logcumsumexp", logcumsumexp},
});

}  // namespace
}  // namespace tpu::lowering
