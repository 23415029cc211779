"""`torch.distributed` on `tpu`: the c10d backend `tpu` and its alias `tpu_dist`.

`init_process_group("tpu")` (or `"tpu_dist"`, the name Transformers and Google's TorchTPU use),
`init_device_mesh("tpu", ...)`, DTensor, DDP and FSDP2 reach it through PyTorch's own dispatch
of the c10d ops. Each process drives one chip, `tpu:0` (the convention Transformers assumes).

The C++ backend (csrc/engine/distributed/) moves tensors through host memory with gloo over
the process group's store: the XLA CPU plugin cannot communicate across processes through
PJRT. docs/parallel.md gives the design for TPU pods, where collectives belong inside
executables.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from . import _C
from . import device_module as _device_module

BACKEND_NAMES = ("tpu_dist", "tpu")  # the first is the default for the device (Transformers asks for it)


def _create_backend(store, rank: int, world_size: int, timeout):
    """c10d's creator hook: (store, rank, world size, timeout) -> Backend."""
    _C._init_distributed_bindings()
    # Bind this process to its chip now, so DeviceMesh does not pick one from LOCAL_RANK.
    _device_module._lazy_init()
    host = dist.ProcessGroupGloo(dist.PrefixStore("tpu_host_transport/", store), rank, world_size, timeout)
    return _C._HostTransportBackend(host, rank, world_size)


def register() -> None:
    """Registers the backends once (idempotent); a no-op where torch.distributed is absent."""
    if not dist.is_available():
        return
    for name in BACKEND_NAMES:
        if name not in dist.Backend.backend_list:
            dist.Backend.register_backend(name, _create_backend, devices=["tpu"])


def transport_bytes(group=None) -> dict:
    """Bytes this process copied device->host and host->device for collectives of `group`."""
    group = group or dist.group.WORLD
    if group is None:
        raise RuntimeError("torch_tpu.distributed.transport_bytes: torch.distributed is not initialized")
    backend = group._get_backend(torch.device("tpu"))
    return {"to_host": backend.bytes_to_host, "from_host": backend.bytes_from_host}
