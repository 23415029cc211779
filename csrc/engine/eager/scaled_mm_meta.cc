// The results of _scaled_mm and _scaled_mm_v2 from their arguments as meta tensors, checked in
// the order and with the exception types of PyTorch's CPU kernels (ATen/native/Blas.cpp,
// _scaled_mm_out_cpu and _scaled_mm_cpu_v2_out), which accept any layout and extent: the scales
// are tensor-wise (one float each) or row-wise (scale_a [M, 1], scale_b [1, N], float).
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <sstream>

#include "engine/eager/op_adapters.h"
#include "lowering/registry.h"

namespace tpu::engine {
namespace {

bool tensorwise(const at::Tensor& t, const at::Tensor& scale) {
  return at::isFloat8Type(t.scalar_type()) && scale.scalar_type() == at::kFloat && scale.numel() == 1;
}

bool rowwise(const at::Tensor& t, const at::Tensor& scale) {
  return at::isFloat8Type(t.scalar_type()) && scale.scalar_type() == at::kFloat && scale.dim() == 2 &&
         scale.size(0) == t.size(0) && scale.size(1) == 1 && scale.is_contiguous();
}

[[noreturn]] void invalid_scaling(const char* op, const at::Tensor& a, const at::Tensor& b, const at::Tensor& sa,
                                  const at::Tensor& sb) {
  auto scale = [](const char* name, const at::Tensor& t) {
    std::ostringstream s;
    if (!t.defined()) return s << name << "=None", s.str();
    s << name << ".dtype()=" << t.scalar_type() << ", " << name << ".size()=" << t.sizes() << ", " << name
      << ".stride()=" << t.strides();
    return s.str();
  };
  TORCH_CHECK_VALUE(false, op, ": Invalid scaling configuration.\n"
                    "- For TensorWise scaling, a and b should be float8, scales should be float and singletons.\n"
                    "- For RowWise scaling, a and b should be float8, scales should be float, scale_a should be (",
                    a.size(0), ", 1) and scale_b should be (1, ", b.size(1), "), and both should be contiguous.\n",
                    "Got mat_a.dtype()=", a.scalar_type(), ", ", scale("scale_a", sa), ", mat_b.dtype()=",
                    b.scalar_type(), ", ", scale("scale_b", sb));
}

// The bias is added in place to the float32 [M, N] product.
void check_bias(const char* op, const at::Tensor& bias, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> broadcast = at::infer_size(sizes, bias.sizes());
  TORCH_CHECK(broadcast == sizes, op, ": output with shape ", c10::IntArrayRef(sizes),
              " doesn't match the broadcast shape ", c10::IntArrayRef(broadcast));
  c10::ScalarType sum = c10::promoteTypes(at::kFloat, bias.scalar_type());
  TORCH_CHECK(c10::canCast(sum, at::kFloat), op, ": result type ", sum, " can't be cast to the desired output type Float");
}

// The CPU's row-wise checks after the recipe was chosen; scales that then broadcast in another
// way than [M, 1] x [1, N] take the CPU path (its product shapes follow broadcasting).
void check_rowwise_scales(const char* op, const at::Tensor& a, const at::Tensor& b, const at::Tensor& sa,
                          const at::Tensor& sb) {
  TORCH_CHECK_VALUE(sa.stride(1) == 1, op, ": expected scale_a.stride(1) to be 1, but got ", sa.stride(1));
  TORCH_CHECK_VALUE(sb.stride(1) == 1, op, ": expected scale_b.stride(1) to be 1, but got ", sb.stride(1));
  if (sa.sizes() != c10::IntArrayRef{a.size(0), 1} || sb.sizes() != c10::IntArrayRef{1, b.size(1)}) {
    throw lowering::NotLowerable(std::string(op) + ": row-wise scales of another shape");
  }
}

void push_result(torch::jit::Stack* stack, size_t n, bool out_overload, const at::Tensor& like,
                 c10::ScalarType dtype, const std::vector<int64_t>& sizes) {
  at::Tensor r = out_overload ? (*stack)[stack->size() - 1].toTensor() : at::empty(sizes, like.options().dtype(dtype));
  if (out_overload && r.sizes() != c10::IntArrayRef(sizes)) r.resize_(sizes);
  torch::jit::drop(*stack, n);
  stack->push_back(r);
}

}  // namespace

// _scaled_mm(self, mat2, scale_a, scale_b, bias?, scale_result?, out_dtype?, use_fast_accum)
// and its .out overload (out last).
void scaled_mm_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  size_t n = op.schema().arguments().size();
  size_t first = stack->size() - n;
  auto arg = [&](size_t i) -> const c10::IValue& { return (*stack)[first + i]; };
  at::Tensor a = arg(0).toTensor(), b = arg(1).toTensor(), sa = arg(2).toTensor(), sb = arg(3).toTensor();
  at::Tensor bias = arg(4).isNone() ? at::Tensor() : arg(4).toTensor();
  at::Tensor scale_result = arg(5).isNone() ? at::Tensor() : arg(5).toTensor();
  std::optional<c10::ScalarType> out_dtype;
  if (!arg(6).isNone()) out_dtype = static_cast<c10::ScalarType>(arg(6).toInt());
  bool out_overload = n > 8;
  at::Tensor out = out_overload ? arg(8).toTensor() : at::Tensor();
  c10::ScalarType result = out_overload ? out.scalar_type() : out_dtype.value_or(a.scalar_type());

