// Typed helpers that emit StableHLO ops through a Builder and infer result types.
#pragma once

#include <string>
#include <vector>

#include "hlo/builder.h"

namespace tpu::hlo {

// Constants (splat scalars, broadcast to `shape`).
Value constant(Builder& b, double value, DType dtype, const std::vector<int64_t>& shape = {});
Value constant_i64_vector(Builder& b, const std::vector<int64_t>& values, DType dtype = DType::S64);
// A 1-D constant of real floating-point values (printed with full precision).
Value constant_float_vector(Builder& b, const std::vector<double>& values, DType dtype);
Value zeros(Builder& b, const Type& type);

// Element-wise ops, named by enumerators so that a misspelt op is a compile error.
enum class Unary {
  Abs, Ceil, Cosine, Exponential, ExponentialMinusOne, Floor, Imag, IsFinite, Log, LogPlusOne,
  Logistic, Negate, Not, Real, RoundNearestEven, Rsqrt, Sign, Sine, Sqrt, Tan, Tanh,
  // CHLO ops: the plugins decompose them into StableHLO when they legalise the module.
  Acos, Acosh, Asin, Asinh, Atanh, Cosh, Digamma, Erf, Erfc, ErfInv, Lgamma, Sinh,
};
enum class Binary {
  Add, Subtract, Multiply, Divide, Remainder, Power, Maximum, Minimum, Atan2,
  And, Or, Xor, ShiftLeft, ShiftRightLogical, ShiftRightArithmetic,
};
enum class Direction { EQ, NE, LT, LE, GT, GE };
// "stablehlo.abs", "chlo.erf", "EQ"...
const char* op_name(Unary op);
const char* op_name(Binary op);
const char* direction_name(Direction direction);

// The result has x's type, except: Abs, Real and Imag of a complex value give its real type,
// IsFinite gives i1.
Value unary(Builder& b, Unary op, Value x);
Value binary(Builder& b, Binary op, Value x, Value y);  // same shapes and types
Value real(Builder& b, Value x);
Value imag(Builder& b, Value x);
Value complex(Builder& b, Value re, Value im);          // re, im real of one type
Value add(Builder& b, Value x, Value y);
Value sub(Builder& b, Value x, Value y);
Value mul(Builder& b, Value x, Value y);
Value div(Builder& b, Value x, Value y);
Value max(Builder& b, Value x, Value y);
Value min(Builder& b, Value x, Value y);
Value neg(Builder& b, Value x);
Value convert(Builder& b, Value x, DType dtype);  // no-op when already `dtype`
Value bitcast_convert(Builder& b, Value x, DType dtype);
// An f32 value rounded to a float8 type as PyTorch rounds it (float8.cc).
Value to_float8(Builder& b, Value x, DType dtype);
Value compare(Builder& b, Value x, Value y, Direction direction);
Value select(Builder& b, Value pred, Value on_true, Value on_false);
Value is_nan(Builder& b, Value x);                   // x != x
Value logical_and(Builder& b, Value x, Value y);     // i1 (or bitwise on integers)
Value logical_or(Builder& b, Value x, Value y);
Value clamp(Builder& b, Value lo, Value x, Value hi);

// Shapes.
Value reshape(Builder& b, Value x, const std::vector<int64_t>& shape);
Value transpose(Builder& b, Value x, const std::vector<int64_t>& permutation);
Value broadcast_in_dim(Builder& b, Value x, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& dims);
// NumPy-style broadcast of `x` to `shape` (trailing dimensions aligned).
Value broadcast_to(Builder& b, Value x, const std::vector<int64_t>& shape);
std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b);
Value slice(Builder& b, Value x, const std::vector<int64_t>& start,
            const std::vector<int64_t>& limit, const std::vector<int64_t>& strides);
Value dynamic_slice(Builder& b, Value x, const std::vector<Value>& starts,
                    const std::vector<int64_t>& sizes);
Value dynamic_update_slice(Builder& b, Value x, Value update, const std::vector<Value>& starts);
Value concatenate(Builder& b, const std::vector<Value>& xs, int64_t dim);
Value pad(Builder& b, Value x, Value pad_value, const std::vector<int64_t>& low,
          const std::vector<int64_t>& high, const std::vector<int64_t>& interior);
Value iota(Builder& b, const Type& type, int64_t dim);
Value reverse(Builder& b, Value x, const std::vector<int64_t>& dims);

// Reductions: `kind` is "add", "mul", "max", "min", "and", "or".
Value reduce(Builder& b, Value x, const std::vector<int64_t>& dims, const std::string& kind);
// The op combining two elements in a reduction of `kind` (on i1: "add"/"max" are Or, "mul"/"min" And),
// and a scalar region applying it (the body of reduce, reduce_window and collectives).
Binary reduction_op(const std::string& kind, DType dtype);
std::string scalar_region(Builder& b, DType dtype, Binary op);
// Identity element of a reduction kind for dtype.
Value reduction_init(Builder& b, const std::string& kind, DType dtype);
Value reduce_window(Builder& b, Value x, const std::string& kind, const std::vector<int64_t>& window,
                    const std::vector<int64_t>& strides, const std::vector<std::pair<int64_t, int64_t>>& padding);

// Linear algebra.
Value dot_general(Builder& b, Value lhs, Value rhs, const std::vector<int64_t>& lhs_batch,
                  const std::vector<int64_t>& rhs_batch, const std::vector<int64_t>& lhs_contract,
                  const std::vector<int64_t>& rhs_contract, DType result);

// Indexing.
struct GatherDims {
  std::vector<int64_t> offset_dims, collapsed_slice_dims, start_index_map;
  int64_t index_vector_dim = 0;
};
Value gather(Builder& b, Value operand, Value indices, const GatherDims& dims,
             const std::vector<int64_t>& slice_sizes, const std::vector<int64_t>& result_shape);
struct ScatterDims {
  std::vector<int64_t> update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims;
  int64_t index_vector_dim = 0;
};
// combine: "" (replace), "add", "mul", "max", "min".
Value scatter(Builder& b, Value operand, Value indices, Value updates, const ScatterDims& dims,
              const std::string& combine);

// Sort along `dim`; operands sorted together by the first one's order (comparison LT/GT,
// NaN ordered last like PyTorch). Returns all operands sorted.
std::vector<Value> sort(Builder& b, const std::vector<Value>& operands, int64_t dim, bool descending,
                        bool stable);

// Random bits: state is tensor<2xui64>; returns {new_state, bits}.
std::vector<Value> rng_bit_generator(Builder& b, Value state, const Type& bits_type);

}  // namespace tpu::hlo
