"""Compiled graphs drop Transformers' repeated key/value heads before masked attention
(torch_tpu/compile/grouped_attention.py): the attention takes the grouped heads, with the
values of the repeated form, and the repeat is not computed where only the attention read it."""
import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

import torch_tpu.compile.backend as backend

from helpers import DEV


def repeat_kv(x, n):
    """Transformers' repeat_kv (models/llama/modeling_llama.py)."""
    b, h, length, d = x.shape
    return x[:, :, None, :, :].expand(b, h, n, length, d).reshape(b, h * n, length, d)


def attention(q, k, v, mask, group):
    return F.scaled_dot_product_attention(q, repeat_kv(k, group), repeat_kv(v, group), attn_mask=mask)


def inputs(batch, heads, kv_heads, q_len, kv_len, dtype, poison):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(batch, heads, q_len, 32, generator=g).to(dtype)
    k, v = (torch.randn(batch, kv_heads, kv_len, 32, generator=g).to(dtype) for _ in range(2))
    mask = torch.rand(batch, 1, q_len, kv_len, generator=g) > 0.3
    mask[..., 0] = True  # every row keeps a key
    if poison:
        k[0, 0, 1] = float("inf")  # an infinite key and a NaN value, both masked out for row 0
        v[-1, -1, 2] = float("nan")
        mask[0, :, 0, 1] = False
        mask[-1, :, :, 2] = False
    return q, k, v, mask


def compiled(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="tpu", fullgraph=True, dynamic=False)


@pytest.mark.parametrize("batch,heads,kv_heads,q_len,kv_len,dtype,poison", [
    (8, 16, 4, 1, 37, torch.float32, False),    # a decode step of a batch: one query row
    (2, 6, 2, 9, 9, torch.float32, True),       # a prefill, with inf and NaN where masked
    (1, 4, 1, 5, 130, torch.bfloat16, False),   # one key/value head for all
])
def test_repeated_heads_are_dropped_and_values_match(monkeypatch, batch, heads, kv_heads, q_len, kv_len, dtype,
                                                       poison):
    group = heads // kv_heads
    q, k, v, mask = inputs(batch, heads, kv_heads, q_len, kv_len, dtype, poison)
    dropped = []

    def counting(gm):
        dropped.append(real(gm))
        return dropped[-1]

    real = backend.drop_repeated_kv
    monkeypatch.setattr(backend, "drop_repeated_kv", counting)
    fn = lambda q, k, v, m: attention(q, k, v, m, group)  # noqa: E731
    with torch.no_grad():
        got = compiled(fn)(q.to(DEV), k.to(DEV), v.to(DEV), mask.to(DEV)).cpu()
    assert dropped == [1]
    monkeypatch.setattr(backend, "drop_repeated_kv", lambda gm: 0)
    with torch.no_grad():
        repeated = compiled(fn)(q.to(DEV), k.to(DEV), v.to(DEV), mask.to(DEV)).cpu()
    tol = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(got, repeated, equal_nan=True, **tol)
    torch.testing.assert_close(got, fn(q, k, v, mask), equal_nan=True, **tol)


def test_a_repeat_read_elsewhere_is_kept_and_the_attention_still_grouped(monkeypatch):
    q, k, v, mask = inputs(2, 4, 2, 3, 7, torch.float32, False)

    def fn(q, k, v, m):
        kr = repeat_kv(k, 2)
        out = F.scaled_dot_product_attention(q, kr, repeat_kv(v, 2), attn_mask=m)
        return out, kr.sum(dim=(2, 3))  # the repeated keys are an output's input too

    with torch.no_grad():
        got = compiled(fn)(q.to(DEV), k.to(DEV), v.to(DEV), mask.to(DEV))
    for a, b in zip(got, fn(q, k, v, mask)):
        torch.testing.assert_close(a.cpu(), b)


def test_keys_repeated_but_values_not_keep_the_repeated_form():
    q, k, v, mask = inputs(1, 4, 2, 3, 7, torch.float32, False)
    v_full = torch.randn(1, 4, 7, 32)

    def fn(q, k, v, m):
        return F.scaled_dot_product_attention(q, repeat_kv(k, 2), v, attn_mask=m)

    with torch.no_grad():
        got = compiled(fn)(q.to(DEV), k.to(DEV), v_full.to(DEV), mask.to(DEV)).cpu()
    torch.testing.assert_close(got, fn(q, k, v_full, mask))


def test_training_graph_keeps_gradients_of_the_repeated_heads():
    q, k, v, mask = inputs(2, 4, 2, 3, 7, torch.float32, False)
    fn = lambda q, k, v, m: attention(q, k, v, m, 2)  # noqa: E731
    leaves = [t.to(DEV).requires_grad_() for t in (q, k, v)]
    compiled(fn)(*leaves, mask.to(DEV)).sum().backward()
    ref = [t.clone().requires_grad_() for t in (q, k, v)]
    fn(*ref, mask).sum().backward()
    for a, b in zip(leaves, ref):
        torch.testing.assert_close(a.grad.cpu(), b.grad)
