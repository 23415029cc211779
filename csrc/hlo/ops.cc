#include "hlo/ops.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <cstdio>
#include <stdexcept>

namespace tpu::hlo {
namespace {

std::string int_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Non-finite float literals are written as bit patterns, which MLIR accepts for float types.
std::string nonfinite_literal(double v, DType t) {
  bool nan = std::isnan(v), neg = v < 0;
  switch (real_part(t)) {
    case DType::F16: return nan ? "0x7E00" : neg ? "0xFC00" : "0x7C00";
    case DType::BF16: return nan ? "0x7FC0" : neg ? "0xFF80" : "0x7F80";
    case DType::F32: return nan ? "0x7FC00000" : neg ? "0xFF800000" : "0x7F800000";
    case DType::F8E4M3FN: return nan ? "0x7F" : neg ? "0xFE" : "0x7E";  // no inf: ±448, as PyTorch rounds
    case DType::F8E5M2: return nan ? "0x7F" : neg ? "0xFC" : "0x7C";
    default: return nan ? "0x7FF8000000000000" : neg ? "0xFFF0000000000000" : "0x7FF0000000000000";
  }
}

std::string float_literal(double v, DType t) {
  if (!std::isfinite(v)) return nonfinite_literal(v, t);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  std::string s = buf;
  // MLIR float literals need a fraction: "1e+18" must be written "1.0e+18".
  if (s.find('.') == std::string::npos) {
    size_t e = s.find('e');
    s.insert(e == std::string::npos ? s.size() : e, ".0");
  }
  return s;
}

std::string scalar_literal(double v, DType t) {
  if (t == DType::Pred) return v != 0 ? "true" : "false";
  if (is_complex(t)) return "(" + float_literal(v, t) + ", 0.0)";
  if (is_float(t)) return float_literal(v, t);
  if (is_unsigned(t)) return std::to_string(static_cast<uint64_t>(static_cast<int64_t>(v)));
  return std::to_string(static_cast<int64_t>(v));
}

}  // namespace

Binary reduction_op(const std::string& kind, DType t) {
  bool pred = t == DType::Pred;
  if (kind == "add") return pred ? Binary::Or : Binary::Add;
  if (kind == "mul") return pred ? Binary::And : Binary::Multiply;
  if (kind == "max") return pred ? Binary::Or : Binary::Maximum;
  if (kind == "min") return pred ? Binary::And : Binary::Minimum;
  if (kind == "and") return Binary::And;
  if (kind == "or") return Binary::Or;
  throw std::logic_error("unknown reduction kind " + kind);
}

std::string scalar_region(Builder& b, DType t, Binary op) {
  Type s(t, {});
  return b.region({s, s}, [&](Builder& r, const std::vector<Value>& a) {
    return std::vector<Value>{binary(r, op, a[0], a[1])};
  });
}

Value constant(Builder& b, double value, DType dtype, const std::vector<int64_t>& shape) {
  // A float8 constant is rounded by convert, so it follows PyTorch's rule (e4m3fn saturates).
  if (is_float8(dtype)) return convert(b, constant(b, value, DType::F32, shape), dtype);
  Type scalar(dtype, {});
  Value c = b.emit1("stablehlo.constant", {}, scalar,
                    "value = dense<" + scalar_literal(value, dtype) + "> : " + scalar.str());
  return shape.empty() ? c : broadcast_in_dim(b, c, shape, {});
}

Value constant_i64_vector(Builder& b, const std::vector<int64_t>& values, DType dtype) {
  Type t(dtype, {static_cast<int64_t>(values.size())});
  std::string body = values.empty() ? "" : int_list(values);
  return b.emit1("stablehlo.constant", {}, t, "value = dense<" + body + "> : " + t.str());
}

Value constant_float_vector(Builder& b, const std::vector<double>& values, DType dtype) {
  Type t(dtype, {static_cast<int64_t>(values.size())});
  std::string body;
  for (size_t i = 0; i < values.size(); ++i) body += (i ? ", " : "") + float_literal(values[i], dtype);
  return b.emit1("stablehlo.constant", {}, t, "value = dense<[" + body + "]> : " + t.str());
}

Value zeros(Builder& b, const Type& type) { return constant(b, 0, type.dtype, type.shape); }

const char* op_name(Unary op) {
  switch (op) {
    case Unary::Abs: return "stablehlo.abs";
    case Unary::Ceil: return "stablehlo.ceil";
    case Unary::Cosine: return "stablehlo.cosine";
    case Unary::Exponential: return "stablehlo.exponential";
    case Unary::ExponentialMinusOne: return "stablehlo.exponential_minus_one";
    case Unary::Floor: return "stablehlo.floor";
    case Unary::Imag: return "stablehlo.imag";
    case Unary::IsFinite: return "stablehlo.is_finite";
    case Unary::Log: return "stablehlo.log";
    case Unary::LogPlusOne: return "stablehlo.log_plus_one";
    case Unary::Logistic: return "stablehlo.logistic";
    case Unary::Negate: return "stablehlo.negate";
    case Unary::Not: return "stablehlo.not";
    case Unary::Real: return "stablehlo.real";
    case Unary::RoundNearestEven: return "stablehlo.round_nearest_even";
    case Unary::Rsqrt: return "stablehlo.rsqrt";
    case Unary::Sign: return "stablehlo.sign";
    case Unary::Sine: return "stablehlo.sine";
    case Unary::Sqrt: return "stablehlo.sqrt";
    case Unary::Tan: return "stablehlo.tan";
    case Unary::Tanh: return "stablehlo.tanh";
    case Unary::Acos: return "chlo.acos";
    case Unary::Acosh: return "chlo.acosh";
    case Unary::Asin: return "chlo.asin";
    case Unary::Asinh: return "chlo.asinh";
    case Unary::Atanh: return "chlo.atanh";
    case Unary::Cosh: return "chlo.cosh";
    case Unary::Digamma: return "chlo.digamma";
    case Unary::Erf: return "chlo.erf";
    case Unary::Erfc: return "chlo.erfc";
    case Unary::ErfInv: return "chlo.erf_inv";
    case Unary::Lgamma: return "chlo.lgamma";
    case Unary::Sinh: return "chlo.sinh";
  }
  throw std::logic_error("unknown unary op");
}

const char* op_name(Binary op) {
  switch (op) {
    case Binary::Add: return "stablehlo.add";
    case Binary::Subtract: return "stablehlo.subtract";
    case Binary::Multiply: return "stablehlo.multiply";
    case Binary::Divide: return "stablehlo.divide";
    case Binary::Remainder: return "stablehlo.remainder";
    case Binary::Power: return "stablehlo.power";
    case Binary::Maximum: return "stablehlo.maximum";
    case Binary::Minimum: return "stablehlo.minimum";
    case Binary::Atan2: return "stablehlo.atan2";
    case Binary::And: return "stablehlo.and";
    case Binary::Or: return "stablehlo.or";
    case Binary::Xor: return "stablehlo.xor";
    case Binary::ShiftLeft: return "stablehlo.shift_left";
    case Binary::ShiftRightLogical: return "stablehlo.shift_right_logical";
    case Binary::ShiftRightArithmetic: return "stablehlo.shift_right_arithmetic";
  }
  throw std::logic_error("unknown binary op");
}

const char* direction_name(Direction direction) {
  switch (direction) {
    case Direction::EQ: return "EQ";
    case Direction::NE: return "NE";
    case Direction::LT: return "LT";
    case Direction::LE: return "LE";
    case Direction::GT: return "GT";
    case Direction::GE: return "GE";
  }
  throw std::logic_error("unknown comparison direction");
}

Value unary(Builder& b, Unary op, Value x) {
  Type result = x.type;
  if (op == Unary::IsFinite) result.dtype = DType::Pred;
  if (op == Unary::Abs || op == Unary::Real || op == Unary::Imag) result.dtype = real_part(x.dtype());
  return b.emit1(op_name(op), {x}, result);
}
Value real(Builder& b, Value x) { return unary(b, Unary::Real, x); }
Value imag(Builder& b, Value x) { return unary(b, Unary::Imag, x); }
Value complex(Builder& b, Value re, Value im) {
  if (re.type != im.type) {
    throw std::logic_error("complex: part types differ: " + re.type.str() + " vs " + im.type.str());
  }
  return b.emit1("stablehlo.complex", {re, im}, Type(complex_of(re.dtype()), re.shape()));
}

namespace {

// XLA's integer power reads only the exponent's low 32 bits (0 ** 2**40 gave 1). PyTorch's powi:
// exponentiation by squaring over every bit (products wrap), and for a negative exponent 1 for
// base 1, +-1 for base -1, else 0.
Value integer_power(Builder& b, Value x, Value y) {
  const Type& t = x.type;
  auto k = [&](double v) { return constant(b, v, t.dtype, t.shape); };
  Value one = k(1), zero = k(0);
  Value result = one, base = x, e = y;
  for (int i = 0; i < bit_width(t.dtype); ++i) {
    Value bit = compare(b, binary(b, Binary::And, e, one), zero, Direction::NE);
    result = select(b, bit, mul(b, result, base), result);
    base = mul(b, base, base);
    e = binary(b, Binary::ShiftRightLogical, e, one);
  }
  if (is_unsigned(t.dtype)) return result;
  Value odd = compare(b, binary(b, Binary::And, y, one), zero, Direction::NE);
  Value negative = select(b, compare(b, x, one, Direction::EQ), one,
                          select(b, compare(b, x, k(-1), Direction::EQ), select(b, odd, k(-1), one), zero));
  return select(b, compare(b, y, zero, Direction::LT), negative, result);
}

}  // namespace

Value binary(Builder& b, Binary op, Value x, Value y) {
  if (x.type != y.type) {
    throw std::logic_error(std::string(op_name(op)) + ": operand types differ: " + x.type.str() + " vs " +
                           y.type.str());
  }
  if (op == Binary::Power && is_integer(x.dtype())) return integer_power(b, x, y);
  return b.emit1(op_name(op), {x, y}, x.type);
}
Value add(Builder& b, Value x, Value y) { return binary(b, Binary::Add, x, y); }
Value sub(Builder& b, Value x, Value y) { return binary(b, Binary::Subtract, x, y); }
Value mul(Builder& b, Value x, Value y) { return binary(b, Binary::Multiply, x, y); }
Value div(Builder& b, Value x, Value y) { return binary(b, Binary::Divide, x, y); }
Value max(Builder& b, Value x, Value y) { return binary(b, Binary::Maximum, x, y); }
Value min(Builder& b, Value x, Value y) { return binary(b, Binary::Minimum, x, y); }
Value neg(Builder& b, Value x) { return unary(b, Unary::Negate, x); }

Value convert(Builder& b, Value x, DType dtype) {
  if (x.dtype() == dtype) return x;
  // PyTorch converts to and from float8 through float (a double rounds twice, as in C++).
  if (is_float8(x.dtype()) && dtype != DType::F32) return convert(b, convert(b, x, DType::F32), dtype);
  if (is_float8(dtype)) return to_float8(b, convert(b, x, DType::F32), dtype);
  if (dtype == DType::Pred) {  // XLA converts to i1 by truncation; PyTorch tests != 0.
    return compare(b, x, zeros(b, x.type), Direction::NE);
  }
  if (is_complex(x.dtype()) && !is_complex(dtype)) {
    x = real(b, x);
  }
  if (x.dtype() == DType::Pred && (is_float(dtype) || is_complex(dtype))) {
    // XLA's simplifier rewrites y * convert(p) as select(p, y, 0), which turns inf * False into
    // 0 where PyTorch gives NaN. A select of constants is not matched by that rewrite.
    return select(b, x, constant(b, 1, dtype, x.shape()), constant(b, 0, dtype, x.shape()));
  }
  return b.emit1("stablehlo.convert", {x}, Type(dtype, x.shape()));
}

Value bitcast_convert(Builder& b, Value x, DType dtype) {
  if (x.dtype() == dtype) return x;
  // PyTorch stores a bool as one byte, 0 or 1; StableHLO's i1 has no byte to reinterpret (XLA
  // rejects i1 <-> ui8 bitcasts), so the byte views of bool storage convert instead.
  bool byte = dtype == DType::U8 || dtype == DType::S8;
  if (x.dtype() == DType::Pred && byte) return convert(b, x, dtype);
  if (dtype == DType::Pred && (x.dtype() == DType::U8 || x.dtype() == DType::S8)) {
    return compare(b, x, zeros(b, x.type), Direction::NE);
  }
  return b.emit1("stablehlo.bitcast_convert", {x}, Type(dtype, x.shape()));
}

Value compare(Builder& b, Value x, Value y, Direction direction) {
  if (x.type != y.type) {
    throw std::logic_error("compare: operand types differ: " + x.type.str() + " vs " + y.type.str());
  }
  return b.emit1("stablehlo.compare", {x, y}, Type(DType::Pred, x.shape()),
                 std::string("comparison_direction = #stablehlo<comparison_direction ") +
                     direction_name(direction) + ">");
}

Value is_nan(Builder& b, Value x) { return compare(b, x, x, Direction::NE); }
Value logical_and(Builder& b, Value x, Value y) { return binary(b, Binary::And, x, y); }
Value logical_or(Builder& b, Value x, Value y) { return binary(b, Binary::Or, x, y); }

Value select(Builder& b, Value pred, Value on_true, Value on_false) {
  return b.emit1("stablehlo.select", {pred, on_true, on_false}, on_true.type);
}

Value clamp(Builder& b, Value lo, Value x, Value hi) {
  return b.emit1("stablehlo.clamp", {lo, x, hi}, x.type);
}

Value reshape(Builder& b, Value x, const std::vector<int64_t>& shape) {
  if (x.shape() == shape) return x;
  return b.emit1("stablehlo.reshape", {x}, Type(x.dtype(), shape));
}

Value transpose(Builder& b, Value x, const std::vector<int64_t>& permutation) {
  bool identity = true;
  std::vector<int64_t> shape;
  for (size_t i = 0; i < permutation.size(); ++i) {
    identity &= permutation[i] == static_cast<int64_t>(i);
    shape.push_back(x.shape().at(permutation[i]));
  }
  if (identity) return x;
  Value t = b.emit1("stablehlo.transpose", {x}, Type(x.dtype(), shape), "permutation = " + i64_array(permutation));
  b.note_transpose(t, x, permutation);
  return t;
}

Value broadcast_in_dim(Builder& b, Value x, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& dims) {
  return b.emit1("stablehlo.broadcast_in_dim", {x}, Type(x.dtype(), shape),
                 "broadcast_dimensions = " + i64_array(dims));
}

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& c) {
  size_t n = std::max(a.size(), c.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t dc = i < n - c.size() ? 1 : c[i - (n - c.size())];
    if (da != dc && da != 1 && dc != 1) {
      throw std::invalid_argument("shapes cannot be broadcast together");
    }
    out[i] = da == 1 ? dc : da;
  }
  return out;
}

