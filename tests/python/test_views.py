"""Storage model: views share storage; writes through any view are visible to every alias."""
import pytest
import torch
import torch_tpu
from helpers import executables_built


def both(fn):
    """Runs fn on CPU and on tpu tensors built from the same data; returns both results."""
    torch.manual_seed(0)
    base = torch.randn(6, 8)
    cpu = fn(base.clone())
    tpu = fn(base.clone().to("tpu"))
    return cpu, tpu


def check(fn):
    cpu, tpu = both(fn)
    if isinstance(cpu, (tuple, list)):
        for c, t in zip(cpu, tpu):
            torch.testing.assert_close(t.cpu(), c)
    else:
        torch.testing.assert_close(tpu.cpu(), cpu)


def test_slice_assignment():
    def f(x):
        x[1:3, 2:5] = 7.0
        return x
    check(f)


def test_slice_assignment_tensor_value():
    def f(x):
        x[:, 1] = torch.arange(6.0, device=x.device)
        return x
    check(f)


def test_inplace_on_transpose_visible_in_base():
    def f(x):
        t = x.t()
        t.mul_(2).add_(1)
        return x, t
    check(f)


def test_inplace_on_strided_view():
    def f(x):
        v = x[::2, 1::3]
        v.add_(10)
        return x
    check(f)


def test_view_chain_reads():
    def f(x):
        return x.view(8, 6).t()[1:4].contiguous() * 1, x.narrow(1, 2, 3) * 2
    check(f)


def test_expand_read():
    def f(x):
        return x[:, :1].expand(6, 5) + 1
    check(f)


def test_expand_write_raises():
    x = torch.zeros(1, 4, device="tpu").expand(3, 4)
    with pytest.raises(RuntimeError, match="more than one element"):
        x.add_(1)


def test_as_strided_overlapping_read():
    def f(x):
        flat = x.reshape(-1)
        return flat.as_strided((4, 3), (2, 1), 1) + 0
    check(f)


def test_select_and_unsqueeze_write():
    def f(x):
        x[2].unsqueeze(0).sub_(3)
        return x
    check(f)


def test_storage_shared_between_views():
    x = torch.zeros(4, 4, device="tpu")
    y = x.view(16)
    z = x[1]
    assert y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    y[5] = 3.0
    assert z[1].item() == 3.0
    assert x[1, 1].item() == 3.0


def test_data_attribute_shares_storage():
    x = torch.ones(3, device="tpu", requires_grad=True)
    d = x.data
    d.mul_(4)
    assert x.detach().cpu().tolist() == [4.0, 4.0, 4.0]


def test_set_and_resize():
    x = torch.arange(6.0).to("tpu")
    y = torch.empty(0, device="tpu")
    y.set_(x)
    assert y.data_ptr() == x.data_ptr()
    y[0] = 42.0
    assert x[0].item() == 42.0
    z = torch.arange(4.0).to("tpu")
    z.resize_(8)
    assert z.shape == (8,)
    assert z[:4].cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    w = torch.arange(8.0).to("tpu")
    w.resize_(2, 2)
    assert w.cpu().tolist() == [[0.0, 1.0], [2.0, 3.0]]


def test_copy_between_views_and_dtypes():
    def f(x):
        y = torch.zeros(8, 6, dtype=torch.bfloat16, device=x.device)
        y.copy_(x.t())
        return y.float()
    check(f)


def test_empty_and_zero_dim_tensors():
    e = torch.empty(0, 3, device="tpu")
    assert (e + 1).shape == (0, 3)
    s = torch.tensor(2.5).to("tpu")
    assert (s * 2).item() == 5.0
    assert s.dim() == 0


def test_channels_last_roundtrip_and_op():
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    t = x.to("tpu")
    assert t.is_contiguous(memory_format=torch.channels_last)
    y = t * 2
    assert y.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(y.cpu(), x * 2)


@pytest.mark.strict_eager
def test_storage_offset_view_does_not_recompile_per_offset():
    buf = torch.zeros(64, device="tpu")
    buf[1:9].add_(1)  # warm up the offset path
    before = executables_built()
    for t in range(2, 40):
        buf[t:t + 8].add_(1)
    assert executables_built() == before
    expected = torch.zeros(64)
    for t in range(1, 40):
        expected[t:t + 8] += 1
    torch.testing.assert_close(buf.cpu(), expected)


def test_view_dtype_reinterprets():
    x = torch.tensor([1.0, -2.0]).to("tpu")
    torch.testing.assert_close(x.view(torch.int32).cpu(), torch.tensor([1.0, -2.0]).view(torch.int32))


def test_multi_device_copy():
    if torch.tpu.device_count() < 2:
        pytest.skip("needs TORCH_TPU_CPU_DEVICES>=2")
    x = torch.arange(4.0, device="tpu:0")
    y = x.to("tpu:1")
    assert y.device.index == 1
    assert y.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_view_as_complex_and_real_share_storage_eager_and_compiled(no_fallbacks):
    """Complex RoPE (Qwen-Image, Flux): pairs of floats viewed as complex numbers and back."""
    x = torch.randn(2, 3, 8)
    freqs = torch.polar(torch.ones(3, 4), torch.randn(3, 4))

    def rope(x, freqs):
        z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(z * freqs).flatten(2)

    torch.testing.assert_close(rope(x.to("tpu"), freqs.to("tpu")).cpu(), rope(x, freqs))
    compiled = torch.compile(rope, backend="tpu", fullgraph=True, dynamic=False)
    torch.testing.assert_close(compiled(x.to("tpu"), freqs.to("tpu")).cpu(), rope(x, freqs))
    w = torch.zeros(3, dtype=torch.complex64, device="tpu")
    torch.view_as_real(w)[:, 1] = 2.0                  # a write through the real view
    assert w.cpu().tolist() == [2j, 2j, 2j]
    z = torch.view_as_complex(torch.arange(6.0, device="tpu").reshape(3, 2))
    assert z.cpu().tolist() == [1j, 2 + 3j, 4 + 5j]


def test_bool_storage_byte_views_and_clones():
    """A bool tensor's storage seen as bytes (untyped_storage().clone(), copy.deepcopy,
    .view(torch.uint8)) and bytes seen as bool: PyTorch's bool byte is 0 or 1 (upstream
    Transformers tests deep-copy bool inputs this way; XLA has no i1 <-> ui8 bitcast)."""
    import copy
    cpu = torch.tensor([[True, False, True], [False, False, True]])
    dev = cpu.to("tpu")
    assert torch.equal(copy.deepcopy(dev).cpu(), cpu)
    clone = torch.empty(0, dtype=torch.bool, device="tpu").set_(dev.untyped_storage().clone()).view(2, 3)
    assert torch.equal(clone.cpu(), cpu)
    assert torch.equal(dev.view(torch.uint8).cpu(), cpu.view(torch.uint8))
    assert torch.equal(dev.view(torch.int8).add(1).cpu(), cpu.view(torch.int8).add(1))
    raw = torch.tensor([0, 1, 1, 0], dtype=torch.uint8)
    assert torch.equal(raw.to("tpu").view(torch.bool).cpu(), raw.view(torch.bool))
