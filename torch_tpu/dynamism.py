"""Bounded dynamism (docs/bucketing.md): sizes that change from call to call run over buckets.

A prompt's token ids are bucketed as they reach the device; `mark_dynamic` does the same for any
tensor, and `no_new_compiles` asserts that a warmed-up loop compiles nothing.
"""
import contextlib

import torch

from . import _C


def mark_dynamic(tensor: torch.Tensor, dim: int, min: int = None, max: int = None) -> torch.Tensor:
    """Marks `tensor`'s dim `dim` as varying between calls (as Google's TorchTPU names it).

    The tensor (a tpu tensor that owns its storage) moves into a bucket of the next power of two
    >= 128 rows along `dim`, the true size a runtime value: the ops that read it compile once per
    bucket, not once per size, and their results are exact. `min`/`max` bound the sizes the
    caller promises; a size outside them, or min > max, raises ValueError. Moving a tensor
    that already lives on the device costs one pad (compiled once per size); token ids copied
    from the host are bucketed without it. Returns `tensor`.
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"mark_dynamic: expected a tensor, got {type(tensor).__name__}")
    if tensor.dim() == 0:
        raise ValueError("mark_dynamic: a 0-d tensor has no dim to mark")
    if not -tensor.dim() <= dim < tensor.dim():
        raise IndexError(f"mark_dynamic: dim {dim} is out of range for a tensor of shape {tuple(tensor.shape)}")
    dim %= tensor.dim()
    size = tensor.shape[dim]
    if min is not None and max is not None and min > max:
        raise ValueError(f"mark_dynamic: min ({min}) is greater than max ({max})")
    if (min is not None and size < min) or (max is not None and size > max):
        raise ValueError(f"mark_dynamic: dim {dim} has size {size}, outside the bounds [{min}, {max}] "
                         f"(shape {tuple(tensor.shape)})")
    _C._mark_dynamic(tensor, dim)
    return tensor


class NewCompileError(RuntimeError):
    """Something compiled inside `torch.tpu.no_new_compiles()`."""


def _executables_built():
    # A load from the disk cache counts: it is a compile wherever the cache is cold.
    stats = _C._cache_stats()
    return stats["compiles"] + stats["disk_hits"]


@contextlib.contextmanager
def no_new_compiles():
    """Raises NewCompileError at the end of the block if anything compiled in it (a warmed-up
    serving or training loop should not), naming what compiled again and why."""
    before = _executables_built()
    fused_before = _C._fused_stats()
    reasons_before = dict(_C._recompile_reasons())
    yield
    compiled = _executables_built() - before
    if compiled:
        fused = _C._fused_stats()
        fused_programs = fused["compiles"] - fused_before["compiles"]
        reasons = {r: n - reasons_before.get(r, 0) for r, n in _C._recompile_reasons().items()
                   if n > reasons_before.get(r, 0)}
        lines = [f"{compiled} executable(s) compiled (or loaded from the disk cache) inside no_new_compiles()"]
        if reasons:
            lines.append("recompiled (first reasons):")
            lines += [f"  {r}" for r in list(reasons)[:10]]
        else:
            lines.append("no op compiled again: these are first compiles of new ops or graphs")
        if fused_programs:
            queued = fused["background_compiles"] - fused_before["background_compiles"]
            lines.append(f"{fused_programs} of them fused eager programs (new stream signatures"
                         + (f"; {queued} queued for the background compiler" if queued else "")
                         + "): TORCH_TPU_FUSED_TRACE=1 shows each stream's signature")
        raise NewCompileError("\n".join(lines))
