"""nn.GRU / nn.LSTM / GRUCell / LSTMCell on tpu: PyTorch runs them through _thnn_fused_gru_cell /
_thnn_fused_lstm_cell on PrivateUse1 devices (no CPU kernel exists for the fallback)."""
import pytest
import torch

from helpers import DEV, fallbacks


def twin(make, dtype=torch.float32):
    torch.manual_seed(0)
    ref = make().to(dtype)
    dev = make().to(dtype).to(DEV)
    dev.load_state_dict(ref.state_dict())
    return ref, dev


def compare_grads(ref, dev, **kw):
    for (name, p), q in zip(ref.named_parameters(), dev.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, msg=name, **kw)


@pytest.mark.parametrize("mod", [torch.nn.GRU, torch.nn.LSTM])
@pytest.mark.parametrize("layers,bidirectional,batch_first", [(1, False, False), (2, True, True), (3, False, True),
                                                              (2, True, False)])
def test_rnn_forward_backward(mod, layers, bidirectional, batch_first):
    ref, dev = twin(lambda: mod(5, 7, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first))
    torch.manual_seed(1)
    x = torch.randn(3, 4, 5)
    xc, xd = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    before = fallbacks()
    yd, hd = dev(xd)
    (yd.square().sum() + (hd[0] if mod is torch.nn.LSTM else hd).sum()).backward()
    assert fallbacks() == before
    yc, hc = ref(xc)
    (yc.square().sum() + (hc[0] if mod is torch.nn.LSTM else hc).sum()).backward()
    torch.testing.assert_close(yd.detach().cpu(), yc.detach())
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)
    compare_grads(ref, dev)


@pytest.mark.parametrize("mod", [torch.nn.GRU, torch.nn.LSTM])
def test_rnn_initial_state_unbatched_no_bias(mod):
    ref, dev = twin(lambda: mod(3, 4, bias=False))
    x = torch.randn(6, 3)  # unbatched
    h0 = torch.randn(1, 4)
    state = (h0, torch.randn(1, 4)) if mod is torch.nn.LSTM else h0
    dstate = tuple(s.to(DEV) for s in state) if mod is torch.nn.LSTM else h0.to(DEV)
    before = fallbacks()
    yd, _ = dev(x.to(DEV), dstate)
    yd.sum().backward()
    assert fallbacks() == before
    yc, _ = ref(x, state)
    yc.sum().backward()
    torch.testing.assert_close(yd.detach().cpu(), yc.detach())
    compare_grads(ref, dev)


@pytest.mark.parametrize("cell", [torch.nn.GRUCell, torch.nn.LSTMCell])
def test_cells(cell):
    ref, dev = twin(lambda: cell(4, 6))
    x = torch.randn(5, 4)
    x[0, 0] = 30.0  # saturated gates
    before = fallbacks()
    out_d = dev(x.to(DEV))
    (out_d[0] if isinstance(out_d, tuple) else out_d).sum().backward()
    assert fallbacks() == before
    out_c = ref(x)
    (out_c[0] if isinstance(out_c, tuple) else out_c).sum().backward()
    torch.testing.assert_close(out_d[0].detach().cpu() if isinstance(out_d, tuple) else out_d.detach().cpu(),
                               out_c[0].detach() if isinstance(out_c, tuple) else out_c.detach())
    compare_grads(ref, dev)


@pytest.mark.parametrize("mod", [torch.nn.GRU, torch.nn.LSTM])
def test_rnn_bfloat16(mod):
    ref, dev = twin(lambda: mod(4, 5, batch_first=True), torch.bfloat16)
    x = torch.randn(2, 3, 4).bfloat16()
    before = fallbacks()
    yd, _ = dev(x.to(DEV))
    assert fallbacks() == before
    yc, _ = ref(x)
    # The CPU's bf16 RNN rounds every gate to bf16; ours rounds the cell's results once: one bf16
    # ulp per step can compound over the sequence.
    torch.testing.assert_close(yd.cpu(), yc, atol=2e-2, rtol=2e-2)


def test_gru_noncontiguous_input():
    ref, dev = twin(lambda: torch.nn.GRU(4, 3))
    x = torch.randn(4, 2, 5).transpose(0, 2)  # (5, 2, 4), not contiguous
    before = fallbacks()
    yd, _ = dev(x.to(DEV))
    assert fallbacks() == before
    torch.testing.assert_close(yd.cpu(), ref(x)[0])


@pytest.mark.parametrize("mod", [torch.nn.GRU, torch.nn.LSTM])
def test_rnn_float64_packed_sequence(mod):
    ref, dev = twin(lambda: mod(3, 4, batch_first=True), torch.float64)
    x = torch.randn(3, 5, 3, dtype=torch.float64)
    lengths = torch.tensor([5, 3, 2])
    before = fallbacks()
    packed_d = torch.nn.utils.rnn.pack_padded_sequence(x.to(DEV), lengths, batch_first=True)
    yd, _ = dev(packed_d)
    yd_pad, _ = torch.nn.utils.rnn.pad_packed_sequence(yd, batch_first=True)
    yd_pad.sum().backward()
    assert fallbacks() == before, fallbacks()
    yc, _ = ref(torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True))
    yc_pad, _ = torch.nn.utils.rnn.pad_packed_sequence(yc, batch_first=True)
    yc_pad.sum().backward()
    torch.testing.assert_close(yd_pad.detach().cpu(), yc_pad.detach())
    compare_grads(ref, dev)
