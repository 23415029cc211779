"""Diffusers tensor parallelism on tpu (torchrun): a transformer with a `_tp_plan` (Qwen-Image,
Flux) sharded over the ranks' chips, through both public entry points, against one CPU process.

argv: model class name, checkpoint directory (that class saved with save_pretrained).
- enable_parallelism(config=TensorParallelConfig(tp_degree=world)) after loading to tpu;
- from_pretrained(path, parallel_config=TensorParallelConfig(tp_degree=world)): the weights are
  read straight into each rank's shard on its chip (the accelerator diffusers finds is `tpu`).
Each must give the single-process CPU output; each rank must hold about 1/world of the sharded
weights.
"""
import json
import os
import sys

os.environ.setdefault("TORCH_TPU_QUIET", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import diffusers  # noqa: E402
from diffusers import TensorParallelConfig  # noqa: E402
from diffusers.utils import logging as diffusers_logging  # noqa: E402
from torch.distributed.tensor import DTensor  # noqa: E402

from common import finish, passed, start  # noqa: E402

diffusers_logging.set_verbosity_error()  # enable_parallelism warns that it is experimental
Model = getattr(diffusers, sys.argv[1])
path = sys.argv[2]
rank, world = start("tpu")


def inputs(device):
    """One call's inputs: 8x8 latent patches, 7 text tokens (seeded, equal on every rank)."""
    g = torch.Generator().manual_seed(0)
    config = Model.load_config(path)
    x = dict(hidden_states=torch.randn(1, 64, config["in_channels"], generator=g),
             encoder_hidden_states=torch.randn(1, 7, config["joint_attention_dim"], generator=g),
             timestep=torch.tensor([0.4]))
    if Model is diffusers.QwenImageTransformer2DModel:
        x["encoder_hidden_states_mask"] = torch.ones(1, 7, dtype=torch.long)
    else:  # Flux: pooled text embedding and positional ids per token
        x["pooled_projections"] = torch.randn(1, config["pooled_projection_dim"], generator=g)
        rows, cols = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
        x["img_ids"] = torch.stack([torch.zeros(64), rows.flatten(), cols.flatten()], dim=1)
        x["txt_ids"] = torch.zeros(7, 3)
    x = {k: v.to(device) for k, v in x.items()}
    if Model is diffusers.QwenImageTransformer2DModel:
        x["img_shapes"] = [[(1, 8, 8)]]
    return x


def shard_bytes(model):
    """(bytes of the planned parameters on this rank, their full size); checks that every
    Shard()-placed one holds exactly 1/world of its rows on this rank's chip (rowwise biases
    stay replicated, as in PyTorch's RowwiseParallel)."""
    from torch.distributed.tensor import Shard
    local = full = 0
    for name, p in model.named_parameters():
        if isinstance(p, DTensor):
            piece = p.to_local()
            assert piece.device.type == "tpu", (name, piece.device)
            if isinstance(p.placements[0], Shard):
                assert piece.numel() * world == p.numel(), (name, piece.shape, p.shape)
            local += piece.nbytes
            full += p.numel() * p.element_size()
    assert full > 0
    return local, full


expected = Model.from_pretrained(path)(**inputs("cpu")).sample

with torch.no_grad():
    model = Model.from_pretrained(path).to("tpu")
    model.enable_parallelism(config=TensorParallelConfig(tp_degree=world))
    local, full = shard_bytes(model)
    out = model(**inputs("tpu")).sample
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-4)
    passed("enable_parallelism_matches_cpu")

    del model
    torch.tpu.reset_peak_memory_stats()
    before = torch.tpu.memory_allocated()
    model = Model.from_pretrained(path, parallel_config=TensorParallelConfig(tp_degree=world))
    load_peak = torch.tpu.max_memory_allocated() - before
    local, full = shard_bytes(model)
    assert all(p.device.type == "tpu" for p in model.parameters()), {p.device for p in model.parameters()}
    out = model(**inputs("tpu")).sample
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-4)
    passed("from_pretrained_parallel_config_matches_cpu")
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    with open(os.path.join(os.environ["TPU_DIST_RESULTS"], f"memory{rank}.json"), "w") as f:
        json.dump({"rank": rank, "world": world, "sharded_full_bytes": full, "sharded_local_bytes": local,
                   "all_param_bytes": total, "load_peak_device_bytes": load_peak}, f)
finish()
