#include "lowering/dft.h"

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "hlo/ops.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// Matrices up to this many entries are module constants; larger ones are computed in the module.
constexpr int64_t kMaxConstantEntries = 16384;

// The rows x cols matrix e^{-+2 pi i (j k mod n) / n}, j < rows, k < cols, of complex type
// `ct`. The product is reduced mod n in integers before the angle is formed, so large indices
// lose no precision. Small matrices are constants computed here in double, which keeps 64-bit
// trigonometry and integer arithmetic (emulated on a TPU, slow to compile) out of the module.
Value roots_of_unity(Builder& b, int64_t rows, int64_t cols, int64_t n, bool inverse, DType ct) {
  DType rt = real_part(ct);
  Value real, imag;
  if (rows * cols <= kMaxConstantEntries) {
    std::vector<double> re, im;
    for (int64_t j = 0; j < rows; ++j) {
      for (int64_t k = 0; k < cols; ++k) {
        double angle = 2 * M_PI * static_cast<double>((j * k) % n) / static_cast<double>(n);
        re.push_back(std::cos(angle));
        im.push_back(inverse ? std::sin(angle) : -std::sin(angle));
      }
    }
    real = reshape(b, constant_float_vector(b, re, rt), {rows, cols});
    imag = reshape(b, constant_float_vector(b, im, rt), {rows, cols});
  } else {
    Type index(DType::S64, {rows, cols});
    Value product = mul(b, iota(b, index, 0), iota(b, index, 1));
    Value reduced = binary(b, Binary::Remainder, product, constant(b, static_cast<double>(n), DType::S64, {rows, cols}));
    Value angle = mul(b, convert(b, reduced, rt), constant(b, 2 * M_PI / static_cast<double>(n), rt, {rows, cols}));
    real = unary(b, Unary::Cosine, angle);
    imag = unary(b, Unary::Sine, angle);
    if (!inverse) imag = unary(b, Unary::Negate, imag);
  }
  return complex(b, real, imag);
}

// Unnormalized DFT along the last dim.
Value dft(Builder& b, Value x, bool inverse) {
  std::vector<int64_t> shape = x.shape();
  int64_t r = x.rank(), n = shape.back();
  if (n <= 1) return x;
  int64_t n1 = static_cast<int64_t>(std::sqrt(static_cast<double>(n)));
  while (n1 > 1 && n % n1 != 0) --n1;
  if (n1 == 1 || n <= 64) {  // prime (or short): one matrix product
    if (n > kMaxDirectLength) {
      throw NotLowerable("64-bit FFT of prime length " + std::to_string(n) + " (above " +
                         std::to_string(kMaxDirectLength) + ")");
    }
    return dot_general(b, x, roots_of_unity(b, n, n, n, inverse, x.dtype()), {}, {}, {r - 1}, {0}, x.dtype());
  }
  // n = n1 * n2, input index j = n2 * j1 + j2, output index k = k1 + n1 * k2.
  int64_t n2 = n / n1;
  std::vector<int64_t> split = shape;
  split.back() = n1;
  split.push_back(n2);
  Value z = reshape(b, x, split);  // [..., j1, j2]
  std::vector<int64_t> swap(r + 1);
  std::iota(swap.begin(), swap.end(), 0);
  std::swap(swap[r - 1], swap[r]);
  z = transpose(b, dft(b, transpose(b, z, swap), inverse), swap);  // over j1: [..., k1, j2]
  Value twiddle = roots_of_unity(b, n1, n2, n, inverse, x.dtype());
  std::vector<int64_t> last_two{r - 1, r};
  z = mul(b, z, broadcast_in_dim(b, twiddle, z.shape(), last_two));
  z = dft(b, z, inverse);                      // over j2: [..., k1, k2]
  return reshape(b, transpose(b, z, swap), shape);  // k = k1 + n1 * k2
}

}  // namespace

Value dft_last_dim(Builder& b, Value x, bool inverse) {
  Value y = dft(b, x, inverse);
  int64_t n = x.shape().back();
  if (!inverse || n <= 1) return y;
  return mul(b, y, constant(b, 1.0 / static_cast<double>(n), y.dtype(), y.shape()));
}

}  // namespace tpu::lowering
