"""_addmm_activation, weight norm (_weight_norm_interface and its backward) and
embedding_renorm_ (nn.Embedding(max_norm=...)) on tpu against PyTorch on the CPU."""
import pytest
import torch
import torch.nn.functional as F

from helpers import DEV, rand

NAN, INF = float("nan"), float("inf")


def close(got, want, **kw):
    torch.testing.assert_close(got.detach().cpu(), want.detach(), equal_nan=True, **kw)


@pytest.mark.parametrize("use_gelu", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_addmm_activation(use_gelu, dtype, no_fallbacks):
    bias, a, b = rand(3, dtype=dtype), rand(4, 5, dtype=dtype), rand(5, 3, dtype=dtype)
    a[1, 2] = NAN
    for kw in [{}, dict(beta=0.5, alpha=2.0)]:
        got = torch._addmm_activation(bias.to(DEV), a.to(DEV), b.to(DEV), use_gelu=use_gelu, **kw)
        close(got, torch._addmm_activation(bias, a, b, use_gelu=use_gelu, **kw))
    # A transposed (non-contiguous) operand and a 2-D bias.
    got = torch._addmm_activation(rand(4, 3, dtype=dtype).to(DEV), a.to(DEV), rand(3, 5, dtype=dtype).t().to(DEV),
                                  use_gelu=use_gelu)
    close(got, torch._addmm_activation(rand(4, 3, dtype=dtype), a, rand(3, 5, dtype=dtype).t(), use_gelu=use_gelu))


def test_addmm_activation_bfloat16(no_fallbacks):
    bias, a, b = rand(3, dtype=torch.bfloat16), rand(4, 5, dtype=torch.bfloat16), rand(5, 3, dtype=torch.bfloat16)
    for use_gelu in (False, True):
        got = torch._addmm_activation(bias.to(DEV), a.to(DEV), b.to(DEV), use_gelu=use_gelu)
        # addmm-family ops compute bfloat16 in float32 and round once (docs/limits.md); the CPU
        # rounds the product and the bias term separately: compare with the float32 result.
        want = torch._addmm_activation(bias.float(), a.float(), b.float(), use_gelu=use_gelu).bfloat16()
        close(got, want)


@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_weight_norm_forward_backward(dim, dtype, no_fallbacks):
    v = rand(4, 3, 5, dtype=dtype)
    g = rand(*([4, 1, 1] if dim == 0 else [1, 1, 5]), dtype=dtype, seed=1)
    up = rand(4, 3, 5, dtype=dtype, seed=2)
    res = []
    for dev in (DEV, "cpu"):
        vs, gs = v.to(dev).requires_grad_(), g.to(dev).requires_grad_()
        w = torch._weight_norm(vs, gs, dim)
        w.backward(up.to(dev))
        res.append((w, vs.grad, gs.grad))
    for got, want in zip(*res):
        close(got, want)


def test_weight_norm_interface_direct(no_fallbacks):
    v, g = rand(6, 4), rand(6, 1, seed=1)
    v[2, 1] = NAN
    w, norms = torch._weight_norm_interface(v.to(DEV), g.to(DEV), 0)
    want_w, want_norms = torch._weight_norm_interface(v, g, 0)
    close(w, want_w)
    close(norms, want_norms)
    grads = torch.ops.aten._weight_norm_interface_backward(rand(6, 4, seed=3).to(DEV), v.to(DEV), g.to(DEV), norms, 0)
    for got, want in zip(grads, torch.ops.aten._weight_norm_interface_backward(rand(6, 4, seed=3), v, g, want_norms, 0)):
        close(got, want)


def test_weight_norm_module_training_step(no_fallbacks):
    torch.manual_seed(0)
    lin = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(5, 4))
    lin_tpu = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(5, 4))
    lin_tpu.load_state_dict(lin.state_dict())
    lin_tpu.to(DEV)
    x = rand(3, 5)
    lin(x).square().sum().backward()
    lin_tpu(x.to(DEV)).square().sum().backward()
    for (name, p), (_, q) in zip(lin.named_parameters(), lin_tpu.named_parameters()):
        close(q.grad, p.grad, msg=name)


def test_weight_norm_bfloat16(no_fallbacks):
    v, g = rand(4, 6, dtype=torch.bfloat16), rand(4, 1, dtype=torch.bfloat16, seed=1)
    w, norms = torch._weight_norm_interface(v.to(DEV), g.to(DEV), 0)
    want_w, want_norms = torch._weight_norm_interface(v, g, 0)
    assert norms.dtype == want_norms.dtype
    close(w, want_w)
    close(norms, want_norms)


def test_weight_norm_invalid_dim():
    v, g = rand(4, 3, 5), rand(1, 3, 1)
    with pytest.raises(RuntimeError):
        torch._weight_norm_interface(v.to(DEV), g.to(DEV), 1)


def test_weight_norm_g_of_the_wrong_size():
    # The CPU kernel reads v.size(dim) values of g unchecked (out of bounds here); we raise.
    with pytest.raises(RuntimeError, match="g has 3 elements"):
        torch._weight_norm_interface(torch.ones(3, 2, device=DEV), torch.ones(3, 1, device=DEV), 1)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, INF])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_embedding_renorm_(norm_type, dtype, no_fallbacks):
    w = rand(7, 4, dtype=dtype) * 2
    idx = torch.tensor([[0, 2, 2], [5, 0, 6]])
    got, want = w.clone().to(DEV), w.clone()
    torch.embedding_renorm_(got, idx.to(DEV), 1.5, norm_type)
    torch.embedding_renorm_(want, idx, 1.5, norm_type)
    close(got, want)


def test_embedding_max_norm_training(no_fallbacks):
    w = rand(10, 3) * 3
    idx = torch.tensor([[1, 4, 4, 9], [0, 1, 2, 3]])
    res = []
    for dev in (DEV, "cpu"):
        emb = torch.nn.Embedding(10, 3, max_norm=1.0).to(dev)
        with torch.no_grad():
            emb.weight.copy_(w.to(dev))
        out = emb(idx.to(dev))
        out.sum().backward()
        res.append((out, emb.weight, emb.weight.grad))
    for got, want in zip(*res):
        close(got, want)


def test_embedding_renorm_empty_and_nan(no_fallbacks):
    w = rand(5, 3)
    w[1, 0] = NAN
    for idx in (torch.tensor([], dtype=torch.long), torch.tensor([1, 3])):
        got, want = w.clone().to(DEV), w.clone()
        torch.embedding_renorm_(got, idx.to(DEV), 0.5, 2.0)
        torch.embedding_renorm_(want, idx, 0.5, 2.0)
        close(got, want)


def test_embedding_renorm_out_of_range_index():
    w = rand(3, 2).to(DEV)
    with pytest.raises(IndexError):
        torch.embedding_renorm_(w, torch.tensor([5], device=DEV), 1.0, 2.0)
        torch.tpu.synchronize()
