"""Device spec for transformers' own test suite on `tpu`.

    TRANSFORMERS_TEST_DEVICE=tpu TRANSFORMERS_TEST_DEVICE_SPEC=tests/upstream/transformers_device_spec.py \
        python -m pytest <transformers checkout>/tests/models/qwen3/test_modeling_qwen3.py

(`make test-upstream-transformers TRANSFORMERS_SRC=<checkout>` runs the families of docs/transformers.md.)
transformers' testing_utils reads these names; torch_tpu is loaded by PyTorch's autoload.
"""
import torch

DEVICE_NAME = "tpu"
MANUAL_SEED_FN = torch.tpu.manual_seed
EMPTY_CACHE_FN = torch.tpu.empty_cache
DEVICE_COUNT_FN = torch.tpu.device_count
# One chip per process, as transformers assumes for TPUs (SINGLE_PROCESS_DEVICES).
SINGLE_PROCESS_DEVICE = True
