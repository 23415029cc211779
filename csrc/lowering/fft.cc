// Discrete Fourier transforms: _fft_r2c, _fft_c2r, _fft_c2c (what torch.fft.* calls after its
// argument handling: padding/trimming to `n`, dims and norm are resolved by the frontend).
//
// Each transformed dim is moved last and run through a 1-D stablehlo.fft, one dim at a time
// (the transform is separable); 64-bit transforms use matrix-product DFTs instead (dft.h). `normalization` is PyTorch's fft_norm_mode: 0 none, 1 by
// 1/sqrt(n), 2 by 1/n, where n is the product of the transformed signal sizes. stablehlo's
// IFFT/IRFFT already divide by their length, so the scale applied is the mode's factor times
// the lengths of the inverse transforms.
//
// c2r, like PyTorch's CPU kernel, assumes a Hermitian last dim: the imaginary parts of the
// zero-frequency term (and of the Nyquist term for an even length) do not contribute.
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "lowering/dft.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// The CPU's (MKL) kernels take float32/float64 and their complex types only; its error, raised
// here: a fallback to that kernel crashed on an expanded bfloat16 input.
void check_dtype(DType t) {
  if (t != DType::F32 && t != DType::F64 && t != DType::C64 && t != DType::C128) {
    throw InvalidCall(std::string("MKL FFT doesn't support tensors of type: ") + torch_name(t));
  }
}

// 64-bit transforms along the last dim through dft_last_dim (libtpu has no 64-bit FFT).
Value fft_last_dim_64(Builder& b, Value t, const std::string& kind, int64_t length, DType result) {
  if (kind == "FFT" || kind == "IFFT") return dft_last_dim(b, t, kind == "IFFT");
  int64_t r = t.rank();
  std::vector<int64_t> zero(r, 0), step(r, 1);
  if (kind == "RFFT") {
    Value y = dft_last_dim(b, convert(b, t, complex_of(t.dtype())), false);
    std::vector<int64_t> lim = y.shape();
    lim.back() = length / 2 + 1;
    return slice(b, y, zero, lim, step);
  }
  // IRFFT: the full spectrum from its Hermitian half, X[k] = conj(X[n - k]) for k > n / 2.
  std::vector<int64_t> start = zero, lim = t.shape();
  start.back() = 1;
  lim.back() = length - length / 2;
  std::vector<int64_t> half_lim = t.shape();
  half_lim.back() = length / 2 + 1;
  Value full = slice(b, t, zero, half_lim, step);
  if (lim.back() > 1) {
    Value upper = slice(b, t, start, lim, step);
    DType rt = real_part(t.dtype());
    Value re = real(b, upper);
    Value im = unary(b, Unary::Negate, imag(b, upper));
    Value conj = reverse(b, complex(b, re, im), {r - 1});
    full = concatenate(b, {full, conj}, r - 1);
  }
  Value y = dft_last_dim(b, full, true);
  return real(b, y);
}

// 1-D transform of `x` along `dim`: fft_type FFT, IFFT, RFFT or IRFFT; `length` is the
// transform length (the output length for IRFFT).
Value fft1(Builder& b, Value x, int64_t dim, const std::string& kind, int64_t length, DType result) {
  int64_t r = x.rank();
  std::vector<int64_t> perm(r);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[dim], perm[r - 1]);  // a swap is its own inverse
  Value t = transpose(b, x, perm);
  if (result == DType::F64 || result == DType::C128) return transpose(b, fft_last_dim_64(b, t, kind, length, result), perm);
  std::vector<int64_t> shape = t.shape();
  if (kind == "RFFT") shape.back() = length / 2 + 1;
  if (kind == "IRFFT") shape.back() = length;
  Value y = b.emit1("stablehlo.fft", {t}, Type(result, shape),
                    "fft_type = #stablehlo<fft_type " + kind + ">, fft_length = " + i64_array({length}));
  return transpose(b, y, perm);
}

Value scale(Builder& b, Value x, double factor) {
  if (factor == 1.0) return x;
  return mul(b, x, constant(b, factor, x.dtype(), x.shape()));
}

// The mode's factor for a transform over `n` points. A mode other than 0 (none) and 1
// (by_root_n) scales by 1/n, as the CPU's MKL backend does for any value it is given.
double norm_factor(int64_t mode, double n) {
  if (n == 0 || mode == 0) return 1.0;
  if (mode == 1) return 1.0 / std::sqrt(n);
  return 1.0 / n;
}

// Dims as given (their order is kept; the last one is the halved one for r2c/c2r).
std::vector<int64_t> fft_dims(const Context& c, size_t i, int64_t rank) {
  std::vector<int64_t> dims;
  for (int64_t d : c.ints(i)) dims.push_back(wrap_dim(d, rank));
  return dims;
}

