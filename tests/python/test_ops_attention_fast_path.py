"""nn.MultiheadAttention / nn.TransformerEncoderLayer inference fast paths on tpu
(_native_multi_head_attention, _transformer_encoder_layer_fwd, _masked_softmax), called as users
call them: eval mode under torch.no_grad(), compared with the CPU taking the same fast path."""
import copy

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from helpers import DEV, fallbacks


class OpLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def run_both(module, *inputs, fast_op, **kwargs):
    """module(*inputs) on the CPU and on tpu in eval/no_grad; both must take `fast_op`."""
    torch.manual_seed(0)
    module = module.eval()
    dev = copy.deepcopy(module).to(DEV)
    results = []
    for m, device in ((module, "cpu"), (dev, DEV)):
        copies = {}  # query is key is value: the fast path needs the same tensor object thrice

        def move(x):
            if not isinstance(x, torch.Tensor):
                return x
            return copies.setdefault(id(x), x.to(device))

        moved = [move(x) for x in inputs]
        kw = {k: move(v) for k, v in kwargs.items()}
        before = fallbacks()
        with torch.no_grad(), OpLog() as log:
            out = m(*moved, **kw)
        assert fast_op in log.ops, (device, sorted(log.ops))
        if device == DEV:
            assert fallbacks() == before, fallbacks()
        results.append(out)
    return results


def close(dev, cpu, **kw):
    if isinstance(cpu, tuple):
        for d, c in zip(dev, cpu):
            close(d, c, **kw)
        return
    if cpu is None:
        assert dev is None
        return
    torch.testing.assert_close(dev.cpu(), cpu, equal_nan=True, **kw)


def masks(kind, batch=3, length=5):
    torch.manual_seed(1)
    attn = key_padding = None
    if kind in ("attn", "both"):
        attn = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)  # causal
    if kind in ("padding", "both"):
        key_padding = torch.zeros(batch, length, dtype=torch.bool)
        key_padding[0, 3:] = True
        key_padding[batch - 1, 1:] = True
    return attn, key_padding


@pytest.mark.parametrize("mask_kind", ["none", "attn", "padding", "both"])
@pytest.mark.parametrize("need_weights,average", [(False, True), (True, True), (True, False)])
def test_multihead_attention_fast_path(mask_kind, need_weights, average):
    torch.manual_seed(2)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(3, 5, 8)
    attn, kpm = masks(mask_kind)
    cpu, dev = run_both(mha, x, x, x, fast_op="_native_multi_head_attention", attn_mask=attn,
                        key_padding_mask=kpm, need_weights=need_weights, average_attn_weights=average)
    close(dev, cpu)


def test_multihead_attention_fully_masked_rows():
    """A batch entry whose keys are all padding: NaN rows, as the CPU fast path gives them."""
    torch.manual_seed(3)
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True)
    x = torch.randn(2, 4, 16)
    kpm = torch.zeros(2, 4, dtype=torch.bool)
    kpm[1] = True
    cpu, dev = run_both(mha, x, x, x, fast_op="_native_multi_head_attention", key_padding_mask=kpm)
    assert torch.isnan(cpu[0][1]).all()
    close(dev, cpu)


def test_multihead_attention_bfloat16_and_odd_sizes():
    torch.manual_seed(4)
    mha = torch.nn.MultiheadAttention(12, 6, batch_first=True).to(torch.bfloat16)
    x = torch.randn(1, 7, 12).to(torch.bfloat16)
    cpu, dev = run_both(mha, x, x, x, fast_op="_native_multi_head_attention", need_weights=False)
    # bf16 projections and softmax: the CPU rounds after every stage, we round fewer times.
    close(dev, cpu, atol=2e-2, rtol=2e-2)


def test_multihead_attention_empty_batch():
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(0, 5, 8)
    cpu, dev = run_both(mha, x, x, x, fast_op="_native_multi_head_attention", need_weights=False)
    assert dev[0].shape == cpu[0].shape and dev[1] is None


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("mask_kind", ["none", "attn", "padding", "both"])
def test_transformer_encoder_layer_fast_path(norm_first, activation, mask_kind):
    torch.manual_seed(5)
    layer = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True, norm_first=norm_first,
                                             activation=activation, dropout=0.1)
    x = torch.randn(3, 5, 8)
    attn, kpm = masks(mask_kind)
    cpu, dev = run_both(layer, x, fast_op="_transformer_encoder_layer_fwd", src_mask=attn,
                        src_key_padding_mask=kpm)
    close(dev, cpu)


def test_transformer_encoder_stack():
    torch.manual_seed(6)
    layer = torch.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True)
    enc = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    x = torch.randn(2, 6, 16)
    _, kpm = masks("padding", batch=2, length=6)
    cpu, dev = run_both(enc, x, fast_op="_transformer_encoder_layer_fwd", src_key_padding_mask=kpm)
    close(dev, cpu)


def test_native_mha_bad_arguments_raise_like_cpu():
    x = torch.randn(2, 3, 8)
    w, b = torch.randn(24, 8), torch.randn(24)
    pw, pb = torch.randn(8, 8), torch.randn(8)
    calls = [
        lambda d: torch._native_multi_head_attention(x.to(d), x.to(d), x.to(d), 6, 2, w.to(d), b.to(d), pw.to(d),
                                                     pb.to(d)),
        lambda d: torch._native_multi_head_attention(x.to(d), x.to(d), x.to(d), 8, 3, w.to(d), b.to(d), pw.to(d),
                                                     pb.to(d)),
        lambda d: torch._native_multi_head_attention(x[0].to(d), x.to(d), x.to(d), 8, 2, w.to(d), b.to(d),
                                                     pw.to(d), pb.to(d)),
    ]
    for call in calls:
        with pytest.raises(Exception) as cpu:
            call("cpu")
        with pytest.raises(type(cpu.value)) as dev:
            call(DEV)
        assert str(cpu.value).split("\n")[0] in str(dev.value)


def test_multihead_attention_head_dim_8_sdpa_branch():
    """head_dim % 8 == 0, no mask, no weights: the CPU kernel takes its SDPA branch; same values."""
    torch.manual_seed(7)
    mha = torch.nn.MultiheadAttention(32, 4, batch_first=True)
    x = torch.randn(2, 9, 32)
    cpu, dev = run_both(mha, x, x, x, fast_op="_native_multi_head_attention", need_weights=False)
    close(dev, cpu)
