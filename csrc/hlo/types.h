// Element types and tensor types of StableHLO, independent of torch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpu::hlo {

enum class DType : uint8_t { Pred, S8, S16, S32, S64, U8, U16, U32, U64, F16, BF16, F32, F64, C64, C128, F8E4M3FN, F8E5M2 };

const char* mlir_name(DType t);  // "i1", "f32", "ui8", "complex<f32>", ...
const char* torch_name(DType t);  // PyTorch's C++ names in error messages: "Bool", "Float", "Long", ...
int bit_width(DType t);
inline bool is_complex(DType t) { return t == DType::C64 || t == DType::C128; }
// The float8 types are storage formats: arithmetic on them goes through f32.
inline bool is_float8(DType t) { return t == DType::F8E4M3FN || t == DType::F8E5M2; }
inline bool is_float(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64 || is_float8(t);
}
inline bool is_unsigned(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}
inline bool is_integer(DType t) { return !is_float(t) && !is_complex(t) && t != DType::Pred; }
// Real part type of a complex type (identity otherwise).
DType real_part(DType t);
// The complex type with real part `t` (f32 -> complex<f32>, f64 -> complex<f64>).
DType complex_of(DType t);

struct Type {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  // >= 0: this dim is dynamic with the static extent as its bound
  // (`tensor<?x4xf32, #stablehlo.bounds<8, ?>>`); only set_dimension_size results carry it
  // (hlo/runtime_size.h).
  int bounded_dim = -1;

  Type() = default;
  Type(DType d, std::vector<int64_t> s) : dtype(d), shape(std::move(s)) {}
  int rank() const { return static_cast<int>(shape.size()); }
  int64_t numel() const;
  std::string str() const;  // "tensor<2x3xf32>"
  bool operator==(const Type& o) const { return dtype == o.dtype && shape == o.shape && bounded_dim == o.bounded_dim; }
  bool operator!=(const Type& o) const { return !(*this == o); }
};

}  // namespace tpu::hlo
