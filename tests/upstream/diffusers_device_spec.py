"""Device spec for diffusers' own test suite on `tpu`.

    cd tests/upstream && DIFFUSERS_TEST_DEVICE=tpu DIFFUSERS_TEST_DEVICE_SPEC=diffusers_device_spec.py \
        ../../.venv/bin/python -m pytest <diffusers v0.42.0 checkout>/tests/models/transformers/test_models_transformer_sd3.py

diffusers imports the spec by file name from the working directory; its testing_utils reads
these names. torch_tpu is loaded by PyTorch's autoload.
"""
import torch

DEVICE_NAME = "tpu"
MANUAL_SEED_FN = torch.tpu.manual_seed
EMPTY_CACHE_FN = torch.tpu.empty_cache
DEVICE_COUNT_FN = torch.tpu.device_count
SUPPORTS_TRAINING = True
RESET_PEAK_MEMORY_STATS_FN = torch.tpu.reset_peak_memory_stats
RESET_MAX_MEMORY_ALLOCATED_FN = torch.tpu.reset_max_memory_allocated
MAX_MEMORY_ALLOCATED_FN = torch.tpu.max_memory_allocated
