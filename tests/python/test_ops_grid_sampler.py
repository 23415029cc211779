"""F.grid_sample (grid_sampler_2d / grid_sampler_3d and their backwards) on tpu against PyTorch on
the CPU: every interpolation and padding mode, align_corners both ways, non-finite grids, odd
extents, empty batches, non-contiguous inputs, gradients of input and grid."""
import itertools
import re

import pytest
import torch
import torch.nn.functional as F

from helpers import DEV
from helpers import uniform as rand  # inputs and grids in [-scale, scale)

NAN, INF = float("nan"), float("inf")
MODES_2D = list(itertools.product(["bilinear", "nearest", "bicubic"], ["zeros", "border", "reflection"], [False, True]))
MODES_3D = list(itertools.product(["bilinear", "nearest"], ["zeros", "border", "reflection"], [False, True]))


def sample(x, grid, mode, pad, ac):
    return F.grid_sample(x, grid, mode=mode, padding_mode=pad, align_corners=ac)


def both(x, grid, mode, pad, ac, need_grad=True):
    """(output, input grad, grid grad) on tpu and on the CPU, for one upstream gradient."""
    res = []
    up = None
    for dev in (DEV, "cpu"):
        xs = x.detach().clone().to(dev).requires_grad_(need_grad)
        gs = grid.detach().clone().to(dev).requires_grad_(need_grad)
        out = sample(xs, gs, mode, pad, ac)
        if not need_grad:
            res.append([out])
            continue
        if up is None:
            up = rand(*out.shape, seed=7).to(out.dtype)
        out.backward(up.to(dev))
        res.append([out, xs.grad, gs.grad])
    return res


def assert_same(got, want, **kw):
    for g, w in zip(got, want):
        torch.testing.assert_close(g.detach().cpu(), w.detach(), equal_nan=True, **kw)


@pytest.mark.parametrize("mode,pad,ac", MODES_2D)
def test_grid_sample_2d_float64_forward_and_gradients(mode, pad, ac, no_fallbacks):
    # The grid reaches 1.3x past the borders so that every padding mode is exercised.
    x, grid = rand(2, 3, 5, 7, dtype=torch.float64), rand(2, 4, 6, 2, dtype=torch.float64, seed=1, scale=1.3)
    got, want = both(x, grid, mode, pad, ac)
    assert_same(got, want)


@pytest.mark.parametrize("mode,pad,ac", MODES_3D)
def test_grid_sample_3d_float64_forward_and_gradients(mode, pad, ac, no_fallbacks):
    x, grid = rand(2, 3, 4, 5, 6, dtype=torch.float64), rand(2, 3, 4, 5, 3, dtype=torch.float64, seed=1, scale=1.3)
    got, want = both(x, grid, mode, pad, ac)
    assert_same(got, want)


@pytest.mark.parametrize("mode,pad,ac", MODES_2D)
def test_grid_sample_2d_float32(mode, pad, ac, no_fallbacks):
    x, grid = rand(2, 3, 5, 7), rand(2, 4, 6, 2, seed=1, scale=1.3)
    got, want = both(x, grid, mode, pad, ac)
    assert_same(got[:2], want[:2])
    # The grid gradient sums value * weight' over 4-16 taps and all channels; the CPU's order of
    # that float32 sum differs from ours, which moves results of magnitude ~5 by up to ~1.5e-5.
    assert_same(got[2:], want[2:], rtol=1.3e-6, atol=5e-5)


@pytest.mark.parametrize("mode,pad,ac", MODES_3D)
def test_grid_sample_3d_float32(mode, pad, ac, no_fallbacks):
    x, grid = rand(1, 2, 3, 4, 5), rand(1, 2, 3, 4, 3, seed=1, scale=1.3)
    got, want = both(x, grid, mode, pad, ac)
    assert_same(got[:2], want[:2])
    assert_same(got[2:], want[2:], rtol=1.3e-6, atol=5e-5)  # as in the 2-D test


def nonfinite_grid(n, huge=True):
    vals = [NAN, INF, -INF, 1e10, -1e10, 0.3] if huge else [NAN, INF, -INF, 0.3]
    pts = [p for p in itertools.product(vals, repeat=n) if not all(v == 0.3 for v in p)]
    return torch.tensor(pts, dtype=torch.float32)


