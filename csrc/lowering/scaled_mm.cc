// _scaled_mm and _scaled_mm_v2: the float8 matmul, computed as PyTorch's CPU kernel computes it
// (ATen/native/Blas.cpp, _scaled_mm_out_cpu_emulated): both operands to float32 times their
// scales (one per tensor, or one per row of self and per column of mat2), a float32 matmul,
// plus bias; a float8 result given as out_dtype is divided by scale_result first. The engine
// checked the arguments (engine/eager/scaled_mm_meta.cc).
#include <vector>

#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// operand * scale: a scale of one element multiplies everything, a row-wise one (scale_a [M, 1],
// scale_b [1, N]) multiplies dimension `dim` of the [rows, cols] operand.
Value scaled(Builder& b, Value x, Value scale, int64_t dim) {
  Value s = convert(b, scale, DType::F32);
  int64_t n = s.type.numel();
  Value flat = reshape(b, s, n == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{n});
  std::vector<int64_t> dims = n == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{dim};
  return mul(b, x, broadcast_in_dim(b, flat, x.shape(), dims));
}

// The product of self and mat2 scaled, plus bias, in float32.
Value scaled_product(Context& c, Value scale_a, Value scale_b, size_t bias_arg) {
  Builder& b = c.b;
  Value x = scaled(b, convert(b, c.tensor(0), DType::F32), scale_a, 0);
  Value y = scaled(b, convert(b, c.tensor(1), DType::F32), scale_b, 1);
  Value r = dot_general(b, x, y, {}, {}, {1}, {0}, DType::F32);
  if (c.has(bias_arg)) {  // added in place to the float32 product: a double bias adds in double
    DType t = c.tensor(bias_arg).dtype() == DType::F64 ? DType::F64 : DType::F32;
    r = convert(b, add(b, convert(b, r, t), cast_to(b, c.tensor(bias_arg), t, c.out().shape)), DType::F32);
  }
  return r;
}

// _scaled_mm(self, mat2, scale_a, scale_b, bias?, scale_result?, out_dtype?, use_fast_accum)
std::vector<Value> scaled_mm(Context& c) {
  Builder& b = c.b;
  const Type& out = c.out();
  Value r = scaled_product(c, c.tensor(2), c.tensor(3), 4);
  // The CPU divides by scale_result only for a float8 out_dtype that was given (its default
  // for this test is bfloat16, even though the result then is self's float8 type). A given
  // out_dtype is the result's dtype (checked by the engine).
  if (c.has(5) && c.has(6) && is_float8(out.dtype)) {
    Value s = reshape(b, convert(b, c.tensor(5), DType::F32), {});
    Value inverse = div(b, constant(b, 1.0, DType::F32), s);  // 1 / output_scale in float, as the CPU
    r = mul(b, r, broadcast_in_dim(b, inverse, out.shape, {}));
  }
  return {convert(b, r, out.dtype)};
}

// _scaled_mm_v2(self, mat2, scale_a[], recipe_a[], swizzle_a[], scale_b[], recipe_b[], swizzle_b[],
// bias?, out_dtype?, contraction_dim[], use_fast_accum)
std::vector<Value> scaled_mm_v2(Context& c) {
  const Type& out = c.out();
  // An empty operand gives zeros without the bias: the CPU returns before computing.
  if (out.numel() == 0 || c.tensor(0).shape()[1] == 0) return {zeros(c.b, out)};
  Value r = scaled_product(c, c.arg(2).tensors.at(0), c.arg(5).tensors.at(0), 8);
  return {convert(c.b, r, out.dtype)};
}

const Registrar registrar({
    {"_scaled_mm", scaled_mm},
    {"_scaled_mm_v2", scaled_mm_v2},
});

}  // namespace
}  // namespace tpu::lowering