bool empty(const Type& t) { return t.numel() == 0; }

// _fft_c2c(self, dim, normalization, forward)
std::vector<Value> fft_c2c(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  check_dtype(x.dtype());
  const Type& out = c.out();
  if (empty(out)) return {zeros(b, out)};
  DType t = complex_of(x.dtype());
  x = convert(b, x, t);
  std::vector<int64_t> dims = fft_dims(c, 1, x.rank());
  bool forward = c.bool_arg(3);
  double n = 1;
  for (int64_t d : dims) {
    int64_t len = x.shape()[d];
    n *= static_cast<double>(len);
    x = fft1(b, x, d, forward ? "FFT" : "IFFT", len, t);
  }
  double factor = norm_factor(c.int_arg(2), n) * (forward ? 1.0 : n);
  return {convert(b, scale(b, x, factor), out.dtype)};
}

// _fft_r2c(self, dim, normalization, onesided)
std::vector<Value> fft_r2c(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  check_dtype(x.dtype());
  const Type& out = c.out();
  bool onesided = c.bool_arg(3);
  std::vector<int64_t> dims = fft_dims(c, 1, x.rank());
  // The CPU fills the two-sided spectrum's mirrored half in the out= tensor itself, a complex
  // kernel (nothing to mirror: an empty result or a last dim of at most 2).
  bool mirrors = !onesided && !empty(out) && x.shape()[dims.back()] > 2;
  require_dtype(!mirrors || is_complex(out.dtype), "_fft_fill_with_conjugate_symmetry", out.dtype);
  if (empty(out)) return {zeros(b, out)};
  DType t = complex_of(x.dtype());
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(x.shape()[d]);
  if (!onesided) {
    x = convert(b, x, t);
    for (int64_t d : dims) x = fft1(b, x, d, "FFT", x.shape()[d], t);
  } else {
    int64_t last = dims.back();
    x = fft1(b, x, last, "RFFT", x.shape()[last], t);
    for (size_t i = 0; i + 1 < dims.size(); ++i) x = fft1(b, x, dims[i], "FFT", x.shape()[dims[i]], t);
  }
  // The transform's own type, then out='s (a real out keeps the real parts, as the CPU's copy).
  return {convert(b, scale(b, x, norm_factor(c.int_arg(2), n)), out.dtype)};
}

// _fft_c2r(self, dim, normalization, last_dim_size)
std::vector<Value> fft_c2r(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  check_dtype(x.dtype());
  const Type& out = c.out();
  if (empty(out)) return {zeros(b, out)};
  DType ct = complex_of(x.dtype());
  x = convert(b, x, ct);
  std::vector<int64_t> dims = fft_dims(c, 1, x.rank());
  int64_t last = dims.back();
  int64_t length = c.int_arg(3);
  double n = static_cast<double>(length);
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    int64_t len = x.shape()[dims[i]];
    n *= static_cast<double>(len);
    x = fft1(b, x, dims[i], "IFFT", len, ct);
  }
  // The last dim holds length/2 + 1 Hermitian terms (trimmed or zero-padded to that).
  int64_t half = length / 2 + 1, have = x.shape()[last];
  if (have > half) {
    std::vector<int64_t> lim = x.shape();
    lim[last] = half;
    x = slice(b, x, std::vector<int64_t>(x.rank(), 0), lim, std::vector<int64_t>(x.rank(), 1));
  } else if (have < half) {
    std::vector<int64_t> hi(x.rank(), 0);
    hi[last] = half - have;
    x = pad(b, x, constant(b, 0, ct), std::vector<int64_t>(x.rank(), 0), hi, std::vector<int64_t>(x.rank(), 0));
  }
  // Only the real parts of the zero-frequency and (even length) Nyquist terms count.
  DType rt = real_part(ct);
  Value re = real(b, x);
  Value im = imag(b, x);
  Value pos = iota(b, Type(DType::S64, x.shape()), last);
  Value drop = compare(b, pos, constant(b, 0, DType::S64, x.shape()), Direction::EQ);
  if (length % 2 == 0) {
    drop = binary(b, Binary::Or, drop,
                  compare(b, pos, constant(b, static_cast<double>(length / 2), DType::S64, x.shape()), Direction::EQ));
  }
  im = select(b, drop, zeros(b, im.type), im);
  x = complex(b, re, im);
  Value y = fft1(b, x, last, "IRFFT", length, rt);
  return {convert(b, scale(b, y, norm_factor(c.int_arg(2), n) * n), out.dtype)};
}

const Registrar registrar({
    {"_fft_c2c", fft_c2c},
    {"_fft_r2c", fft_r2c},
    {"_fft_c2r", fft_c2r},
});

}  // namespace
}  // namespace tpu::lowering
