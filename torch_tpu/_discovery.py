"""Which PJRT plugin runs under the `tpu` device (docs/ARCHITECTURE.md, "Plugin selection").

Order: TORCH_TPU_PJRT_PLUGIN=/path.so (or =cuda: JAX's CUDA PJRT plugin wheel, the closest device
with its own memory that is not a TPU); libtpu when a TPU chip is on the PCI bus (never loaded
otherwise: it can hang querying cloud metadata); else the XLA CPU plugin. Under torchrun on a TPU
VM each process is given one chip before libtpu loads (_tpu_host.py).
"""
from __future__ import annotations

import importlib.util
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from . import _tpu_host

# CPU plugin wheels, newest PJRT first; TORCH_TPU_CPU_PLUGIN=<module> picks one explicitly.
CPU_PLUGINS = (
    ("lammps_jax_pjrt_cpu", "pjrt_c_api_cpu_plugin.so"),
    ("xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt.so"),
)


# JAX's CUDA PJRT plugin wheels (jax-cuda13-pjrt, jax-cuda12-pjrt), newest first.
CUDA_PLUGINS = (
    ("jax_plugins.xla_cuda13", "xla_cuda_plugin.so"),
    ("jax_plugins.xla_cuda12", "xla_cuda_plugin.so"),
)


@dataclass
class Plugin:
    path: str
    kind: str  # "cpu", "tpu", "cuda", "custom"
    reason: str


def tpu_on_pci_bus() -> bool:
    return bool(_tpu_host.tpu_chips())


def _place_this_process(chips_on_host: int) -> None:
    """Under torchrun, one chip per process (_tpu_host.py); before libtpu loads."""
    variables, problem = _tpu_host.one_chip_per_process_env(os.environ, chips_on_host)
    for name, value in variables.items():
        os.environ.setdefault(name, value)
    if problem:
        warnings.warn(f"torch-tpu: chips not assigned to this process: {problem}", RuntimeWarning, stacklevel=3)


def _module_dir(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def libtpu_path() -> str | None:
    env = os.environ.get("TPU_LIBRARY_PATH")
    if env and os.path.isfile(env):
        return env
    d = _module_dir("libtpu")
    if d is not None and (d / "libtpu.so").is_file():
        return str(d / "libtpu.so")
    return None


def cpu_plugin_path() -> str | None:
    wanted = os.environ.get("TORCH_TPU_CPU_PLUGIN")
    for module, filename in CPU_PLUGINS:
        if wanted and module != wanted:
            continue
        d = _module_dir(module)
        if d is not None and (d / filename).is_file():
            return str(d / filename)
    return None


def cuda_plugin_path() -> str | None:
    for module, filename in CUDA_PLUGINS:
        d = _module_dir(module)
        if d is not None and (d / filename).is_file():
            return str(d / filename)
    return None


def gpu_memory_fraction() -> float:
    """TORCH_TPU_GPU_MEMORY_FRACTION: the share of GPU memory the CUDA plugin may grow to
    (0 < f <= 1); 0 leaves the plugin's default."""
    value = os.environ.get("TORCH_TPU_GPU_MEMORY_FRACTION", "")
    if not value:
        return 0.0
    try:
        fraction = float(value)
    except ValueError:
        fraction = -1.0
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"TORCH_TPU_GPU_MEMORY_FRACTION must be a number in (0, 1], got {value!r}")
    return fraction


def find_plugin() -> Plugin | None:
    override = os.environ.get("TORCH_TPU_PJRT_PLUGIN")
    if override == "cuda":
        path = cuda_plugin_path()
        if path is None:
            raise RuntimeError("TORCH_TPU_PJRT_PLUGIN=cuda, but no CUDA PJRT plugin is installed "
                               "(pip install jax-cuda13-pjrt, or give the plugin's path)")
        return Plugin(path, "cuda", "TORCH_TPU_PJRT_PLUGIN=cuda")
    if override:
        kind = "cuda" if "xla_cuda" in override else "custom"  # xla_cuda13/xla_cuda_plugin.so
        return Plugin(override, kind, "TORCH_TPU_PJRT_PLUGIN")
    chips = _tpu_host.tpu_chips()
    if chips:
        path = libtpu_path()
        if path:
            os.environ.setdefault("TPU_ML_PLATFORM", "PyTorch/torch-tpu")
            _place_this_process(len(chips))
            return Plugin(path, "tpu", "TPU found on the PCI bus")
    path = cpu_plugin_path()
    if path:
        os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
        return Plugin(path, "cpu", "no TPU found")
    return None