Value broadcast_to(Builder& b, Value x, const std::vector<int64_t>& shape) {
  if (x.shape() == shape) return x;
  bool ok = x.shape().size() <= shape.size();
  for (size_t i = 0; ok && i < x.shape().size(); ++i) {
    int64_t from = x.shape()[x.shape().size() - 1 - i];
    ok = from == 1 || from == shape[shape.size() - 1 - i];
  }
  if (!ok) throw std::invalid_argument("cannot broadcast " + x.type.str() + " to shape " + Type(x.dtype(), shape).str());
  // Drop size-1 dims that get expanded, then broadcast the rest in place.
  size_t offset = shape.size() - x.shape().size();
  std::vector<int64_t> kept_shape, dims;
  for (size_t i = 0; i < x.shape().size(); ++i) {
    if (x.shape()[i] == shape[i + offset]) {
      kept_shape.push_back(x.shape()[i]);
      dims.push_back(static_cast<int64_t>(i + offset));
    }
  }
  return broadcast_in_dim(b, reshape(b, x, kept_shape), shape, dims);
}

Value slice(Builder& b, Value x, const std::vector<int64_t>& start,
            const std::vector<int64_t>& limit, const std::vector<int64_t>& strides) {
  // A rule slicing a tensor of another rank than it expects (a malformed call): an error, not a
  // read past x's shape.
  if (start.size() != static_cast<size_t>(x.rank()) || limit.size() != start.size() || strides.size() != start.size()) {
    throw std::invalid_argument("slice of a rank-" + std::to_string(x.rank()) + " tensor " + x.type.str() +
                                " with " + std::to_string(start.size()) + " start indices");
  }
  std::vector<int64_t> shape;
  bool identity = true;
  for (size_t i = 0; i < start.size(); ++i) {
    int64_t n = limit[i] > start[i] ? (limit[i] - start[i] + strides[i] - 1) / strides[i] : 0;
    shape.push_back(n);
    identity &= start[i] == 0 && limit[i] == x.shape()[i] && strides[i] == 1;
  }
  if (identity) return x;
  return b.emit1("stablehlo.slice", {x}, Type(x.dtype(), shape),
                 "start_indices = " + i64_array(start) + ", limit_indices = " + i64_array(limit) +
                     ", strides = " + i64_array(strides));
}