  TORCH_CHECK_VALUE(!out_dtype || *out_dtype == result, "_scaled_mm: out_dtype must match output matrix type");
  bool by_tensor = tensorwise(a, sa) && tensorwise(b.t(), sb.t());
  if (!by_tensor && !(rowwise(a, sa) && rowwise(b.t(), sb.t()))) invalid_scaling("_scaled_mm", a, b, sa, sb);
  TORCH_CHECK(a.dim() == 2, "_scaled_mm: mat1 must be a matrix");
  TORCH_CHECK(b.dim() == 2, "_scaled_mm: mat2 must be a matrix");
  TORCH_CHECK(a.size(1) == b.size(0), "_scaled_mm: mat_a and mat_b shapes cannot be multiplied (", a.size(0), "x",
              a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  if (!by_tensor) check_rowwise_scales("_scaled_mm", a, b, sa, sb);
  TORCH_CHECK(!scale_result.defined() || (scale_result.numel() == 1 && scale_result.scalar_type() == at::kFloat),
              "_scaled_mm: scale_result must be a float scalar");
  TORCH_CHECK(!bias.defined() || bias.numel() == b.size(1), "_scaled_mm: Bias must be size ", b.size(1), " but got ",
              bias.numel());
  std::vector<int64_t> sizes{a.size(0), b.size(1)};
  if (bias.defined()) check_bias("_scaled_mm", bias, sizes);
  push_result(stack, n, out_overload, a, result, sizes);
}

// _scaled_mm_v2(self, mat2, scale_a[], recipe_a[], swizzle_a[], scale_b[], recipe_b[], swizzle_b[],
// bias?, out_dtype?, contraction_dim[], use_fast_accum) and its .out overload (out last).
void scaled_mm_v2_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const char* name = "_scaled_mm_v2";
  size_t n = op.schema().arguments().size();
  size_t first = stack->size() - n;
  auto arg = [&](size_t i) -> const c10::IValue& { return (*stack)[first + i]; };
  at::Tensor a = arg(0).toTensor(), b = arg(1).toTensor();
  std::vector<at::Tensor> scales_a = arg(2).toTensorVector(), scales_b = arg(5).toTensorVector();
  std::vector<int64_t> recipe_a = arg(3).toIntVector(), swizzle_a = arg(4).toIntVector();
  std::vector<int64_t> recipe_b = arg(6).toIntVector(), swizzle_b = arg(7).toIntVector();
  at::Tensor bias = arg(8).isNone() ? at::Tensor() : arg(8).toTensor();
  std::optional<c10::ScalarType> out_dtype;
  if (!arg(9).isNone()) out_dtype = static_cast<c10::ScalarType>(arg(9).toInt());
  std::vector<int64_t> contraction = arg(10).toIntVector();
  bool out_overload = n > 12;
  c10::ScalarType result = out_overload ? arg(12).toTensor().scalar_type() : out_dtype.value_or(a.scalar_type());

