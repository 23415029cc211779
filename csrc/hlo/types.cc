#include "hlo/types.h"

#include <stdexcept>

namespace tpu::hlo {

const char* mlir_name(DType t) {
  switch (t) {
    case DType::Pred: return "i1";
    case DType::S8: return "i8";
    case DType::S16: return "i16";
    case DType::S32: return "i32";
    case DType::S64: return "i64";
    case DType::U8: return "ui8";
    case DType::U16: return "ui16";
    case DType::U32: return "ui32";
    case DType::U64: return "ui64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::C64: return "complex<f32>";
    case DType::C128: return "complex<f64>";
    case DType::F8E4M3FN: return "f8E4M3FN";
    case DType::F8E5M2: return "f8E5M2";
  }
  return "?";
}

const char* torch_name(DType t) {
  switch (t) {
    case DType::Pred: return "Bool";
    case DType::S8: return "Char";
    case DType::S16: return "Short";
    case DType::S32: return "Int";
    case DType::S64: return "Long";
    case DType::U8: return "Byte";
    case DType::U16: return "UInt16";
    case DType::U32: return "UInt32";
    case DType::U64: return "UInt64";
    case DType::F16: return "Half";
    case DType::BF16: return "BFloat16";
    case DType::F32: return "Float";
    case DType::F64: return "Double";
    case DType::C64: return "ComplexFloat";
    case DType::C128: return "ComplexDouble";
    case DType::F8E4M3FN: return "Float8_e4m3fn";
    case DType::F8E5M2: return "Float8_e5m2";
  }
  return "?";
}

int bit_width(DType t) {
  switch (t) {
    case DType::Pred: return 8;
    case DType::S8: case DType::U8: case DType::F8E4M3FN: case DType::F8E5M2: return 8;
    case DType::S16: case DType::U16: case DType::F16: case DType::BF16: return 16;
    case DType::S32: case DType::U32: case DType::F32: return 32;
    case DType::S64: case DType::U64: case DType::F64: case DType::C64: return 64;
    case DType::C128: return 128;
  }
  return 0;
}

DType real_part(DType t) {
  if (t == DType::C64) return DType::F32;
  if (t == DType::C128) return DType::F64;
  return t;
}

DType complex_of(DType t) {
  if (t == DType::F32 || t == DType::C64) return DType::C64;
  if (t == DType::F64 || t == DType::C128) return DType::C128;
  throw std::logic_error(std::string("no complex type has real part ") + mlir_name(t));
}

int64_t Type::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string Type::str() const {
  std::string s = "tensor<";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (static_cast<int>(i) == bounded_dim ? std::string("?") : std::to_string(shape[i])) + "x";
  }
  s += mlir_name(dtype);
  if (bounded_dim >= 0) {
    s += ", #stablehlo.bounds<";
    for (size_t i = 0; i < shape.size(); ++i) {
      s += (i ? ", " : "") + (static_cast<int>(i) == bounded_dim ? std::to_string(shape[i]) : std::string("?"));
    }
    s += ">";
  }
  return s + ">";
}

}  // namespace tpu::hlo
