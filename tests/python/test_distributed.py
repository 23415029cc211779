"""torch.distributed on tpu: torchrun with 2 and 4 processes, one emulated chip each.

Each worker in dist_workers/ records the checks it passed per rank; a test passes when torchrun
exits 0 and every rank passed every check. The workers compare with CPU references themselves.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torch_tpu

WORKERS = Path(__file__).resolve().parent / "dist_workers"


def torchrun(worker, nproc, tmp_path, *args, timeout=240):
    results = tmp_path / f"results-{worker}-{nproc}"
    results.mkdir()
    env = {**os.environ, "TPU_DIST_RESULTS": str(results), "TORCH_TPU_QUIET": "1", "TORCH_TPU_CPU_DEVICES": "1",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(WORKERS)}
    env.pop("TORCH_TPU_AOT_CHECK", None)  # host-transport collectives compile no collective modules
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
         str(WORKERS / worker), *map(str, args)],
        env=env, capture_output=True, text=True, timeout=timeout)
    passed = {}
    for rank in range(nproc):
        f = results / f"rank{rank}.txt"
        passed[rank] = set(f.read_text().split()) if f.exists() else set()
    return proc, passed


def assert_all_ranks_passed(proc, passed, expected):
    tail = (proc.stdout + proc.stderr)[-6000:]
    assert proc.returncode == 0, tail
    for rank, names in passed.items():
        assert set(expected) <= names, f"rank {rank} is missing {set(expected) - names}\n{tail}"


COLLECTIVE_CHECKS = ["all_reduce_sum", "all_reduce_ops", "all_reduce_nan_inf", "all_reduce_view", "all_reduce_empty",
                     "all_reduce_premul_sum", "broadcast", "reduce", "all_gather", "gather", "scatter", "reduce_scatter",
                     "all_to_all", "send_recv", "async_work", "coalesced", "objects", "subgroup"]


@pytest.mark.parametrize("nproc", [2, 4])
def test_every_collective_matches_cpu(nproc, tmp_path):
    assert_all_ranks_passed(*torchrun("collectives.py", nproc, tmp_path), COLLECTIVE_CHECKS)


@pytest.mark.parametrize("nproc", [2, 4])
def test_dtensor_ddp_and_fsdp2_match_one_cpu_process(nproc, tmp_path):
    assert_all_ranks_passed(*torchrun("training.py", nproc, tmp_path), ["dtensor_matmul", "ddp", "fsdp2"])


def test_bad_input_raises_on_every_rank_without_hanging(tmp_path):
    proc, passed = torchrun("bad_input.py", 2, tmp_path, timeout=120)
    assert_all_ranks_passed(proc, passed, ["cpu_tensor_in_tpu_group", "cpu_output_named", "mismatched_sizes_raise",
                                           "mismatched_dtype_and_splits_raise", "peer_dies"])


@pytest.fixture(scope="module")
def tiny_qwen3(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.Qwen3Config(vocab_size=256, hidden_size=128, intermediate_size=512, num_hidden_layers=2,
                                      num_attention_heads=8, num_key_value_heads=4, head_dim=16,
                                      max_position_embeddings=256, tie_word_embeddings=False)
    path = tmp_path_factory.mktemp("qwen3-tp")
    transformers.Qwen3ForCausalLM(config).save_pretrained(path)
    return path


@pytest.mark.parametrize("nproc", [2, 4])
def test_transformers_tp_plan_auto_generates_cpu_tokens(nproc, tiny_qwen3, tmp_path):
    proc, passed = torchrun("transformers_tp.py", nproc, tmp_path, tiny_qwen3, 8)
    expected = ["tp_generate_matches_cpu", "tp_static_cache_compiled_matches_cpu"] + (
        ["tp_memory_per_rank"] if nproc >= 4 else [])
    assert_all_ranks_passed(proc, passed, expected)
    results = tmp_path / f"results-transformers_tp.py-{nproc}"
    memory = [json.loads((results / f"memory{rank}.json").read_text()) for rank in range(nproc)]
    assert len(memory) == nproc
    for m in memory:  # each rank holds about 1/nproc of the parameters (norms are replicated)
        assert m["peak_device_bytes"] <= (1 / nproc + 0.1) * m["full_param_bytes"], m


def tiny_diffusers_transformer(name, tmp_path_factory):
    diffusers = pytest.importorskip("diffusers")
    torch.manual_seed(0)
    if name == "QwenImageTransformer2DModel":
        model = diffusers.QwenImageTransformer2DModel(
            patch_size=2, in_channels=64, out_channels=16, num_layers=2, attention_head_dim=32, num_attention_heads=4,
            joint_attention_dim=128, axes_dims_rope=(8, 12, 12))
    else:
        model = diffusers.FluxTransformer2DModel(
            patch_size=1, in_channels=64, num_layers=1, num_single_layers=2, attention_head_dim=32,
            num_attention_heads=4, joint_attention_dim=128, pooled_projection_dim=64, axes_dims_rope=(8, 12, 12))
    path = tmp_path_factory.mktemp(name)
    model.save_pretrained(path)
    return path


@pytest.mark.parametrize("model,nproc", [("QwenImageTransformer2DModel", 2), ("QwenImageTransformer2DModel", 4),
                                         ("FluxTransformer2DModel", 2)])
def test_diffusers_tensor_parallel_matches_cpu_and_shards_the_weights(model, nproc, tmp_path_factory, tmp_path):
    """A `_tp_plan` over `nproc` chips through enable_parallelism and through
    from_pretrained(parallel_config=...): the output equals one CPU process, and loading never
    holds more than the replicated weights plus this rank's shard."""
    path = tiny_diffusers_transformer(model, tmp_path_factory)
    proc, passed = torchrun("diffusers_tp.py", nproc, tmp_path, model, path, timeout=400)
    assert_all_ranks_passed(proc, passed, ["enable_parallelism_matches_cpu",
                                           "from_pretrained_parallel_config_matches_cpu"])
    results = tmp_path / f"results-diffusers_tp.py-{nproc}"
    for rank in range(nproc):
        m = json.loads((results / f"memory{rank}.json").read_text())
        replicated = m["all_param_bytes"] - m["sharded_full_bytes"]
        assert m["sharded_local_bytes"] <= (1 / nproc + 0.01) * m["sharded_full_bytes"], m
        assert m["load_peak_device_bytes"] <= 1.01 * (replicated + m["sharded_local_bytes"]), m


def test_backends_are_registered_for_the_tpu_device():
    import torch.distributed as dist
    assert "tpu" in dist.Backend.backend_list and "tpu_dist" in dist.Backend.backend_list
    assert dist.get_default_backend_for_device("tpu") == "tpu_dist"  # the first registered
    assert torch_tpu.distributed.BACKEND_NAMES == ("tpu_dist", "tpu")
