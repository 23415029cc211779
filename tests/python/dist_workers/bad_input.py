"""Bad input on the tpu backend raises, on every rank, within the group's timeout (torchrun, 2 ranks)."""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from common import passed, start

TIMEOUT_S = 5
rank, world = start(timeout=timedelta(seconds=TIMEOUT_S))
dev = torch.device("tpu")

# A CPU tensor in a tpu-only group: PyTorch's own error, naming the device type.
try:
    dist.all_reduce(torch.ones(3))
    raise AssertionError("all_reduce of a CPU tensor in a tpu group did not raise")
except RuntimeError as e:
    assert "cpu" in str(e).lower(), e
passed("cpu_tensor_in_tpu_group")

# A mixed list: the backend names the op and the offending tensor.
try:
    dist.all_gather([torch.empty(2, device=dev), torch.empty(2)] if world == 2 else None, torch.ones(2, device=dev))
    raise AssertionError("all_gather into a CPU output did not raise")
except RuntimeError as e:
    assert "all_gather" in str(e) and "expected tpu output tensors" in str(e), e
passed("cpu_output_named")
dist.barrier()

# Mismatched sizes across ranks: an error on every rank, no hang past the timeout.
begin = time.monotonic()
try:
    dist.all_reduce(torch.ones(4 + rank, device=dev))
    raise AssertionError("all_reduce of mismatched sizes did not raise")
except RuntimeError as e:
    elapsed = time.monotonic() - begin
    assert elapsed < TIMEOUT_S * 3, elapsed
    print(f"rank {rank} mismatch raised after {elapsed:.1f}s: {str(e).splitlines()[0][:200]}", flush=True)
passed("mismatched_sizes_raise")

# Mismatched dtypes and all_to_all splits that do not pair up.
for name, call in [
    ("dtype", lambda: dist.all_reduce(torch.ones(4, device=dev, dtype=torch.float32 if rank == 0 else torch.int64))),
    ("splits", lambda: dist.all_to_all_single(torch.empty(4, device=dev), torch.ones(4, device=dev),
                                              [2, 2], [1, 3] if rank == 0 else [2, 2])),
]:
    try:
        call()
        raise AssertionError(f"mismatched {name} did not raise")
    except RuntimeError as e:
        assert "the ranks' calls do not match" in str(e), e
        print(f"rank {rank} {name}: {e}", flush=True)
passed("mismatched_dtype_and_splits_raise")

# A rank that dies: the survivor's next collective raises within the timeout.
if rank == 1:
    passed("peer_dies")
    os._exit(0)
time.sleep(0.5)
begin = time.monotonic()
try:
    dist.all_reduce(torch.ones(2, device=dev))
    raise AssertionError("all_reduce with a dead peer did not raise")
except RuntimeError as e:
    elapsed = time.monotonic() - begin
    assert elapsed < TIMEOUT_S * 3, elapsed
    print(f"rank {rank} dead peer raised after {elapsed:.1f}s: {str(e).splitlines()[0][:200]}", flush=True)
passed("peer_dies")
os._exit(0)  # the group cannot be torn down cleanly without its peer
