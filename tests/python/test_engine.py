"""The eager engine's mechanisms: storage layouts (shaped by default, flat on request), views
of shaped storages, recompile reasons, device out-of-memory."""
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu
from helpers import executables_built


def layout_of(t):
    """The dims of the device buffer behind a tpu tensor's storage."""
    return torch_tpu._C._storage_layout(t)


def test_dense_results_keep_their_shape(no_fallbacks):
    x = torch.randn(3, 5).to("tpu")
    assert layout_of(x) == [3, 5]
    y = x * 2
    assert layout_of(y) == [3, 5]
    # A transposed result is stored in memory order (PyTorch keeps the input's strides).
    z = x.t() + 1
    assert z.stride() == (1, 5)
    assert layout_of(z) == [3, 5]
    torch.testing.assert_close(z.cpu(), x.cpu().t() + 1, rtol=0, atol=0)


def test_writes_keep_the_storage_layout(no_fallbacks):
    cpu = torch.arange(24.0).reshape(4, 6)
    x = cpu.to("tpu")
    x[1:3].mul_(2)           # a box at a runtime offset
    x[:, 1::2] += 1          # a stepped box
    x.view(-1)[5:9] = -1     # crosses rows: a flat window of the shaped storage
    x.t()[2].fill_(7)        # a column through a transposed view
    cpu[1:3].mul_(2)
    cpu[:, 1::2] += 1
    cpu.view(-1)[5:9] = -1
    cpu.t()[2].fill_(7)
    assert layout_of(x) == [4, 6]
    torch.testing.assert_close(x.cpu(), cpu, rtol=0, atol=0)


@pytest.mark.parametrize("offset", [0, 1, 2, 5])
def test_views_at_every_offset_read_like_cpu(offset, no_fallbacks):
    cpu = torch.arange(35.0).reshape(5, 7)
    x = cpu.to("tpu")
    for view in (lambda t: t.view(-1)[offset:offset + 9],
                 lambda t: t.view(-1)[offset::3],
                 lambda t: t[offset % 5:, offset % 7::2],
                 lambda t: t.t()[offset % 7],
                 lambda t: t.view(-1)[offset:offset + 14].view(2, 7).t()):
        torch.testing.assert_close((view(x) * 1).cpu(), view(cpu) * 1, rtol=0, atol=0)


def test_odd_extents_and_step_past_the_end(no_fallbacks):
    # arange(5)[::2] spans 5 elements; its window would be 6: it must still read.
    torch.testing.assert_close((torch.arange(5.0, device="tpu")[::2] * 1).cpu(), torch.tensor([0.0, 2.0, 4.0]))
    cpu = torch.randn(3, 1, 5)
    x = cpu.to("tpu")
    torch.testing.assert_close((x[:, :, ::2].expand(3, 4, 3) + 0).cpu(), cpu[:, :, ::2].expand(3, 4, 3) + 0)


def test_reinterpreting_views_of_shaped_storages(no_fallbacks):
    cpu = torch.randn(4, 6)
    x = cpu.to("tpu")
    torch.testing.assert_close((x.view(torch.int32) + 0).cpu(), cpu.view(torch.int32) + 0)
    torch.testing.assert_close((x.view(3, 8)[1:] * 1).cpu(), cpu.view(3, 8)[1:] * 1)
    torch.testing.assert_close(x.view(torch.uint8).cpu(), cpu.view(torch.uint8))


def test_flat_policy_gives_the_same_numbers():
    script = (
        "import torch, torch_tpu\n"
        "torch.manual_seed(0)\n"
        "x = torch.randn(8, 6).to('tpu'); w = torch.randn(6, 4).to('tpu')\n"
        "y = (x @ w).relu(); x[2:5, 1::2] = 3; z = x.t() @ y\n"
        "print(torch_tpu._C._storage_layout(y)); print(z.cpu().sum().item())\n")

    def run(policy):
        env = dict(os.environ, TORCH_TPU_STORAGE_LAYOUT=policy, TORCH_TPU_QUIET="1")
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr
        return out.stdout.split("\n")

    flat, shaped = run("flat"), run("shaped")
    assert flat[0] == "[32]" and shaped[0] == "[8, 4]"
    assert float(flat[1]) == pytest.approx(float(shaped[1]), rel=1e-6)


def test_unwritten_storage_then_out_write(no_fallbacks):
    a, b = torch.randn(4, 3), torch.randn(3, 5)
    out = torch.empty(4, 5, device="tpu")
    torch.mm(a.to("tpu"), b.to("tpu"), out=out)
    assert layout_of(out) == [4, 5]
    torch.testing.assert_close(out.cpu(), a @ b)
    z = torch.empty(2, 3, device="tpu")
    z[0] = 1.0  # the untouched row reads as zeros
    assert z.cpu()[0].tolist() == [1.0, 1.0, 1.0]


