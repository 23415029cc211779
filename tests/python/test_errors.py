"""Bad input raises a clear Python exception naming the op; nothing crashes the process."""
import os
import subprocess
import sys

import pytest
import torch


def test_shape_mismatch():
    a, b = torch.ones(2, 3, device="tpu"), torch.ones(4, 5, device="tpu")
    with pytest.raises(RuntimeError, match="size of tensor a|broadcast"):
        a + b


def test_device_mismatch_names_the_op():
    a, b = torch.ones(2, 3, device="tpu"), torch.ones(2, 3)
    with pytest.raises(RuntimeError, match=r"add.*same device"):
        torch.add(a, b)


def test_unsupported_dtype():
    with pytest.raises(TypeError, match="not supported on the tpu device"):
        torch.empty(3, dtype=torch.float8_e5m2fnuz, device="tpu")


def test_dim_out_of_range_on_view():
    x = torch.ones(2, 3, device="tpu")
    with pytest.raises(IndexError):
        x.transpose(0, 5)


def test_inplace_dtype_mismatch():
    x = torch.ones(3, dtype=torch.int64, device="tpu")
    with pytest.raises(RuntimeError, match="can.t be cast|in-place"):
        x.add_(torch.ones(3, device="tpu") * 0.5)


def test_item_on_multi_element():
    with pytest.raises(RuntimeError, match="a Tensor with 3 elements cannot be converted"):
        torch.ones(3, device="tpu").item()


def test_invalid_device_index():
    with pytest.raises(RuntimeError, match="invalid device"):
        torch.ones(2, device="tpu:7")


def test_missing_plugin_path_is_a_clear_error():
    env = dict(os.environ, TORCH_TPU_PJRT_PLUGIN="/nonexistent/plugin.so")
    code = ("import torch, torch_tpu\nprint(torch.tpu.is_available())\n"
            "try:\n    torch.ones(2, device='tpu')\nexcept RuntimeError as e:\n    print('ERR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "cannot load PJRT plugin '/nonexistent/plugin.so'" in out.stdout


def test_not_a_plugin_is_a_clear_error(tmp_path):
    fake = tmp_path / "fake.so"
    fake.write_bytes(b"not an ELF file")
    env = dict(os.environ, TORCH_TPU_PJRT_PLUGIN=str(fake))
    code = "import torch, torch_tpu\ntry:\n    torch.ones(2, device='tpu')\nexcept RuntimeError as e:\n    print('ERR', e)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "ERR" in out.stdout and "cannot load PJRT plugin" in out.stdout
