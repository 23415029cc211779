// Discrete Fourier transforms as matrix products, for the lengths and types stablehlo.fft cannot
// serve on every backend: libtpu has no 64-bit FFT ("Unexpected operand type for FFT: c128"),
// so float64/complex128 transforms are built from complex matmuls, which it compiles.
#pragma once

#include "hlo/builder.h"

namespace tpu::lowering {

// The DFT of complex `x` along its last dim (unnormalized; `inverse` uses e^{+2 pi i jk/n} and
// divides by n, like stablehlo's IFFT). Composite lengths split into two shorter transforms
// and a twiddle product (Cooley-Tukey, one level per call), so the matrices stay O(sqrt n)
// wide; a prime length above kMaxDirectLength is NotLowerable.
hlo::Value dft_last_dim(hlo::Builder& b, hlo::Value x, bool inverse);

constexpr int64_t kMaxDirectLength = 4096;

}  // namespace tpu::lowering
