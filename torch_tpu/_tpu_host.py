"""The TPU chips of this host, and which of them this process drives.

Pure functions over sysfs and the environment, so they run (and are tested) on any host; only
`_discovery.find_plugin` acts on them, before libtpu is loaded.

Chips: PCI functions of Google's vendor id whose device id is a TPU chip. The vendor id alone is
not enough: a GCE VM's gVNIC network card and NVMe disks carry it too, and libtpu loaded on such a
VM fails (or waits on cloud metadata) instead of falling back to the CPU plugin.

One chip per process: under `torchrun --nproc-per-node N` on a TPU VM every process would load
libtpu for all of the host's chips, and all but the first fail on libtpu's lock. Transformers,
Diffusers and Google's TorchTPU expect each process to see one chip, as `tpu:0`. libtpu does that
when told, before it loads, which chip is the process's and where its peers listen (the same
variables torch_xla and JAX set for several processes on one host).
"""
from __future__ import annotations

import glob
import os
from pathlib import Path

GOOGLE_PCI_VENDOR = "0x1ae0"

# PCI device ids of TPU chips (JAX's hardware_utils, TorchTPU's hardware.py).
TPU_PCI_DEVICES = {
    "0x0027": "v2/v3",
    "0x005e": "v4",
    "0x0062": "v5p",
    "0x0063": "v5e",
    "0x006f": "v6e",
    "0x0076": "TPU7x",
}

# Chip grid of one host, by chips per host: TPU_PROCESS_BOUNDS when each process owns one chip.
HOST_CHIP_BOUNDS = {1: "1,1,1", 4: "2,2,1", 8: "2,4,1"}

# Variables that say the user (or a launcher) already placed this process; we then set nothing.
PLACEMENT_VARIABLES = ("TPU_VISIBLE_CHIPS", "TPU_PROCESS_BOUNDS", "TPU_CHIPS_PER_PROCESS_BOUNDS")

DEFAULT_BASE_PORT = 8476  # first of the ports libtpu's processes listen on (torch_xla's too)


def tpu_chips(pci_root: str = "/sys/bus/pci/devices") -> list[str]:
    """The TPU generation of every TPU chip on the PCI bus, in bus order."""
    chips = []
    for device_dir in sorted(glob.glob(os.path.join(pci_root, "*"))):
        try:
            vendor = Path(device_dir, "vendor").read_text().strip().lower()
            device = Path(device_dir, "device").read_text().strip().lower()
        except OSError:
            continue
        if vendor == GOOGLE_PCI_VENDOR and device in TPU_PCI_DEVICES:
            chips.append(TPU_PCI_DEVICES[device])
    return chips


def one_chip_per_process_env(environ, chips_on_host: int) -> tuple[dict[str, str], str | None]:
    """The libtpu variables that give this torchrun process its own chip.

    Returns (variables to set, problem). Both empty/None when there is nothing to do: not under a
    launcher, one process on the host, or the placement already given. A problem says why a
    launched process could not be placed (the caller warns) and what to do."""
    try:
        local_world = int(environ.get("LOCAL_WORLD_SIZE", "1"))
        local_rank = int(environ.get("LOCAL_RANK", "0"))
        world = int(environ.get("WORLD_SIZE", str(local_world)))
        base_port = int(environ.get("TORCH_TPU_PROCESS_BASE_PORT", DEFAULT_BASE_PORT))
    except ValueError:
        return {}, "LOCAL_WORLD_SIZE, LOCAL_RANK, WORLD_SIZE or TORCH_TPU_PROCESS_BASE_PORT is not an integer"
    if local_world <= 1 or any(environ.get(name) for name in PLACEMENT_VARIABLES):
        return {}, None
    if world != local_world:
        return {}, (f"{world} processes over several hosts: set TPU_VISIBLE_CHIPS, TPU_PROCESS_BOUNDS, "
                    "TPU_CHIPS_PER_PROCESS_BOUNDS, TPU_PROCESS_ADDRESSES, TPU_PROCESS_PORT and CLOUD_TPU_TASK_ID "
                    "for each process (docs/parallel.md)")
    if local_world != chips_on_host or chips_on_host not in HOST_CHIP_BOUNDS:
        return {}, (f"{local_world} processes for {chips_on_host} chips: run one process per chip "
                    f"(torchrun --nproc-per-node {chips_on_host}) or set TPU_VISIBLE_CHIPS yourself")
    if not 0 <= local_rank < local_world:
        return {}, f"LOCAL_RANK {local_rank} is outside 0..{local_world - 1}"
    ports = [base_port + i for i in range(local_world)]
    return {
        "TPU_VISIBLE_CHIPS": str(local_rank),
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_BOUNDS": HOST_CHIP_BOUNDS[chips_on_host],
        "TPU_PROCESS_PORT": str(ports[local_rank]),
        "TPU_PROCESS_ADDRESSES": ",".join(f"localhost:{p}" for p in ports),
        "CLOUD_TPU_TASK_ID": str(local_rank),
    }, None
