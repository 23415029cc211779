"""Which PJRT plugin runs under `tpu` and what its client is created with (docs/accelerator.md).
The CUDA plugin itself runs only on a GPU machine (tools/accelerator_check.sh); here: its
selection, its client options and the errors for bad settings."""
import pytest

import torch_tpu
from torch_tpu import _discovery


def test_client_options_per_plugin_kind():
    # The GPU client must not preallocate (PyTorch's CUDA allocator shares the GPU); it rejects
    # options it does not know, so the CPU plugin's device count is not passed to it.
    assert torch_tpu._C._client_options("cuda", 0.0) == {"preallocate": False, "allocator": "bfc"}
    options = torch_tpu._C._client_options("cuda", 0.5)
    assert options["memory_fraction"] == pytest.approx(0.5) and options["preallocate"] is False
    assert torch_tpu._C._client_options("cpu", 0.0) == {"cpu_device_count": 1}
    assert torch_tpu._C._client_options("tpu", 0.0) == {}
    assert torch_tpu._C._client_options("custom", 0.5) == {}


@pytest.mark.parametrize("value,expected", [("", 0.0), ("0.5", 0.5), ("1", 1.0)])
def test_gpu_memory_fraction_from_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv("TORCH_TPU_GPU_MEMORY_FRACTION", value)
    assert _discovery.gpu_memory_fraction() == expected


@pytest.mark.parametrize("value", ["0", "1.5", "-0.2", "half", "nan"])
def test_bad_gpu_memory_fraction_is_a_clear_error(monkeypatch, value):
    monkeypatch.setenv("TORCH_TPU_GPU_MEMORY_FRACTION", value)
    with pytest.raises(ValueError, match="TORCH_TPU_GPU_MEMORY_FRACTION must be a number in \\(0, 1\\]"):
        _discovery.gpu_memory_fraction()


def test_cuda_plugin_selection(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_TPU_PJRT_PLUGIN", "cuda")
    if _discovery.cuda_plugin_path() is None:
        with pytest.raises(RuntimeError, match="no CUDA PJRT plugin is installed.*jax-cuda13-pjrt"):
            _discovery.find_plugin()
    else:
        assert _discovery.find_plugin().kind == "cuda"
    plugin = tmp_path / "jax_plugins" / "xla_cuda13" / "xla_cuda_plugin.so"
    monkeypatch.setenv("TORCH_TPU_PJRT_PLUGIN", str(plugin))
    assert (_discovery.find_plugin().kind, _discovery.find_plugin().path) == ("cuda", str(plugin))
    monkeypatch.setenv("TORCH_TPU_PJRT_PLUGIN", str(tmp_path / "my_plugin.so"))
    assert _discovery.find_plugin().kind == "custom"
