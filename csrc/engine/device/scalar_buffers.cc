#include "engine/device/scalar_buffers.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e5m2.h>
#include <c10/util/Half.h>
#include <c10/util/complex.h>

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "engine/device/dtypes.h"
#include "engine/device/runtime.h"

namespace tpu::engine {
namespace {

constexpr size_t kMaxCached = 4096;
std::mutex g_mu;
std::map<std::tuple<int, int, uint64_t, uint64_t>, std::shared_ptr<pjrt::Buffer>> g_cache;

template <class T>
void put(uint8_t* out, T v) {
  std::memcpy(out, &v, sizeof(T));
}

// Host bytes of `value` as one element of `dtype`.
size_t encode(hlo::DType dtype, const c10::Scalar& value, uint8_t* out) {
  using hlo::DType;
  switch (dtype) {
    case DType::Pred: put<uint8_t>(out, value.toBool()); return 1;
    case DType::S8: put<int8_t>(out, static_cast<int8_t>(value.toLong())); return 1;
    case DType::U8: put<uint8_t>(out, static_cast<uint8_t>(value.toLong())); return 1;
    case DType::S16: put<int16_t>(out, static_cast<int16_t>(value.toLong())); return 2;
    case DType::U16: put<uint16_t>(out, static_cast<uint16_t>(value.toLong())); return 2;
    case DType::S32: put<int32_t>(out, static_cast<int32_t>(value.toLong())); return 4;
    case DType::U32: put<uint32_t>(out, static_cast<uint32_t>(value.toLong())); return 4;
    case DType::S64: put<int64_t>(out, value.toLong()); return 8;
    case DType::U64: put<uint64_t>(out, static_cast<uint64_t>(value.toLong())); return 8;
    case DType::F16: put<c10::Half>(out, c10::Half(static_cast<float>(value.toDouble()))); return 2;
    case DType::BF16: put<c10::BFloat16>(out, c10::BFloat16(static_cast<float>(value.toDouble()))); return 2;
    case DType::F32: put<float>(out, static_cast<float>(value.toDouble())); return 4;
    case DType::F64: put<double>(out, value.toDouble()); return 8;
    case DType::C64: put<c10::complex<float>>(out, c10::complex<float>(value.toComplexDouble())); return 8;
    case DType::C128: put<c10::complex<double>>(out, value.toComplexDouble()); return 16;
    case DType::F8E4M3FN: put<c10::Float8_e4m3fn>(out, c10::Float8_e4m3fn(static_cast<float>(value.toDouble()))); return 1;
    case DType::F8E5M2: put<c10::Float8_e5m2>(out, c10::Float8_e5m2(static_cast<float>(value.toDouble()))); return 1;
  }
  return 0;
}

}  // namespace

std::shared_ptr<pjrt::Buffer> scalar_buffer(int device, hlo::DType dtype, const c10::Scalar& value) {
  uint8_t bytes[16] = {0};
  encode(dtype, value, bytes);
  uint64_t lo, hi;
  std::memcpy(&lo, bytes, 8);
  std::memcpy(&hi, bytes + 8, 8);
  auto key = std::make_tuple(device, static_cast<int>(dtype), lo, hi);
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_cache.find(key);
  if (it != g_cache.end()) return it->second;
  if (g_cache.size() >= kMaxCached) g_cache.clear();
  auto buffer = std::shared_ptr<pjrt::Buffer>(
      runtime().client().buffer_from_host(bytes, to_pjrt(dtype), {}, device));
  g_cache.emplace(key, buffer);
  return buffer;
}

std::shared_ptr<pjrt::Buffer> key_buffer(int device, uint64_t seed, uint64_t offset) {
  uint64_t key[2] = {seed, offset};
  return std::shared_ptr<pjrt::Buffer>(
      runtime().client().buffer_from_host(key, pjrt::abi::kU64, {2}, device));
}

}  // namespace tpu::engine
