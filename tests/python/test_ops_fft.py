"""torch.fft on tpu (_fft_r2c, _fft_c2r, _fft_c2c) against PyTorch on the CPU."""
import pytest
import torch
import torch._dynamo

from helpers import DEV, check, fallbacks

NORMS = [None, "forward", "ortho", "backward"]


def cplx(*shape, dtype=torch.complex64):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    return torch.randn(*shape, dtype=dtype, generator=g)  # non-zero imaginary parts


def real(*shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(7 * sum(shape) + len(shape))
    return torch.randn(*shape, dtype=dtype, generator=g)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_fft_ifft_c2c(norm, dtype):
    x = cplx(3, 7, dtype=dtype)
    check(lambda t: torch.fft.fft(t, norm=norm), x)
    check(lambda t: torch.fft.ifft(t, norm=norm), x)
    check(lambda t: torch.fft.fft(t, dim=0, norm=norm), x)
    check(lambda t: torch.fft.fft(t, n=10, norm=norm), x)  # zero-padded
    check(lambda t: torch.fft.ifft(t, n=4, dim=-2, norm=norm), x)  # trimmed
    check(lambda t: torch.fft.fft2(t, norm=norm), x)
    check(lambda t: torch.fft.ifftn(t, norm=norm), cplx(2, 3, 5, dtype=dtype))
    check(lambda t: torch.fft.fftn(t, dim=(2, 0), norm=norm), cplx(2, 3, 5, dtype=dtype))


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rfft_and_real_input_fft(norm, dtype):
    x = real(4, 9, dtype=dtype)
    check(lambda t: torch.fft.rfft(t, norm=norm), x)
    check(lambda t: torch.fft.rfft(t, n=6, dim=0, norm=norm), x)
    check(lambda t: torch.fft.rfft2(t, norm=norm), x)
    check(lambda t: torch.fft.rfftn(t, dim=(1, 0), norm=norm), x)  # the halved dim is the last listed
    check(lambda t: torch.fft.fft(t, norm=norm), x)  # r2c with onesided=False
    check(lambda t: torch.fft.fftn(t, norm=norm), real(3, 4, 5, dtype=dtype))
    check(lambda t: torch.fft.ihfft(t, norm=norm), x)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("n", [None, 8, 9, 1])
def test_irfft_c2r(norm, n):
    x = cplx(3, 5)  # imaginary parts of the DC (and Nyquist) terms are set: they must be ignored
    check(lambda t: torch.fft.irfft(t, n=n, norm=norm), x)
    check(lambda t: torch.fft.irfft(t, n=n, dim=0, norm=norm), x)
    check(lambda t: torch.fft.hfft(t, n=n, norm=norm), x)
    check(lambda t: torch.fft.irfft2(t, norm=norm), cplx(4, 6))
    check(lambda t: torch.fft.irfftn(t, s=(5, 7), norm=norm), cplx(4, 6, dtype=torch.complex128))


# 64-bit transforms are matrix-product DFTs (libtpu has no 64-bit FFT; lowering/dft.h): short
# and prime lengths (one matrix), composite lengths split by Cooley-Tukey (64 = 8 x 8,
# 210 = 14 x 15, 4096 = 64 x 64 with a twiddle computed in the module), primes above 64 (97,
# 1031), odd Hermitian halves for irfft.
@pytest.mark.parametrize("n", [1, 2, 5, 64, 97, 210, 1031, 4096])
def test_64_bit_transforms_of_many_lengths(n):
    z = cplx(2, n, dtype=torch.complex128)
    x = real(2, n, dtype=torch.float64)
    check(lambda t: torch.fft.fft(t), z)
    check(lambda t: torch.fft.ifft(t, norm="ortho"), z)
    check(lambda t: torch.fft.rfft(t), x)
    if n > 1:
        check(lambda t: torch.fft.irfft(t, n=n), torch.fft.rfft(x))
        check(lambda t: torch.fft.hfft(t, n=n), z[:, : n // 2 + 1])


def test_64_bit_transforms_with_nan():
    # A NaN reaches every output of its transform through the matrix product (NaN * 0 is NaN),
    # where the CPU's FFT multiplies by exact +-1/+-i and keeps some parts finite (docs/limits.md).
    # Rows without NaN are unaffected.
    z = cplx(3, 12, dtype=torch.complex128)
    z[0, 3] = complex(float("nan"), 0)
    out = torch.fft.fft(z.to(DEV)).cpu()
    assert out[0].real.isnan().all() and out[0].imag.isnan().all()
    torch.testing.assert_close(out[1:], torch.fft.fft(z[1:]))


def test_roundtrips_and_helpers():
    x = real(6, 10)
    check(lambda t: torch.fft.irfft(torch.fft.rfft(t), n=10), x)
    check(lambda t: torch.fft.ifft2(torch.fft.fft2(t)).real, x)
    check(lambda t: torch.fft.fftshift(torch.fft.fft(t)), x)
    check(lambda t: torch.fft.fft(t.T), x)  # non-contiguous input
    check(lambda t: torch.fft.fft(t[:, ::3]), x.to(torch.complex64))
    check(lambda t: torch.fft.rfft(t), torch.tensor([1.0, float("nan"), 2.0, float("inf")]))
    check(lambda t: torch.fft.fft(t), torch.tensor([float("-inf"), 1.0, 2.0], dtype=torch.complex64))


def test_integer_input_promotes():
    check(lambda t: torch.fft.fft(t), torch.arange(6))
    check(lambda t: torch.fft.rfft(t), torch.arange(7))


def test_empty():
    # PyTorch's CPU (MKL) raises for empty batches ("Inconsistent configuration parameters"), an
    # artifact of MKL; CUDA returns empty results, and so does the tpu.
    before = fallbacks()
    assert torch.fft.fft(torch.zeros(0, 4, dtype=torch.complex64, device=DEV), dim=1).cpu().shape == (0, 4)
    assert torch.fft.rfft(torch.zeros(0, 4, device=DEV), dim=1).cpu().shape == (0, 3)
    assert torch.fft.irfft(torch.zeros(0, 3, dtype=torch.complex64, device=DEV), dim=1).cpu().shape == (0, 4)
    assert fallbacks() == before, fallbacks()


def test_errors_match_cpu():
    for f, x in [(lambda t: torch.fft.fft(t, dim=2), real(3, 4)),
                 (lambda t: torch.fft.fft(t, n=0), real(3)),
                 (lambda t: torch.fft.rfft(t), cplx(4)),  # rfft of complex input
                 (lambda t: torch.fft.fft(t), real(4).bfloat16())]:
        with pytest.raises(Exception) as cpu:
            f(x)
        with pytest.raises(type(cpu.value)):
            f(x.to(DEV)).cpu()


def test_fft_gradients():
    x = real(4, 6)
    z = cplx(4, 4)

    def run(dev):
        a = x.to(dev).requires_grad_()
        c = z.to(dev).requires_grad_()
        loss = (torch.fft.rfft(a).abs().sum() + torch.fft.irfft(c, n=6).pow(2).sum()
                + torch.fft.fft2(c).real.sum() + torch.fft.ifft(c, norm="ortho").imag.sum())
        loss.backward()
        return a.grad, c.grad

    before = fallbacks()
    got, want = run(DEV), run("cpu")
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w)
    assert fallbacks() == before, fallbacks()


def test_fft_in_compiled_graph():
    torch._dynamo.reset()

    def f(x):
        spec = torch.fft.rfft(x, norm="ortho")
        return torch.fft.irfft(spec * 2, n=x.shape[-1], norm="ortho"), torch.fft.fft2(spec).abs()

    x = real(3, 12)
    before = fallbacks()
    got = torch.compile(f, backend="tpu", fullgraph=True)(x.to(DEV))
    want = f(x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w)
    assert fallbacks() == before, fallbacks()