Value dynamic_slice(Builder& b, Value x, const std::vector<Value>& starts,
                    const std::vector<int64_t>& sizes) {
  std::vector<Value> operands{x};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return b.emit1("stablehlo.dynamic_slice", operands, Type(x.dtype(), sizes),
                 "slice_sizes = " + i64_array(sizes));
}

Value dynamic_update_slice(Builder& b, Value x, Value update, const std::vector<Value>& starts) {
  std::vector<Value> operands{x, update};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return b.emit1("stablehlo.dynamic_update_slice", operands, x.type);
}

Value concatenate(Builder& b, const std::vector<Value>& xs, int64_t dim) {
  if (xs.size() == 1) return xs[0];
  std::vector<int64_t> shape = xs.at(0).shape();
  shape[dim] = 0;
  for (const Value& x : xs) shape[dim] += x.shape()[dim];
  return b.emit1("stablehlo.concatenate", xs, Type(xs[0].dtype(), shape),
                 "dimension = " + std::to_string(dim) + " : i64");
}

Value pad(Builder& b, Value x, Value pad_value, const std::vector<int64_t>& low,
          const std::vector<int64_t>& high, const std::vector<int64_t>& interior) {
  std::vector<int64_t> shape;
  for (size_t i = 0; i < low.size(); ++i) {
    int64_t d = x.shape()[i];
    shape.push_back(low[i] + high[i] + d + (d > 0 ? (d - 1) * interior[i] : 0));
  }
  return b.emit1("stablehlo.pad", {x, pad_value}, Type(x.dtype(), shape),
                 "edge_padding_low = " + i64_array(low) + ", edge_padding_high = " +
                     i64_array(high) + ", interior_padding = " + i64_array(interior));
}