@pytest.mark.parametrize("mode,pad,ac", MODES_2D)
def test_grid_sample_2d_nonfinite_grid(mode, pad, ac, no_fallbacks):
    # The 2-D CPU kernel (vectorized): zeros padding gives NaN for a non-finite coordinate
    # (bilinear, bicubic), clipping maps NaN to 0. Forward only: the CPU's backward kernel
    # reads out of bounds for such grids (it crashes), so there is no reference for gradients.
    pts = nonfinite_grid(2)
    grid = pts.reshape(1, 1, -1, 2)
    x = rand(1, 2, 3, 4)
    got, want = both(x, grid, mode, pad, ac, need_grad=False)
    assert_same(got, want)


@pytest.mark.parametrize("mode,pad,ac", MODES_3D)
def test_grid_sample_3d_nonfinite_grid(mode, pad, ac, no_fallbacks):
    # The 3-D CPU kernel (scalar): out-of-bounds taps are skipped, clipping maps NaN to size - 1.
    # Reflection folds with fmod; XLA's remainder is not exact past 2^24 (docs/limits.md).
    grid = nonfinite_grid(3, huge=pad != "reflection").reshape(1, 1, 1, -1, 3)
    x = rand(1, 2, 3, 4, 5)
    got, want = both(x, grid, mode, pad, ac, need_grad=False)
    assert_same(got, want)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_nonfinite_input_values(mode, no_fallbacks):
    x = rand(1, 2, 4, 5)
    x[0, 0, 1, 2], x[0, 1, 3, 4], x[0, 0, 0, 0] = NAN, INF, -INF
    grid = rand(1, 5, 6, 2, seed=3, scale=1.2)
    got, want = both(x, grid, mode, "zeros", False)
    assert_same(got[:2], want[:2])
    assert_same(got[2:], want[2:], rtol=1.3e-6, atol=5e-5)  # as in test_grid_sample_2d_float32


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_bfloat16(mode, no_fallbacks):
    x, grid = rand(2, 3, 5, 7, dtype=torch.bfloat16), rand(2, 4, 6, 2, dtype=torch.bfloat16, seed=1, scale=1.2)
    got = sample(x.to(DEV), grid.to(DEV), mode, "border", False).cpu()
    want = sample(x, grid, mode, "border", False)
    # The CPU rounds every tap product and partial sum to bfloat16; we sum in float32 and round
    # once. Both are within a few bf16 ulps of the float32 result: compare against it.
    ref = sample(x.float(), grid.float(), mode, "border", False)
    torch.testing.assert_close(got.float(), ref, rtol=2 ** -7, atol=2 ** -7)
    assert got.dtype == want.dtype


def test_grid_sample_empty_and_odd_shapes(no_fallbacks):
    for x, grid in [(rand(0, 3, 4, 5), rand(0, 2, 3, 2)), (rand(2, 0, 4, 5), rand(2, 2, 3, 2)),
                    (rand(2, 3, 4, 5), rand(2, 0, 3, 2)), (rand(1, 1, 1, 1), rand(1, 3, 1, 2, scale=2)),
                    (rand(3, 1, 1, 7), rand(3, 1, 5, 2, scale=2)), (rand(1, 2, 1, 1, 1), rand(1, 2, 2, 1, 3, scale=2))]:
        for mode in ["bilinear", "nearest"]:
            got, want = both(x, grid, mode, "reflection", False)
            assert_same(got, want)


def test_grid_sample_non_contiguous(no_fallbacks):
    x = rand(2, 5, 3, 8)[:, :, ::2].transpose(2, 3)  # [2, 3, 8, 3], strided
    grid = rand(2, 2, 6, 4, seed=2)[..., 1:3].transpose(1, 2)  # [2, 6, 4, 2], strided
    got, want = both(x, grid, "bicubic", "border", True)
    assert_same(got[:2], want[:2])
    assert_same(got[2:], want[2:], rtol=1.3e-6, atol=5e-5)  # as in test_grid_sample_2d_float32


def test_grid_sample_only_grid_gradient(no_fallbacks):
    # output_mask = (False, True): a frozen input (spatial transformer on fixed images).
    x = rand(1, 2, 4, 4, dtype=torch.float64)
    grids = []
    for dev in (DEV, "cpu"):
        grid = rand(1, 3, 3, 2, dtype=torch.float64, seed=4).to(dev).requires_grad_()
        sample(x.to(dev), grid, "bilinear", "zeros", False).sum().backward()
        grids.append(grid.grad.cpu())
    torch.testing.assert_close(grids[0], grids[1])


