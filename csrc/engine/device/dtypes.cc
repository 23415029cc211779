#include "engine/device/dtypes.h"

#include <c10/util/Exception.h>

namespace tpu::engine {

using hlo::DType;

bool is_supported(c10::ScalarType t) {
  switch (t) {
    case c10::kBool: case c10::kByte: case c10::kChar: case c10::kShort: case c10::kInt:
    case c10::kLong: case c10::kHalf: case c10::kBFloat16: case c10::kFloat: case c10::kDouble:
    case c10::kComplexFloat: case c10::kComplexDouble: case c10::kUInt16: case c10::kUInt32:
    case c10::kUInt64: case c10::kFloat8_e4m3fn: case c10::kFloat8_e5m2:
      return true;
    default:
      return false;
  }
}

DType to_hlo(c10::ScalarType t, const char* op) {
  switch (t) {
    case c10::kBool: return DType::Pred;
    case c10::kByte: return DType::U8;
    case c10::kChar: return DType::S8;
    case c10::kShort: return DType::S16;
    case c10::kInt: return DType::S32;
    case c10::kLong: return DType::S64;
    case c10::kUInt16: return DType::U16;
    case c10::kUInt32: return DType::U32;
    case c10::kUInt64: return DType::U64;
    case c10::kHalf: return DType::F16;
    case c10::kBFloat16: return DType::BF16;
    case c10::kFloat: return DType::F32;
    case c10::kDouble: return DType::F64;
    case c10::kComplexFloat: return DType::C64;
    case c10::kComplexDouble: return DType::C128;
    case c10::kFloat8_e4m3fn: return DType::F8E4M3FN;
    case c10::kFloat8_e5m2: return DType::F8E5M2;
    default:
      TORCH_CHECK_TYPE(false, op, ": dtype ", t, " is not supported on the tpu device "
                       "(supported: bool, uint8, int8, int16, int32, int64, float16, bfloat16, "
                       "float32, float64, complex64, complex128, float8_e4m3fn, float8_e5m2)");
  }
}

c10::ScalarType to_torch(DType t) {
  switch (t) {
    case DType::Pred: return c10::kBool;
    case DType::U8: return c10::kByte;
    case DType::S8: return c10::kChar;
    case DType::S16: return c10::kShort;
    case DType::S32: return c10::kInt;
    case DType::S64: return c10::kLong;
    case DType::U16: return c10::kUInt16;
    case DType::U32: return c10::kUInt32;
    case DType::U64: return c10::kUInt64;
    case DType::F16: return c10::kHalf;
    case DType::BF16: return c10::kBFloat16;
    case DType::F32: return c10::kFloat;
    case DType::F64: return c10::kDouble;
    case DType::C64: return c10::kComplexFloat;
    case DType::C128: return c10::kComplexDouble;
    case DType::F8E4M3FN: return c10::kFloat8_e4m3fn;
    case DType::F8E5M2: return c10::kFloat8_e5m2;
  }
  return c10::kFloat;
}

pjrt::abi::BufferType to_pjrt(DType t) {
  using namespace pjrt::abi;
  switch (t) {
    case DType::Pred: return kPred;
    case DType::S8: return kS8;
    case DType::S16: return kS16;
    case DType::S32: return kS32;
    case DType::S64: return kS64;
    case DType::U8: return kU8;
    case DType::U16: return kU16;
    case DType::U32: return kU32;
    case DType::U64: return kU64;
    case DType::F16: return kF16;
    case DType::BF16: return kBF16;
    case DType::F32: return kF32;
    case DType::F64: return kF64;
    case DType::C64: return kC64;
    case DType::C128: return kC128;
    case DType::F8E4M3FN: return kF8E4M3FN;
    case DType::F8E5M2: return kF8E5M2;
  }
  return kInvalid;
}

}  // namespace tpu::engine