Value iota(Builder& b, const Type& type, int64_t dim) {
  return b.emit1("stablehlo.iota", {}, type, "iota_dimension = " + std::to_string(dim) + " : i64");
}

Value reverse(Builder& b, Value x, const std::vector<int64_t>& dims) {
  if (dims.empty()) return x;
  return b.emit1("stablehlo.reverse", {x}, x.type, "dimensions = " + i64_array(dims));
}

Value reduction_init(Builder& b, const std::string& kind, DType t) {
  double inf = std::numeric_limits<double>::infinity();
  if (kind == "add" || kind == "or") return constant(b, 0, t);
  if (kind == "mul" || kind == "and") return constant(b, 1, t);
  bool is_max = kind == "max";
  if (t == DType::Pred) return constant(b, is_max ? 0 : 1, t);
  if (is_float(t)) return constant(b, is_max ? -inf : inf, t);
  int bits = bit_width(t);
  if (is_unsigned(t)) {
    return is_max ? constant(b, 0, t)
                  : bits == 64 ? constant(b, -1, t)  // all ones
                               : constant(b, std::ldexp(1.0, bits) - 1, t);
  }
  if (bits == 64) {
    return is_max ? constant(b, static_cast<double>(INT64_MIN), t)
                  : b.emit1("stablehlo.constant", {}, Type(t, {}),
                            "value = dense<9223372036854775807> : tensor<i64>");
  }
  double lim = std::ldexp(1.0, bits - 1);
  return constant(b, is_max ? -lim : lim - 1, t);
}