  TORCH_CHECK_VALUE(a.dim() == 2, name, ": mat_a must be a matrix");
  TORCH_CHECK_VALUE(b.dim() == 2, name, ": mat_b must be a matrix");
  std::vector<int64_t> sizes{a.size(0), b.size(1)};
  if (a.size(0) == 0 || a.size(1) == 0 || b.size(1) == 0) {  // zeros, before any other check
    push_result(stack, n, out_overload, a, result, sizes);
    return;
  }
  if (!contraction.empty()) {
    TORCH_CHECK_VALUE(contraction.size() == 2, name, ": contraction_dim must have exactly 2 elements");
    TORCH_CHECK_VALUE(a.size(contraction[0]) == b.size(contraction[1]), name,
                      ": mat_a and mat_b shapes cannot be multiplied (", a.size(0), "x", a.size(1), " and ", b.size(0),
                      "x", b.size(1), ") with contraction dims mat_a: ", contraction[0], ", mat_b: ", contraction[1]);
  } else {
    TORCH_CHECK_VALUE(a.size(1) == b.size(0), name, ": mat_a and mat_b shapes cannot be multiplied (", a.size(0), "x",
                      a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  }
  TORCH_CHECK_VALUE(!bias.defined() || bias.numel() == b.size(1), name, ": Bias must be size ", b.size(1), " but got ",
                    bias.numel());
  TORCH_CHECK_VALUE(!out_dtype || *out_dtype == result, name, ": out_dtype must match output matrix type");
  if (bias.defined()) {
    c10::ScalarType t = bias.scalar_type();
    TORCH_CHECK_VALUE(t == at::kFloat || t == at::kBFloat16 || t == at::kHalf, name,
                      ": Bias must be Float32 or BFloat16 or Half, but got ", t);
  }
  if (!swizzle_a.empty() && !swizzle_b.empty()) {
    TORCH_CHECK_VALUE(swizzle_a[0] == 0 && swizzle_b[0] == 0, name, ": CPU does not support swizzle.");
  }
  // The CPU's recipes: one float scale per operand, both TensorWise (0) or both RowWise (1).
  auto recipe = [&](int64_t kind) {
    return at::isFloat8Type(a.scalar_type()) && at::isFloat8Type(b.scalar_type()) && scales_a.size() == 1 &&
           recipe_a.size() == 1 && scales_b.size() == 1 && recipe_b.size() == 1 && recipe_a[0] == kind &&
           recipe_b[0] == kind && scales_a[0].scalar_type() == at::kFloat && scales_b[0].scalar_type() == at::kFloat;
  };
  bool by_tensor = recipe(0);
  if (!by_tensor && !recipe(1)) {
    invalid_scaling(name, a, b, scales_a.empty() ? at::Tensor() : scales_a[0],
                    scales_b.empty() ? at::Tensor() : scales_b[0]);
  }
  const at::Tensor& sa = scales_a[0];
  const at::Tensor& sb = scales_b[0];
  TORCH_CHECK(a.size(1) == b.size(0), name, ": mat_a and mat_b shapes cannot be multiplied (", a.size(0), "x",
              a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  if (by_tensor) {
    TORCH_CHECK_VALUE(sa.numel() == 1, name, ": scale_a must have 1 Float element");
    TORCH_CHECK_VALUE(sb.numel() == 1, name, ": scale_b must have 1 Float element");
  } else {
    try {  // scales of fewer than 2 dims fail on their size(1)/stride(1) as on the CPU
      TORCH_CHECK_VALUE(sa.size(0) == a.size(0) && sa.size(1) == 1, name, ": scale_a must have shape [",
                        a.size(0), ", 1], got [", sa.sizes(), "]");
      TORCH_CHECK_VALUE(sa.numel() == a.size(0), name, ": scale_a must have ", a.size(0), " Float elements, got ",
                        sa.numel());
      TORCH_CHECK_VALUE(sb.numel() == b.size(1), name, ": scale_b must have ", b.size(1), " Float elements, got ",
                        sb.numel());
      check_rowwise_scales(name, a, b, sa, sb);
    } catch (const c10::IndexError& e) {
      TORCH_CHECK_INDEX(false, name, ": ", e.what_without_backtrace());
    }
  }
  if (bias.defined()) check_bias(name, bias, sizes);
  push_result(stack, n, out_overload, a, result, sizes);
}

}  // namespace tpu::engine
