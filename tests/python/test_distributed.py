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
    expected = ["tp_generate_matches_cpu"] + (["tp_memory_per_rank"] if nproc >= 4 else [])
    assert_all_ranks_passed(proc, passed, expected)
    results = tmp_path / f"results-transformers_tp.py-{nproc}"
    memory = [json.loads((results / f"memory{rank}.json").read_text()) for rank in range(nproc)]
    assert len(memory) == nproc
    for m in memory:  # each rank holds about 1/nproc of the parameters (norms are replicated)
        assert m["peak_device_bytes"] <= (1 / nproc + 0.1) * m["full_param_bytes"], m


def test_backends_are_registered_for_the_tpu_device():
    import torch.distributed as dist
    assert "tpu" in dist.Backend.backend_list and "tpu_dist" in dist.Backend.backend_list
    assert dist.get_default_backend_for_device("tpu") == "tpu_dist"  # the first registered
    assert torch_tpu.distributed.BACKEND_NAMES == ("tpu_dist", "tpu")
