"""Shared by the torchrun workers of test_distributed.py: start-up and result reporting."""
import os
import sys

os.environ.setdefault("TORCH_TPU_QUIET", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def start(backend: str = "tpu", **kwargs):
    dist.init_process_group(backend, **kwargs)
    return dist.get_rank(), dist.get_world_size()


def passed(name: str) -> None:
    """Records a check that passed, one file per rank (torchrun interleaves the ranks' stdout);
    the launching test asserts that every rank passed every expected check."""
    results = os.environ.get("TPU_DIST_RESULTS")
    if results:
        with open(os.path.join(results, f"rank{dist.get_rank()}.txt"), "a") as f:
            f.write(name + "\n")
    print(f"PASS {name} rank={dist.get_rank()}", flush=True)


def finish() -> None:
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()


def rank_data(rank: int, shape, dtype=torch.float32) -> torch.Tensor:
    """Every rank can rebuild every other rank's input: the CPU reference needs no communication."""
    g = torch.Generator().manual_seed(1000 + rank)
    if dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(-50, 50, shape, generator=g).to(dtype)