@pytest.mark.parametrize("args", [
    (rand(2, 3, 4, 5), rand(1, 2, 2, 2), {}),                               # batch mismatch
    (rand(2, 3, 4, 5), rand(2, 2, 2, 3), {}),                               # grid's last dim
    (rand(2, 3, 4, 5, 6), rand(2, 2, 2, 2, 3), {"mode": "bicubic"}),       # bicubic 3-D
    (rand(2, 3, 4, 5), rand(2, 2, 2, 2, dtype=torch.float64), {}),          # dtype mismatch
    (torch.ones(1, 1, 2, 2, dtype=torch.int64), torch.zeros(1, 1, 1, 2, dtype=torch.int64), {}),  # integers
    (rand(1, 1, 0, 3), rand(1, 2, 2, 2), {}),                               # empty spatial dims
    (rand(0, 1, 2, 0, 3), rand(0, 2, 2, 2, 3), {}),
])
def test_grid_sample_invalid(args):
    x, grid, kw = args
    with pytest.raises(Exception) as cpu_err:
        F.grid_sample(x, grid, align_corners=False, **kw)
    # The CPU's message, or (for a grid of the wrong last dim) the one of PyTorch's own meta
    # kernel, which runs first on tpu and names the op.
    with pytest.raises(type(cpu_err.value), match=re.escape(str(cpu_err.value)[:40]) + "|grid_sampler_2d: .*grid last dim") as err:
        F.grid_sample(x.to(DEV), grid.to(DEV), align_corners=False, **kw)
    assert "At:" not in str(err.value)  # no Python traceback in the message


def test_grid_sample_bfloat16_gradients(no_fallbacks):
    x, grid = rand(1, 2, 5, 6, dtype=torch.bfloat16), rand(1, 3, 4, 2, dtype=torch.bfloat16, seed=1, scale=1.2)
    up = rand(1, 2, 3, 4, dtype=torch.bfloat16, seed=2)
    res = []
    for dtype, dev in ((torch.bfloat16, DEV), (torch.float32, "cpu")):
        xs = x.to(dtype).to(dev).requires_grad_()
        gs = grid.to(dtype).to(dev).requires_grad_()
        sample(xs, gs, "bilinear", "zeros", False).backward(up.to(dtype).to(dev))
        res.append((xs.grad.cpu(), gs.grad.cpu()))
    # We compute in float32 and round once: compare with the float32 gradients, rounded.
    for got, want in zip(*res):
        torch.testing.assert_close(got, want.bfloat16())


def test_spatial_transformer_training_step(no_fallbacks):
    # affine_grid + grid_sample: the gradient reaches the affine parameters through the grid.
    torch.manual_seed(0)
    theta = torch.tensor([[[0.9, 0.1, 0.05], [-0.1, 1.1, 0.0]]], dtype=torch.float64).repeat(2, 1, 1)
    x = rand(2, 3, 6, 7, dtype=torch.float64)
    grads = []
    for dev in (DEV, "cpu"):
        th = theta.to(dev).requires_grad_()
        grid = F.affine_grid(th, [2, 3, 5, 5], align_corners=False)
        out = F.grid_sample(x.to(dev), grid, align_corners=False)
        out.square().mean().backward()
        grads.append(th.grad.cpu())
    torch.testing.assert_close(grads[0], grads[1])


def test_grid_sample_compiled(no_fallbacks):
    def loss(x, grid):
        return F.grid_sample(x, grid, mode="bicubic", padding_mode="reflection", align_corners=False).square().sum()

    x, grid = rand(2, 3, 5, 6, dtype=torch.float64), rand(2, 4, 3, 2, dtype=torch.float64, seed=1, scale=1.2)
    grads = []
    for dev, f in ((DEV, torch.compile(loss, backend="tpu", fullgraph=True)), ("cpu", loss)):
        xs, gs = x.to(dev).requires_grad_(), grid.to(dev).requires_grad_()
        f(xs, gs).backward()
        grads.append((xs.grad.cpu(), gs.grad.cpu()))
    for got, want in zip(*grads):
        torch.testing.assert_close(got, want)