Value reduce(Builder& b, Value x, const std::vector<int64_t>& dims, const std::string& kind) {
  if (dims.empty()) return x;
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < x.rank(); ++i) {
    bool reduced = false;
    for (int64_t d : dims) reduced |= d == i;
    if (!reduced) shape.push_back(x.shape()[i]);
  }
  Value init = reduction_init(b, kind, x.dtype());
  std::string body = scalar_region(b, x.dtype(), reduction_op(kind, x.dtype()));
  return b.emit1("stablehlo.reduce", {x, init}, Type(x.dtype(), shape),
                 "dimensions = " + i64_array(dims), {body});
}

Value reduce_window(Builder& b, Value x, const std::string& kind, const std::vector<int64_t>& window,
                    const std::vector<int64_t>& strides,
                    const std::vector<std::pair<int64_t, int64_t>>& padding) {
  std::vector<int64_t> shape;
  std::string pads = "dense<[";
  for (size_t i = 0; i < window.size(); ++i) {
    int64_t padded = x.shape()[i] + padding[i].first + padding[i].second;
    shape.push_back(padded < window[i] ? 0 : (padded - window[i]) / strides[i] + 1);
    pads += (i ? ", [" : "[") + std::to_string(padding[i].first) + ", " +
            std::to_string(padding[i].second) + "]";
  }
  pads += "]> : tensor<" + std::to_string(window.size()) + "x2xi64>";
  Value init = reduction_init(b, kind, x.dtype());
  std::string body = scalar_region(b, x.dtype(), reduction_op(kind, x.dtype()));
  return b.emit1("stablehlo.reduce_window", {x, init}, Type(x.dtype(), shape),
                 "window_dimensions = " + i64_array(window) + ", window_strides = " +
                     i64_array(strides) + ", padding = " + pads,
                 {body});
}

