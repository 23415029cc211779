"""torch-tpu: Google TPUs as a native PyTorch device, `tpu`.

Importing registers PrivateUse1 as `tpu`, the `torch.tpu` module and the kernels. It never
raises on a host without a plugin: `torch.tpu.is_available()` is then False and first use of
the device raises a clear error. PyTorch imports this automatically (the `torch.backends`
entry point), so `import torch; torch.device("tpu")` works without importing torch_tpu.
"""
import os
import sys


def _autoload():
    """Entry point of the `torch.backends` group: importing this package is the work.

    Defined before `import torch`: importing torch_tpu first imports torch, whose autoload
    then loads this (partially initialized) module and calls this function.
    """


import torch  # noqa: E402

from . import _torch_check  # noqa: E402

_torch_check.require_built_torch()
try:
    from . import _C
except ImportError as _error:
    raise _torch_check.explain_load_failure(_error) from _error
from . import _discovery  # noqa: E402

__version__ = "0.1.0"

_plugin = _discovery.find_plugin()
if _plugin is not None:
    _C._configure(_plugin.path, _plugin.kind, int(os.environ.get("TORCH_TPU_CPU_DEVICES", "1")),
                  _discovery.gpu_memory_fraction())

# AOT check (docs/tpu_aot.md): also compile every module with libtpu for a TPU topology.
# Configured here, loaded on first compile; pointless (and a second libtpu) on a TPU VM.
if os.environ.get("TORCH_TPU_AOT_CHECK") and (_plugin is None or _plugin.kind != "tpu"):
    _C._aot_configure(os.environ["TORCH_TPU_AOT_CHECK"], _discovery.libtpu_path() or "",
                      os.environ.get("TORCH_TPU_AOT_CACHE_DIR", ""))

torch.utils.rename_privateuse1_backend("tpu")
from . import device_module as _device_module  # noqa: E402

torch._register_device_module("tpu", _device_module)
torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
_REGISTERED_OPS = _C._register_kernels()
from . import _meta_kernels  # noqa: E402,F401  (ops with a rule but no upstream Meta kernel)

from . import metrics  # noqa: E402,F401
from .dynamism import mark_dynamic  # noqa: E402,F401
from . import distributed  # noqa: E402

distributed.register()  # c10d backends "tpu" and "tpu_dist" (docs/parallel.md)
from . import _default_compile  # noqa: E402

_default_compile.enable()  # plain torch.compile(model) on tpu tensors uses the tpu backend
from . import _inductor_device  # noqa: E402

_inductor_device.enable()  # backend="inductor" on tpu tensors: one error naming backend="tpu"


def _announce_platform_once():
    if _plugin is not None and _plugin.kind == "cpu" and not os.environ.get("TORCH_TPU_QUIET"):
        print("torch-tpu: no TPU found; the tpu device runs on XLA:CPU "
              f"({os.path.basename(_plugin.path)})", file=sys.stderr)


_device_module._on_first_init.append(_announce_platform_once)
