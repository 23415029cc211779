"""tests/upstream/*_device_spec.py are what transformers' and diffusers' testing_utils accept."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
SPEC_DIR = Path(__file__).resolve().parents[1] / "upstream"


def test_transformers_testing_utils_accepts_the_tpu_device_spec():
    # transformers imports the spec by file name from the working directory.
    env = dict(os.environ, TRANSFORMERS_TEST_DEVICE="tpu", TRANSFORMERS_TEST_DEVICE_SPEC="transformers_device_spec.py",
               TORCH_TPU_QUIET="1")
    code = ("import torch, transformers.testing_utils as t; "
            "t.backend_manual_seed('tpu', 3); a = torch.rand(2, device='tpu'); "
            "t.backend_manual_seed('tpu', 3); b = torch.rand(2, device='tpu'); "
            "print(t.torch_device, t.backend_device_count('tpu'), 'tpu' in t.SINGLE_PROCESS_DEVICES, bool((a == b).all()))")
    out = subprocess.run([sys.executable, "-c", code], cwd=SPEC_DIR, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-4:] == ["tpu", "1", "True", "True"]


def test_diffusers_testing_utils_accepts_the_tpu_device_spec():
    pytest.importorskip("diffusers")
    env = dict(os.environ, DIFFUSERS_TEST_DEVICE="tpu", DIFFUSERS_TEST_DEVICE_SPEC="diffusers_device_spec.py",
               TORCH_TPU_QUIET="1")
    code = ("import torch; from diffusers.utils import testing_utils as t, torch_utils as u; "
            "u.backend_manual_seed('tpu', 3); a = torch.rand(2, device='tpu'); "
            "u.backend_manual_seed('tpu', 3); b = torch.rand(2, device='tpu'); "
            "print(t.torch_device, u.backend_device_count('tpu'), u.backend_supports_training('tpu'), "
            "u.backend_max_memory_allocated('tpu') >= 0, bool((a == b).all()))")
    out = subprocess.run([sys.executable, "-c", code], cwd=SPEC_DIR, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-5:] == ["tpu", "1", "True", "True", "True"]
