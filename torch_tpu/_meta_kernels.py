"""Meta kernels for ATen ops PyTorch ships without one.

The eager engine learns an op's result sizes and dtypes from its Meta kernel before it applies the
lowering rule (docs/ARCHITECTURE.md, the eager flow); these ops have rules but no Meta kernel
upstream. Each kernel only describes the results: the rule checks the arguments the way the CPU
kernel does.
"""
import torch

_lib = torch.library.Library("aten", "IMPL")


def _upstream(name):
    """A meta function of torch._meta_registrations, or None where this PyTorch has none."""
    import torch._meta_registrations as upstream
    return getattr(upstream, name, None)


def _like(t, dtype=None):
    return torch.empty(t.shape, dtype=dtype or t.dtype, device="meta")


def _masked_softmax(self, mask, dim=None, mask_type=None):
    return _like(self)


def _masked_softmax_backward(grad_output, output, mask, dim=None):
    return _like(grad_output)


def _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    batch, hidden = hx.shape[0], hx.shape[-1]
    return _like(hx), torch.empty((batch, 5 * hidden), dtype=hx.dtype, device="meta")


def _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias):
    batch, hidden = grad_hy.shape[0], grad_hy.shape[-1]
    gates = torch.empty((batch, 3 * hidden), dtype=grad_hy.dtype, device="meta")
    bias = torch.empty((3 * hidden,), dtype=grad_hy.dtype, device="meta") if has_bias else None
    return gates, gates.clone(), _like(grad_hy), bias, None if bias is None else bias.clone()


def _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    # Upstream's reads input_bias.device even when the biases are None (LSTM(bias=False)): keep its
    # checks where it works.
    if input_bias is not None and hidden_bias is not None and _upstream("_thnn_fused_lstm_cell_meta"):
        return _upstream("_thnn_fused_lstm_cell_meta")(input_gates, hidden_gates, cx, input_bias, hidden_bias)
    return _like(cx), _like(cx), _like(input_gates)


def _segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None):
    # Upstream's indexes lengths with the axis as given (wrong sizes for axis=-2): wrap it first.
    if indices is not None or _upstream("meta_segment_reduce") is None:
        return _like(data)  # the rule raises the CPU's error for indices
    if data.dim() > 0:
        axis = axis % data.dim()
    return _upstream("meta_segment_reduce")(data, reduce, lengths=lengths, indices=indices, offsets=offsets, axis=axis,
                                            unsafe=unsafe, initial=initial)


def _ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood, log_alpha,
                       blank, zero_infinity=False):
    return _like(log_probs)


def _add_relu_scalar(self, other, alpha=1):
    return torch.ops.aten.add.Scalar(self, other, alpha)


def _logcumsumexp(self, dim):
    return _like(self)


def _ldexp(self, other):
    # PyTorch's meta path promotes ldexp of an integer and a half 0-d tensor to float32; the CPU
    # gives the half type. The dtype is the CPU's on one-element stand-ins of the same ranks.
    def stand_in(t):
        return torch.ones([1] * t.dim(), dtype=t.dtype)
    dtype = torch.ldexp(stand_in(self), stand_in(other)).dtype
    return torch.empty(torch.broadcast_shapes(self.shape, other.shape), dtype=dtype, device="meta")


def _out_variant(functional, *out_names):
    """The Meta kernel of an out= overload whose functional overload has one: the functional
    one's results give the sizes, and each out tensor is resized to them as the CPU kernel
    resizes it (the engine then resizes the real one, or falls back when it is not empty)."""
    def meta(*args, **kwargs):
        outs = [kwargs.pop(name) for name in out_names]
        results = functional(*args, **kwargs)
        results = results if isinstance(results, (tuple, list)) else (results,)
        for out, result in zip(outs, results):
            if out.shape != result.shape:
                out.resize_(result.shape)
        return tuple(outs) if len(outs) > 1 else outs[0]
    return meta


_aten = torch.ops.aten
for _name, _fn in [
    ("_masked_softmax", _masked_softmax),
    ("_masked_softmax_backward", _masked_softmax_backward),
    ("_thnn_fused_gru_cell", _thnn_fused_gru_cell),
    ("_thnn_fused_gru_cell_backward", _thnn_fused_gru_cell_backward),
    ("_thnn_fused_lstm_cell", _thnn_fused_lstm_cell),
    ("segment_reduce", _segment_reduce),
    ("_ctc_loss_backward", _ctc_loss_backward),
    # Ops with rules whose calls fell back to the CPU for want of a Meta kernel (fuzz seed 2).
    ("_add_relu.Scalar", _add_relu_scalar),
    ("_add_relu.out", _out_variant(_aten._add_relu.Tensor, "out")),
    ("_logcumsumexp", _logcumsumexp),
    ("ldexp.Tensor", _ldexp),
    ("_logcumsumexp.out", _out_variant(_aten._logcumsumexp.default, "out")),
    ("_native_batch_norm_legit.out",
     _out_variant(_aten._native_batch_norm_legit.default, "out", "save_mean", "save_invstd")),
    ("_native_batch_norm_legit.no_stats_out",
     _out_variant(_aten._native_batch_norm_legit.no_stats, "out", "save_mean", "save_invstd")),
    ("adaptive_avg_pool3d_backward.grad_input",
     _out_variant(_aten._adaptive_avg_pool3d_backward.default, "grad_input")),
    ("_scaled_mm.out", _out_variant(_aten._scaled_mm.default, "out")),
    ("_scaled_mm_v2.out", _out_variant(_aten._scaled_mm_v2.default, "out")),
]:
    _lib.impl(_name, _fn, "Meta", allow_override=True)
