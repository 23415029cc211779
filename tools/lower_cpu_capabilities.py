"""Prints the ATEN_CPU_CAPABILITY values below this host's own that PyTorch can run here, one per
line (`make test-cpu-isa`): `avx2` on an AVX-512 host, and `default` (the generic, non-intrinsic
vector build) on any host with vector intrinsics."""
import os

os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # the capability only; no device needed
os.environ.pop("ATEN_CPU_CAPABILITY", None)

import torch  # noqa: E402

LOWER = {"AVX512": ["avx2", "default"], "AVX2": ["default"]}

if __name__ == "__main__":
    native = torch.backends.cpu.get_cpu_capability()
    # Other architectures' vector builds (NEON, SVE, VSX, ZVECTOR) all have `default` below them.
    for isa in LOWER.get(native, [] if native == "DEFAULT" else ["default"]):
        print(isa)
