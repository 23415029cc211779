"""Comparison helpers shared by the op-family tests (device result vs PyTorch CPU)."""
import torch

import torch_tpu

DEV = "tpu"


def fallbacks():
    """CPU fallbacks so far in this process (not cleared by torch_tpu.metrics.reset())."""
    return dict(torch_tpu._C._fallback_counts_since_start())


def executables_built():
    """Executables this process has compiled or loaded from the disk cache. "No new compile"
    checks count both: a disk-cache load stands for a compile on a machine with a cold cache, and
    counting compiles alone passes vacuously wherever an earlier run filled the cache."""
    stats = torch_tpu._C._cache_stats()
    return stats["compiles"] + stats["disk_hits"]


def executables_waited_for():
    """executables_built() less fused eager's programs built on its worker thread, which no call
    waits for (docs/eager_modes.md): the two are equal outside fused eager's background policy."""
    fused = torch_tpu._C._fused_stats()
    return executables_built() - fused["background_compiled"] - fused["background_loaded"]


def rand(*shape, dtype=torch.float32, seed=0, low=-20, high=20, scale=1.0, offset=0.0):
    """Seeded inputs of `shape`, the same on every run and host (the seed is offset by the
    extents, so two shapes differ): normal values (`scale` * N(0, 1) + `offset`), integers in
    [low, high), or bools."""
    g = torch.Generator().manual_seed(seed + sum(shape))
    if dtype == torch.bool:
        return torch.rand(*shape, generator=g) > 0.5
    if dtype.is_floating_point or dtype.is_complex:
        values = torch.randn(*shape, generator=g)
        if scale != 1.0 or offset != 0.0:
            values = values * scale + offset
        return values.to(dtype)
    return torch.randint(low, high, shape, generator=g, dtype=dtype)


def uniform(*shape, dtype=torch.float32, seed=0, scale=1.0):
    """Seeded values uniform in [-scale, scale) (sampling grids, coordinates), seeded as rand."""
    g = torch.Generator().manual_seed(seed + sum(shape))
    return (torch.rand(*shape, generator=g) * 2 - 1).mul(scale).to(dtype)


def close(a, b, dtype=None, **kw):
    """assert_close of a tpu result (or tuple of them) against the CPU result; bf16/fp16 loose."""
    if isinstance(a, (tuple, list)):
        for x, y in zip(a, b):
            close(x, y, dtype, **kw)
        return
    if dtype in (torch.bfloat16, torch.float16):
        kw.setdefault("atol", 2e-2)
        kw.setdefault("rtol", 2e-2)
    torch.testing.assert_close(a.cpu(), b, equal_nan=True, **kw)


def check(f, *xs, dtype=None, **kw):
    """f on tpu copies of xs equals f on xs, without a CPU fallback."""
    before = fallbacks()
    close(f(*[x.to(DEV) for x in xs]), f(*xs), dtype, **kw)
    assert fallbacks() == before, fallbacks()
