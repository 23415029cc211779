"""The `tpu` device as PyTorch sees it: autoload, torch.tpu, accelerator, generators, AMP."""
import os
import subprocess
import sys

import pytest
import torch
import torch_tpu


def test_autoload_without_import():
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.device('tpu'))"],
                         capture_output=True, text=True, env=env, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "tpu"


def test_device_module_basics():
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() >= 1
    assert torch.tpu.current_device() == 0
    name = torch.tpu.get_device_name()
    assert name.startswith("tpu (PJRT ")  # reports the real platform underneath
    props = torch.tpu.get_device_properties(0)
    assert props.platform in ("cpu", "tpu", "cuda")
    torch.tpu.synchronize()
    assert torch.tpu.get_amp_supported_dtype() == [torch.bfloat16, torch.float16]
    assert torch.tpu._is_in_bad_fork() is False


def test_tensor_and_module_methods():
    x = torch.ones(2, 3).tpu()
    assert x.is_tpu and x.device == torch.device("tpu:0")
    m = torch.nn.Linear(3, 2).tpu()
    assert next(m.parameters()).device.type == "tpu"
    assert torch.ones(2, device="tpu").cpu().tolist() == [1.0, 1.0]


def test_accelerator_api():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator().type == "tpu"
    assert torch.accelerator.device_count() == torch.tpu.device_count()
    torch.accelerator.synchronize()


def test_memory_stats_track_storages():
    torch.tpu.init()
    base = torch.tpu.memory_allocated()
    x = torch.empty(1024, device="tpu")
    assert torch.tpu.memory_allocated() == base + 4096
    assert torch.tpu.max_memory_allocated() >= base + 4096
    del x
    assert torch.tpu.memory_allocated() == base
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == base
    torch.tpu.empty_cache()


def test_rng_state_and_generators():
    torch.tpu.manual_seed(123)
    assert torch.tpu.initial_seed() == 123
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    g = torch.Generator(device="tpu")
    assert g.device.type == "tpu"
    g.manual_seed(7)
    assert g.initial_seed() == 7
    torch.manual_seed(5)  # seeds the device too
    assert torch.tpu.initial_seed() == 5
    torch.tpu.set_rng_state(state)
    assert torch.tpu.initial_seed() == 123


def test_autocast_context():
    with torch.autocast("tpu", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("tpu")
        assert torch.get_autocast_dtype("tpu") == torch.bfloat16


def test_pin_memory():
    x = torch.randn(4).pin_memory()
    assert x.is_pinned()
    y = x.to("tpu", non_blocking=True)
    assert torch.equal(y.cpu(), x)


def test_data_ptrs_unique_and_shared_by_views():
    a = torch.zeros(16, device="tpu")
    b = torch.zeros(16, device="tpu")
    assert a.data_ptr() != b.data_ptr()
    assert abs(a.data_ptr() - b.data_ptr()) >= 64
    v = a[4:]
    assert v.data_ptr() == a.data_ptr() + 16
    assert v.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()


def test_device_context_manager_multi_device():
    n = torch.tpu.device_count()
    with torch.tpu.device(0):
        assert torch.tpu.current_device() == 0
    if n > 1:
        with torch.tpu.device(1):
            assert torch.tpu.current_device() == 1
            x = torch.ones(2, device="tpu")
            assert x.device.index == 1
        assert torch.tpu.current_device() == 0


def test_runtime_description_is_truthful():
    desc = torch_tpu._C._runtime_description()
    assert "PJRT" in desc
    if not torch_tpu._discovery.tpu_on_pci_bus():
        assert desc.startswith("cpu")


def test_autocast_casts_matmul_and_keeps_reductions_fp32(no_fallbacks):
    a, b = torch.randn(8, 16, device="tpu"), torch.randn(16, 4, device="tpu")
    with torch.autocast("tpu", dtype=torch.bfloat16):
        y = a @ b
        s = torch.softmax(y, dim=-1)
        loss = torch.nn.functional.mse_loss(y, torch.zeros_like(y))
    assert y.dtype == torch.bfloat16
    assert s.dtype == torch.float32
    assert loss.dtype == torch.float32
    expected = (a.cpu().bfloat16().float() @ b.cpu().bfloat16().float())
    torch.testing.assert_close(y.float().cpu(), expected, atol=5e-2, rtol=2e-2)


def test_multiple_emulated_chips_and_launch_blocking():
    code = (
        "import torch, torch_tpu\n"
        "assert torch.tpu.device_count() == 2, torch.tpu.device_count()\n"
        "x = torch.arange(6.0, device='tpu:1')\n"
        "y = (x * 2).to('tpu:0') + 1\n"
        "assert y.device.index == 0\n"
        "print(y.cpu().tolist())\n"
    )
    env = dict(os.environ, TORCH_TPU_CPU_DEVICES="2", TPU_LAUNCH_BLOCKING="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[1.0, 3.0, 5.0, 7.0, 9.0, 11.0]"


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex64, torch.int16, torch.int8, torch.float16])
def test_other_dtypes_roundtrip_and_compute(dtype):
    x = (torch.arange(6) - 2).to(dtype)
    t = x.to("tpu")
    assert t.dtype == dtype
    assert torch.equal(t.cpu(), x)
    assert torch.equal((t + t).cpu(), x + x)


def test_record_stream_on_a_tpu_tensor():
    """Diffusers' group offloading calls record_stream on onloaded tensors; a tpu device runs in
    one order, so it has nothing to record, but a stream of another device is refused."""
    x = torch.arange(6.0).to("tpu")
    x.record_stream(torch.tpu.current_stream())
    x.record_stream(torch.tpu.Stream())
    assert x.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    with pytest.raises(RuntimeError, match="record_stream: expected a tpu stream"):
        x.record_stream(torch.Stream(device="cpu"))