namespace {

// Dims of `v` that are neither batch nor contracting, in order.
std::vector<int64_t> free_dims_of(const Value& v, const std::vector<int64_t>& batch,
                                  const std::vector<int64_t>& contract) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < v.rank(); ++i) {
    bool used = false;
    for (int64_t d : batch) used |= d == i;
    for (int64_t d : contract) used |= d == i;
    if (!used) out.push_back(i);
  }
  return out;
}

// dot_general as broadcast-multiply-reduce over [batch, lhs free, contract, rhs free].
Value int64_dot(Builder& b, Value lhs, Value rhs, const std::vector<int64_t>& lhs_batch,
                const std::vector<int64_t>& rhs_batch, const std::vector<int64_t>& lhs_contract,
                const std::vector<int64_t>& rhs_contract, const std::vector<int64_t>& result_shape) {
  std::vector<int64_t> lf = free_dims_of(lhs, lhs_batch, lhs_contract);
  std::vector<int64_t> rf = free_dims_of(rhs, rhs_batch, rhs_contract);
  std::vector<int64_t> lperm = lhs_batch, rperm = rhs_batch;
  lperm.insert(lperm.end(), lf.begin(), lf.end());
  lperm.insert(lperm.end(), lhs_contract.begin(), lhs_contract.end());
  rperm.insert(rperm.end(), rhs_contract.begin(), rhs_contract.end());
  rperm.insert(rperm.end(), rf.begin(), rf.end());
  Value l = transpose(b, lhs, lperm), r = transpose(b, rhs, rperm);
  size_t nb = lhs_batch.size(), nlf = lf.size(), nc = lhs_contract.size(), nrf = rf.size();
  std::vector<int64_t> full(l.shape().begin(), l.shape().end());
  for (size_t i = 0; i < nrf; ++i) full.push_back(r.shape()[nb + nc + i]);
  std::vector<int64_t> ldims(nb + nlf + nc), rdims;
  std::iota(ldims.begin(), ldims.end(), 0);
  for (size_t i = 0; i < nb; ++i) rdims.push_back(static_cast<int64_t>(i));
  for (size_t i = 0; i < nc + nrf; ++i) rdims.push_back(static_cast<int64_t>(nb + nlf + i));
  Value prod = mul(b, broadcast_in_dim(b, l, full, ldims), broadcast_in_dim(b, r, full, rdims));
  std::vector<int64_t> contract_axes;
  for (size_t i = 0; i < nc; ++i) contract_axes.push_back(static_cast<int64_t>(nb + nlf + i));
  return reshape(b, reduce(b, prod, contract_axes, "add"), result_shape);
}

}  // namespace

