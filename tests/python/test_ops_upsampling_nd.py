"""1-D and 3-D nearest / nearest-exact, linear1d, trilinear3d and bicubic2d upsampling (and their
backwards) on tpu against PyTorch on the CPU."""
import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

from helpers import DEV, fallbacks, rand

NAN, INF = float("nan"), float("inf")


def check_grad(f, x, grad=True, **kw):
    def run(device):
        xs = x.detach().clone().to(device)
        if grad:
            xs.requires_grad_()
        y = f(xs)
        if not grad:
            return [y]
        up = torch.randn(y.shape, generator=torch.Generator().manual_seed(1)).to(y.dtype).to(device)
        (y * up).sum().backward()
        return [y, xs.grad]

    before = fallbacks()
    got = run(DEV)
    assert fallbacks() == before, fallbacks()
    for g, w in zip(got, run("cpu")):
        torch.testing.assert_close(g.detach().cpu(), w.detach(), equal_nan=True, **kw)


SIZES_1D = [dict(size=9), dict(size=3), dict(size=14), dict(scale_factor=2.5), dict(scale_factor=0.6),
            dict(scale_factor=2)]
SIZES_2D = [dict(size=(9, 4)), dict(size=(3, 11)), dict(scale_factor=(1.7, 2.0)), dict(scale_factor=0.5)]
SIZES_3D = [dict(size=(5, 9, 4)), dict(size=(2, 3, 11)), dict(scale_factor=(1.5, 2.0, 0.75)), dict(scale_factor=2)]


@pytest.mark.parametrize("kw", SIZES_1D)
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "linear"])
def test_upsample_1d(kw, mode):
    x = rand(2, 3, 7)
    check_grad(lambda t: F.interpolate(t, mode=mode, **kw), x)
    if mode == "linear":
        check_grad(lambda t: F.interpolate(t, mode=mode, align_corners=True, **kw), x)
        check_grad(lambda t: F.interpolate(t, mode=mode, recompute_scale_factor=True, **kw)
                   if "scale_factor" in kw else F.interpolate(t, mode=mode, **kw), x)


@pytest.mark.parametrize("kw", SIZES_3D)
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "trilinear"])
def test_upsample_3d(kw, mode):
    x = rand(2, 2, 3, 5, 6)
    check_grad(lambda t: F.interpolate(t, mode=mode, **kw), x)
    if mode == "trilinear":
        check_grad(lambda t: F.interpolate(t, mode=mode, align_corners=True, **kw), x)


@pytest.mark.parametrize("kw", SIZES_2D)
@pytest.mark.parametrize("align", [False, True])
def test_upsample_bicubic2d(kw, align):
    check_grad(lambda t: F.interpolate(t, mode="bicubic", align_corners=align, **kw), rand(2, 3, 5, 6))


def test_upsample_nd_dtypes_noncontiguous_nan():
    for dtype in (torch.float64, torch.bfloat16):
        x = rand(2, 3, 4, 5, dtype=dtype)
        # bf16: the CPU rounds intermediate sums to bf16, we accumulate in f32 and round once.
        tol = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
        check_grad(lambda t: F.interpolate(t, size=(7, 9), mode="bicubic"), x, **tol)
        check_grad(lambda t: F.interpolate(t[:, 0], size=11, mode="linear"), x, **tol)
        check_grad(lambda t: F.interpolate(t[:, :, None], scale_factor=2, mode="nearest"), x, **tol)
    xt = rand(2, 5, 4, 3).transpose(1, 3)  # non-contiguous
    check_grad(lambda t: F.interpolate(t, size=(6, 7), mode="bicubic"), xt)
    check_grad(lambda t: F.interpolate(t[..., None], size=(5, 7, 2), mode="trilinear"), xt)
    x = torch.tensor([[[1.0, NAN, 3.0, INF, -INF, 2.0]]])
    check_grad(lambda t: F.interpolate(t, size=9, mode="nearest"), x, grad=False)
    check_grad(lambda t: F.interpolate(t, size=4, mode="nearest-exact"), x, grad=False)
    check_grad(lambda t: F.interpolate(t, size=11, mode="linear"), x, grad=False)


def test_upsample_nd_empty_and_errors():
    check_grad(lambda t: F.interpolate(t, size=5, mode="linear"), torch.zeros(0, 2, 3), grad=False)
    # (an empty batch through upsample_nearest3d is not tested: PyTorch's meta kernel raises a
    # TypeError for it, so the engine hands it to the CPU)
    for f, x in [(lambda t: F.interpolate(t, size=0, mode="nearest"), rand(1, 2, 3)),
                 (lambda t: F.interpolate(t, size=(2, 0), mode="bicubic"), rand(1, 2, 3, 3)),
                 (lambda t: torch.ops.aten.upsample_nearest1d(t, [4]), rand(2, 3))]:
        with pytest.raises(Exception) as cpu:
            f(x)
        with pytest.raises(type(cpu.value)):
            f(x.to(DEV)).cpu()


def test_upsample_nd_in_compiled_graph():
    torch._dynamo.reset()

    def f(x):
        return (F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False),
                F.interpolate(x[:, :, None], size=(3, 5, 7), mode="trilinear"),
                F.interpolate(x[:, 0], size=11, mode="nearest"))

    x = rand(2, 3, 4, 5)
    before = fallbacks()
    got = torch.compile(f, backend="tpu", fullgraph=True)(x.to(DEV))
    assert fallbacks() == before, fallbacks()
    torch.testing.assert_close(tuple(t.cpu() for t in got), f(x))


AA_SIZES = [dict(size=(5, 7)), dict(size=(20, 30)), dict(size=(13, 4)), dict(scale_factor=0.37),
            dict(size=(6, 9), align_corners=True), dict(scale_factor=(0.5, 1.7), align_corners=True)]


@pytest.mark.parametrize("kw", AA_SIZES)
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialiased_resize(kw, mode):
    x = rand(2, 3, 13, 17)
    check_grad(lambda t: F.interpolate(t, mode=mode, antialias=True, **kw), x)


def test_antialiased_resize_nan_stays_local_and_float64():
    x = rand(1, 1, 12, 12)
    x[0, 0, 0, 0] = NAN
    x[0, 0, 11, 11] = INF
    for mode in ("bilinear", "bicubic"):
        check_grad(lambda t: F.interpolate(t, size=(4, 5), mode=mode, antialias=True), x, grad=False)
        check_grad(lambda t: F.interpolate(t, size=(4, 5), mode=mode, antialias=True), rand(2, 2, 9, 10, dtype=torch.float64))
