"""Graph form of scaled_dot_product_attention's fused path on tpu.

Eager tpu answers PyTorch's SDPA backend choice with `overrideable` (csrc/engine/composite/
fused_attention.cc), so traced graphs contain _scaled_dot_product_fused_attention_overrideable
and its backward. Their extra outputs (sequence lengths as ints, RNG state, debug mask) are not
tensors our graph driver lowers; these decompositions rewrite both ops to the ATen ops carrying
the same math, which have lowering rules (csrc/lowering/attention.cc), exactly as eager runs them.
"""
import torch

aten = torch.ops.aten


def _forward(query, key, value, attn_bias=None, dropout_p=0.0, is_causal=False, return_debug_mask=False, *,
             scale=None):
    out, logsumexp = aten._scaled_dot_product_flash_attention_for_cpu(
        query, key, value, dropout_p, is_causal, attn_mask=attn_bias, scale=scale)
    rng_state = torch.empty((), dtype=torch.long, device=query.device)
    return out, logsumexp, None, None, query.size(2), key.size(2), rng_state, rng_state, None


def _backward(grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp, cum_seq_q, cum_seq_k,
              max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, *, scale=None):
    if grad_input_mask[3]:
        raise RuntimeError("scaled_dot_product_attention on tpu: no gradient for attn_mask on the fused path")
    dq, dk, dv = aten._scaled_dot_product_flash_attention_for_cpu_backward(
        grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, attn_mask=attn_bias, scale=scale)
    return dq, dk, dv, None


DECOMPOSITIONS = {
    aten._scaled_dot_product_fused_attention_overrideable.default: _forward,
    aten._scaled_dot_product_fused_attention_overrideable_backward.default: _backward,
}