Value dot_general(Builder& b, Value lhs, Value rhs, const std::vector<int64_t>& lhs_batch,
                  const std::vector<int64_t>& rhs_batch, const std::vector<int64_t>& lhs_contract,
                  const std::vector<int64_t>& rhs_contract, DType result) {
  std::vector<int64_t> shape;
  for (int64_t d : lhs_batch) shape.push_back(lhs.shape()[d]);
  auto free_dims = [&](const Value& v, const std::vector<int64_t>& batch,
                       const std::vector<int64_t>& contract) {
    for (int64_t i = 0; i < v.rank(); ++i) {
      bool used = false;
      for (int64_t d : batch) used |= d == i;
      for (int64_t d : contract) used |= d == i;
      if (!used) shape.push_back(v.shape()[i]);
    }
  };
  free_dims(lhs, lhs_batch, lhs_contract);
  free_dims(rhs, rhs_batch, rhs_contract);
  if (lhs.dtype() == DType::S64 || lhs.dtype() == DType::U64) {
    // TPUs have no 64-bit integer dot: multiply broadcast operands and sum the contraction.
    return int64_dot(b, lhs, rhs, lhs_batch, rhs_batch, lhs_contract, rhs_contract, shape);
  }
  std::string dims = "dot_dimension_numbers = #stablehlo.dot<";
  std::string sep;
  auto field = [&](const char* name, const std::vector<int64_t>& v) {
    if (v.empty()) return;
    dims += sep + name + " = " + int_list(v);
    sep = ", ";
  };
  field("lhs_batching_dimensions", lhs_batch);
  field("rhs_batching_dimensions", rhs_batch);
  field("lhs_contracting_dimensions", lhs_contract);
  field("rhs_contracting_dimensions", rhs_contract);
  dims += ">";
  // PyTorch float32 matmuls are full precision; TPUs default to bf16 passes without this.
  if (lhs.dtype() == DType::F32 || lhs.dtype() == DType::F64 || is_complex(lhs.dtype())) {
    dims += ", precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]";
  }
  return b.emit1("stablehlo.dot_general", {lhs, rhs}, Type(result, shape), dims);
}