@pytest.mark.strict_eager
def test_recompile_reason_names_argument_and_dimension():
    torch_tpu.metrics.reset()
    a = torch.randn(2, 8).to("tpu")
    b = torch.randn(2, 8).to("tpu")
    (a - b).cpu()
    a2, b2 = torch.randn(2, 9).to("tpu"), torch.randn(2, 9).to("tpu")
    (a2 - b2).cpu()
    reasons = torch_tpu.metrics.recompile_reasons()
    assert "sub.Tensor: argument 0 (self): shape [2, 8] -> [2, 9] (dim 1)" in reasons, reasons
    assert "recompiles" in torch_tpu.metrics.report()
    torch_tpu.metrics.reset()
    (a2.double() - b2.double()).cpu()
    assert any(r.startswith("sub.Tensor: argument 0 (self): dtype") and "Double" in r
               for r in torch_tpu.metrics.recompile_reasons()), torch_tpu.metrics.recompile_reasons()


@pytest.mark.strict_eager
def test_same_shape_at_a_new_offset_does_not_recompile():
    cache = torch.zeros(16, 4, device="tpu")
    row = torch.ones(4, device="tpu")
    cache[1].copy_(row * 1)  # compiles mul and the copy into a row (a Box at a runtime offset)
    before = executables_built()
    for t in range(2, 12):
        cache[t].copy_(row * t)
    assert executables_built() == before
    assert cache.cpu()[:12, 0].tolist() == [0, 1] + list(range(2, 12))


@pytest.mark.strict_eager
def test_int_scalars_past_32_bits_get_their_own_program():
    # An int64 value that fits 32 bits (a Python int as a Scalar operand or as a wrapped CPU
    # tensor) reaches the module as s32 (a TPU emulates 64-bit parameters); one past 32 bits
    # keeps s64, in a program of its own, never truncated.
    x = torch.tensor([0, 1, -1, 2 ** 40, -(2 ** 62), 2 ** 31 - 1], dtype=torch.long)
    f = torch.tensor([0.5, -0.0, float("nan"), float("inf"), 3.0, -2.5])
    d, fd = x.to("tpu"), f.to("tpu")
    ops = [lambda t, k: t + k,  # a wrapped CPU tensor
           lambda t, k: torch.add(t, t, alpha=k),  # a Scalar operand
           lambda t, k: t.clamp(min=k)]
    torch_tpu.metrics.reset()
    for op in ops:
        op(d, 5).cpu(), op(fd, 3).cpu()
    before = executables_built()
    for k in (7, -9, 2 ** 31 - 1, -(2 ** 31)):  # the same programs
        for op in ops:
            assert torch.equal(op(d, k).cpu(), op(x, k))
            torch.testing.assert_close(op(fd, k).cpu(), op(f, k), equal_nan=True)
    assert executables_built() == before
    for k in (2 ** 31, -(2 ** 31) - 1, 2 ** 40, -(2 ** 62), 2 ** 63 - 1):  # past 32 bits
        for op in ops:
            assert torch.equal(op(d, k).cpu(), op(x, k))
            torch.testing.assert_close(op(fd, k).cpu(), op(f, k), equal_nan=True)
    assert executables_built() == before + 6  # each op and dtype once for every wide value
    torch_tpu.metrics.reset()  # the recompile reason names the wide value
    y = torch.arange(5).to("tpu")
    (y - 3).cpu(), (y - 2 ** 33).cpu(), y.sub(y, alpha=3).cpu(), y.sub(y, alpha=2 ** 33).cpu()
    reasons = torch_tpu.metrics.recompile_reasons()
    assert "sub.Tensor: argument 1 (other): CPU scalar dtype: a value past 32 bits" in reasons, reasons
    assert "sub.Tensor: argument 2 (alpha): scalar kind: a value past 32 bits" in reasons, reasons


def test_out_of_memory_raises_and_device_stays_usable():
    before = torch.tpu.memory_allocated()
    with pytest.raises(torch.OutOfMemoryError, match=r"tpu out of memory.*Tried to allocate 3\.64 TiB"):
        torch.empty(10**12, device="tpu")
    with pytest.raises(torch.OutOfMemoryError):
        torch.ones(2**40, dtype=torch.uint8, device="tpu")
    assert torch.tpu.memory_allocated() == before
    assert (torch.ones(3, device="tpu") * 2).cpu().tolist() == [2.0, 2.0, 2.0]


def test_out_of_memory_limit_from_environment():
    script = (
        "import torch\n"
        "x = torch.empty(1000, device='tpu')\n"
        "try:\n"
        "    torch.empty(1000, device='tpu')\n"
        "except torch.OutOfMemoryError as e:\n"
        "    print('OOM', 'limit of 4.88 KiB' in str(e))\n"
        "print((x[:3] * 0 + 1).cpu().tolist())\n")
    env = dict(os.environ, TORCH_TPU_DEVICE_MEMORY_LIMIT="5000", TORCH_TPU_QUIET="1")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["OOM True", "[1.0, 1.0, 1.0]"]
