"""`torch.tpu`: the device module, mirroring `torch.cuda`."""
from __future__ import annotations

import contextlib
from typing import Any

import torch

from . import _C

_initialized = False
_on_first_init: list = []


def _lazy_init() -> None:
    global _initialized
    if _initialized:
        return
    _C._init()  # loads the PJRT plugin; raises a clear error when there is none
    _initialized = True
    for fn in _on_first_init:
        fn()


def init() -> None:
    _lazy_init()


def is_initialized() -> bool:
    return _initialized


def is_available() -> bool:
    return _C._is_configured() and _C._device_count() > 0


def device_count() -> int:
    return _C._device_count()


def current_device() -> int:
    return _C._current_device()


def _index(device: Any) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "tpu":
        raise ValueError(f"expected a tpu device, got {device}")
    return current_device() if device.index is None else device.index


def set_device(device: Any) -> None:
    _lazy_init()
    _C._set_device(_index(device))


class device:
    """Context manager that changes the current tpu device."""

    def __init__(self, device: Any):
        self.idx = _index(device) if device is not None else -1
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = current_device()
        if self.idx >= 0 and self.idx != self.prev_idx:
            set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0 and self.prev_idx != self.idx:
            set_device(self.prev_idx)
        return False


def synchronize(device: Any = None) -> None:
    _lazy_init()
    _C._synchronize(-1 if device is None else _index(device))


def get_device_name(device: Any = None) -> str:
    _lazy_init()
    return f"tpu (PJRT {_C._platform_name()}: {_C._device_kind(_index(device))})"


class _DeviceProperties:
    def __init__(self, index: int):
        self.index = index
        self.name = get_device_name(index)
        self.platform = _C._platform_name()
        self.platform_version = _C._platform_version()
        self.device_kind = _C._device_kind(index)
        self.pjrt_version = _C._pjrt_version()
        stats = _C._memory_stats(index)
        self.total_memory = stats["device_bytes_limit"]

    def __repr__(self):
        return (f"_TpuDeviceProperties(name='{self.name}', platform='{self.platform}', "
                f"pjrt={self.pjrt_version}, total_memory={self.total_memory})")


def get_device_properties(device: Any = None) -> _DeviceProperties:
    _lazy_init()
    return _DeviceProperties(_index(device))


def get_device_capability(device: Any = None) -> tuple:
    return (0, 0)


# Memory: bytes held by live tpu storages (what the user's tensors occupy).
def memory_stats(device: Any = None) -> dict:
    _lazy_init()
    return _C._memory_stats(_index(device))


def memory_allocated(device: Any = None) -> int:
    return _C._memory_allocated(_index(device))


def max_memory_allocated(device: Any = None) -> int:
    return _C._max_memory_allocated(_index(device))


def memory_reserved(device: Any = None) -> int:
    return memory_allocated(device)


def max_memory_reserved(device: Any = None) -> int:
    return max_memory_allocated(device)


def reset_peak_memory_stats(device: Any = None) -> None:
    _C._reset_peak_memory(_index(device))


def reset_max_memory_allocated(device: Any = None) -> None:
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    """Device buffers are freed with their last tensor; there is no cache to empty."""


# Random numbers: one default generator per device.
def default_generator(index: int = -1) -> torch.Generator:
    return _C._default_generator(_index(None if index < 0 else index))


def manual_seed(seed: int) -> None:
    default_generator(current_device()).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for i in range(max(device_count(), 1)):
        default_generator(i).manual_seed(int(seed))


def seed() -> None:
    default_generator(current_device()).seed()


def seed_all() -> None:
    for i in range(max(device_count(), 1)):
        default_generator(i).seed()


def initial_seed() -> int:
    return default_generator(current_device()).initial_seed()


def get_rng_state(device: Any = None) -> torch.Tensor:
    return default_generator(_index(device)).get_state()


def get_rng_state_all() -> list:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device: Any = None) -> None:
    default_generator(_index(device)).set_state(new_state)


def set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def get_amp_supported_dtype() -> list:
    return [torch.bfloat16, torch.float16]


def _is_in_bad_fork() -> bool:
    return False


def _get_cache_stats() -> dict:
    return _C._cache_stats()


# Streams and events. A tpu device executes in one order (PJRT orders work by its buffers'
# dependencies), so every stream is that one queue: waits between streams are already satisfied
# and events complete in order. These exist because stream-aware code (FSDP2, DDP, accelerate)
# asks the device module for them.
def Stream(device: Any = None, priority: int = 0) -> torch.Stream:  # noqa: N802 (torch.cuda.Stream's name)
    return torch.Stream(device=torch.device("tpu", _index(device)), priority=priority)


def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> torch.Event:  # noqa: N802
    return torch.Event(device="tpu", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


def current_stream(device: Any = None) -> torch.Stream:
    return torch.Stream(device=torch.device("tpu", _index(device)))


default_stream = current_stream


def set_stream(stream: torch.Stream) -> None:
    """Selects the device of `stream`; there is one queue per device."""
    if stream is not None:
        set_device(stream.device_index)


@contextlib.contextmanager
def stream(s: torch.Stream | None):
    with device(s.device if s is not None else None):
        yield s


def no_new_compiles():
    """`with torch.tpu.no_new_compiles():` raises torch_tpu.dynamism.NewCompileError at the end of
    the block if anything compiled in it, naming what recompiled and why (docs/bucketing.md)."""
    from .dynamism import no_new_compiles as _no_new_compiles
    return _no_new_compiles()


# Eager modes (docs/eager_modes.md): "strict" launches one executable per op; "fused" records
# ops and runs them as one program at the next host read, sync, op it cannot record or loop
# boundary; "debug" is strict with every launch waited for (TPU_LAUNCH_BLOCKING=1).
def get_eager_mode() -> str:
    return _C._eager_mode()


def set_eager_mode(mode: str) -> None:
    """Runs the ops recorded so far, then switches to `mode` ("strict" | "fused" | "debug")."""
    _C._set_eager_mode(mode)


@contextlib.contextmanager
def eager_mode(mode: str):
    """`with torch.tpu.eager_mode("fused"):` runs the block in `mode`, then restores the mode."""
    previous = get_eager_mode()
    set_eager_mode(mode)
    try:
        yield
    finally:
        set_eager_mode(previous)
