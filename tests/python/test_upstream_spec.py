"""tests/upstream/*_device_spec.py are what transformers' and diffusers' testing_utils accept."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
SPEC_DIR = Path(__file__).resolve().parents[1] / "upstream"
# Seeding through the library's backend function twice gives the same random tensor.
SEEDED_TWICE = ("{seed}('tpu', 3); a = torch.rand(2, device='tpu'); "
                "{seed}('tpu', 3); b = torch.rand(2, device='tpu'); ")


def run_in_spec_dir(prefix, spec, code):
    """Runs `code` where the library imports its device spec (by file name, from the working
    directory) and returns the words it printed."""
    env = dict(os.environ, TORCH_TPU_QUIET="1", **{f"{prefix}_TEST_DEVICE": "tpu", f"{prefix}_TEST_DEVICE_SPEC": spec})
    out = subprocess.run([sys.executable, "-c", code], cwd=SPEC_DIR, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_transformers_testing_utils_accepts_the_tpu_device_spec():
    code = ("import torch, transformers.testing_utils as t; " + SEEDED_TWICE.format(seed="t.backend_manual_seed") +
            "print(t.torch_device, t.backend_device_count('tpu'), 'tpu' in t.SINGLE_PROCESS_DEVICES, bool((a == b).all()))")
    assert run_in_spec_dir("TRANSFORMERS", "transformers_device_spec.py", code)[-4:] == ["tpu", "1", "True", "True"]


def test_diffusers_testing_utils_accepts_the_tpu_device_spec():
    pytest.importorskip("diffusers")
    code = ("import torch; from diffusers.utils import testing_utils as t, torch_utils as u; " +
            SEEDED_TWICE.format(seed="u.backend_manual_seed") +
            "print(t.torch_device, u.backend_device_count('tpu'), u.backend_supports_training('tpu'), "
            "u.backend_max_memory_allocated('tpu') >= 0, bool((a == b).all()))")
    assert run_in_spec_dir("DIFFUSERS", "diffusers_device_spec.py", code)[-5:] == ["tpu", "1", "True", "True", "True"]