Value gather(Builder& b, Value operand, Value indices, const GatherDims& d,
             const std::vector<int64_t>& slice_sizes, const std::vector<int64_t>& result_shape) {
  std::string attrs = "dimension_numbers = #stablehlo.gather<";
  std::string sep;
  auto field = [&](const char* name, const std::vector<int64_t>& v) {
    if (v.empty()) return;
    attrs += sep + name + " = " + int_list(v);
    sep = ", ";
  };
  field("offset_dims", d.offset_dims);
  field("collapsed_slice_dims", d.collapsed_slice_dims);
  field("start_index_map", d.start_index_map);
  attrs += sep + "index_vector_dim = " + std::to_string(d.index_vector_dim) + ">";
  attrs += ", indices_are_sorted = false, slice_sizes = " + i64_array(slice_sizes);
  return b.emit1("stablehlo.gather", {operand, indices}, Type(operand.dtype(), result_shape), attrs);
}

Value scatter(Builder& b, Value operand, Value indices, Value updates, const ScatterDims& d,
              const std::string& combine) {
  std::string attrs = "scatter_dimension_numbers = #stablehlo.scatter<";
  std::string sep;
  auto field = [&](const char* name, const std::vector<int64_t>& v) {
    if (v.empty()) return;
    attrs += sep + name + " = " + int_list(v);
    sep = ", ";
  };
  field("update_window_dims", d.update_window_dims);
  field("inserted_window_dims", d.inserted_window_dims);
  field("scatter_dims_to_operand_dims", d.scatter_dims_to_operand_dims);
  attrs += sep + "index_vector_dim = " + std::to_string(d.index_vector_dim) + ">";
  attrs += ", indices_are_sorted = false, unique_indices = false";
  Type s(operand.dtype(), {});
  std::string body = b.region({s, s}, [&](Builder& r, const std::vector<Value>& a) {
    if (combine.empty()) return std::vector<Value>{a[1]};
    return std::vector<Value>{binary(r, reduction_op(combine, s.dtype), a[0], a[1])};
  });
  return b.emit1("stablehlo.scatter", {operand, indices, updates}, operand.type, attrs, {body});
}

std::vector<Value> sort(Builder& b, const std::vector<Value>& operands, int64_t dim,
                        bool descending, bool stable) {
  std::vector<Type> scalars, results;
  for (const Value& v : operands) {
    scalars.push_back(Type(v.dtype(), {}));
    scalars.push_back(Type(v.dtype(), {}));
    results.push_back(v.type);
  }
  DType key = operands[0].dtype();
  std::string body = b.region(scalars, [&](Builder& r, const std::vector<Value>& a) {
    std::string attrs = std::string("comparison_direction = #stablehlo<comparison_direction ") +
                        direction_name(descending ? Direction::GT : Direction::LT) + ">";
    Value x = a[0], y = a[1];
    if (is_float(key)) {
      // PyTorch's order: every NaN (whatever its sign bit: inf - inf is -NaN on x86) after +inf,
      // and -0.0 equal to +0.0 (a stable sort keeps their order). The total order alone would
      // put -NaN first and -0.0 before +0.0, so keys are canonicalised first.
      auto canonical = [&](Value v) {
        Value zero = constant(r, 0, key, {});
        Value positive_nan = constant(r, std::numeric_limits<double>::quiet_NaN(), key, {});
        return select(r, compare(r, v, v, Direction::NE), positive_nan, select(r, compare(r, v, zero, Direction::EQ), zero, v));
      };
      x = canonical(x), y = canonical(y);
      attrs += ", compare_type = #stablehlo<comparison_type TOTALORDER>";
    }
    return std::vector<Value>{r.emit1("stablehlo.compare", {x, y}, Type(DType::Pred, {}), attrs)};
  });
  return b.emit("stablehlo.sort", operands, results,
                "dimension = " + std::to_string(dim) + " : i64, is_stable = " +
                    (stable ? "true" : "false"),
                {body});
}

std::vector<Value> rng_bit_generator(Builder& b, Value state, const Type& bits_type) {
  return b.emit("stablehlo.rng_bit_generator", {state}, {state.type, bits_type},
                "rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>");
}

}  // namespace tpu::hlo
