"""Convolution, pooling, group norm and upsampling lowerings (conv.cc) against PyTorch CPU."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu

from helpers import DEV, check, close, fallbacks  # noqa: F401

pytestmark = pytest.mark.usefixtures("no_fallbacks")

TOL = dict(atol=1e-4, rtol=1e-4)
BF16 = dict(atol=6e-2, rtol=6e-2)


def tol(dtype):
    return TOL if dtype == torch.float32 else BF16


def grads(fn, *xs, seed=0):
    """fn(*xs) and the gradients of a fixed random projection of it w.r.t. every float input."""
    leaves = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in xs]
    y = fn(*leaves)
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(seed)).to(y.dtype).to(y.device)
    y.backward(g)
    return (y,) + tuple(x.grad for x in leaves if x.requires_grad)


def dispatch_has(op, key):
    return torch._C._dispatch_has_kernel_for_dispatch_key(op, key)


def test_which_ops_reach_backend():
    # conv2d/group_norm/max_pool2d/adaptive_avg_pool2d decompose; these are what we lower.
    for op in ["aten::conv2d", "aten::group_norm", "aten::max_pool2d", "aten::adaptive_avg_pool2d"]:
        assert dispatch_has(op, "CompositeImplicitAutograd")
    rules = set(torch_tpu._C._lowering_rules())
    for r in ["convolution", "convolution_backward", "max_pool2d_with_indices", "avg_pool2d",
              "_adaptive_avg_pool2d", "native_group_norm", "upsample_nearest2d", "upsample_bilinear2d"]:
        assert r in rules


# ---- convolution ----

CONV2D_CASES = [
    # (N, Cin, H, W, Cout, k, stride, padding, dilation, groups)
    (2, 4, 7, 6, 6, 3, 1, 1, 1, 1),
    (2, 4, 7, 6, 6, 3, 2, 1, 1, 2),
    (1, 4, 9, 8, 4, 3, 1, 2, 2, 4),
    (2, 3, 8, 8, 5, (3, 1), (2, 1), (1, 0), 1, 1),
    (1, 2, 5, 5, 3, 1, 1, 0, 1, 1),
    (2, 4, 6, 7, 4, 2, 3, 0, 1, 1),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", CONV2D_CASES)
def test_conv2d_forward_backward(case, dtype):
    n, cin, h, w, cout, k, s, p, d, g = case
    kh, kw = (k, k) if isinstance(k, int) else k
    x = torch.randn(n, cin, h, w).to(dtype)
    wt = (torch.randn(cout, cin // g, kh, kw) * 0.3).to(dtype)
    b = torch.randn(cout).to(dtype)
    fn = lambda x, wt, b: F.conv2d(x, wt, b, stride=s, padding=p, dilation=d, groups=g)
    check(fn, x, wt, b, dtype=dtype, **tol(dtype))
    close(grads(fn, x.to(DEV), wt.to(DEV), b.to(DEV)), grads(fn, x, wt, b), dtype, **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 1, 2), (3, 2, 2, 1)])
def test_conv1d(dtype, stride, padding, dilation, groups):
    x = torch.randn(2, 4, 11).to(dtype)
    wt = (torch.randn(6, 4 // groups, 3) * 0.3).to(dtype)
    fn = lambda x, wt: F.conv1d(x, wt, stride=stride, padding=padding, dilation=dilation, groups=groups)
    check(fn, x, wt, dtype=dtype, **tol(dtype))
    close(grads(fn, x.to(DEV), wt.to(DEV)), grads(fn, x, wt), dtype, **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape,kernel,stride,padding,dilation", [
    ((2, 6, 13), 4, 1, 3, 1),              # Qwen3.5's causal conv1d (padding k-1)
    ((1, 5, 12), 3, 2, 1, 2),
    ((2, 3, 7, 9), (3, 2), (2, 1), (1, 0), (1, 2)),
    ((1, 2, 4, 5, 6), 2, 1, 1, 1),
])
def test_depthwise_conv_weight_grad(dtype, shape, kernel, stride, padding, dilation):
    """Depthwise kernels take a multiply-and-reduce gradient path (conv.cc)."""
    channels, nsp = shape[1], len(shape) - 2
    k = (kernel,) * nsp if isinstance(kernel, int) else kernel
    x = torch.randn(*shape).to(dtype)
    wt = (torch.randn(channels, 1, *k) * 0.3).to(dtype)
    conv = [F.conv1d, F.conv2d, F.conv3d][nsp - 1]
    fn = lambda x, wt: conv(x, wt, stride=stride, padding=padding, dilation=dilation, groups=channels)
    check(fn, x, wt, dtype=dtype, **tol(dtype))
    close(grads(fn, x.to(DEV), wt.to(DEV)), grads(fn, x, wt), dtype, **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_conv3d(dtype):
    x = torch.randn(1, 2, 5, 6, 4).to(dtype)
    wt = (torch.randn(4, 2, 3, 3, 2) * 0.3).to(dtype)
    b = torch.randn(4).to(dtype)
    fn = lambda x, wt, b: F.conv3d(x, wt, b, stride=(1, 2, 1), padding=1)
    check(fn, x, wt, b, dtype=dtype, **tol(dtype))
    close(grads(fn, x.to(DEV), wt.to(DEV), b.to(DEV)), grads(fn, x, wt, b), dtype, **tol(dtype))


def test_conv2d_padding_same_and_unbatched():
    x = torch.randn(3, 7, 6)
    wt = torch.randn(5, 3, 3, 3) * 0.3
    check(lambda x, wt: F.conv2d(x, wt, padding="same"), x, wt, **TOL)
    check(lambda x, wt: F.conv2d(x, wt, padding="valid"), x, wt, **TOL)
    check(lambda x, wt: F.conv2d(x, wt, padding="same", dilation=2), x.unsqueeze(0), wt, **TOL)


def test_conv2d_noncontiguous():
    x = torch.randn(2, 6, 8, 4).transpose(2, 3)
    wt = torch.randn(3, 6, 3, 3).transpose(2, 3)
    check(lambda x, wt: F.conv2d(x, wt, padding=1), x, wt, **TOL)
    xc = torch.randn(2, 8, 8, 4).permute(0, 3, 1, 2)  # channels_last-like
    check(lambda x, wt: F.conv2d(x, wt, padding=1), xc, torch.randn(3, 4, 3, 3) * 0.3, **TOL)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("stride,padding,output_padding,dilation,groups",
                         [(1, 0, 0, 1, 1), (2, 1, 1, 1, 1), (2, 1, 0, 1, 2), (3, 0, 2, 1, 1), (2, 2, 1, 2, 2)])
def test_conv_transpose2d(dtype, stride, padding, output_padding, dilation, groups):
    x = torch.randn(2, 4, 5, 4).to(dtype)
    wt = (torch.randn(4, 6 // groups, 3, 3) * 0.3).to(dtype)
    b = torch.randn(6).to(dtype)
    fn = lambda x, wt, b: F.conv_transpose2d(x, wt, b, stride=stride, padding=padding,
                                             output_padding=output_padding, groups=groups, dilation=dilation)
    check(fn, x, wt, b, dtype=dtype, **tol(dtype))
    close(grads(fn, x.to(DEV), wt.to(DEV), b.to(DEV)), grads(fn, x, wt, b), dtype, **tol(dtype))


def test_conv_transpose1d():
    x = torch.randn(2, 3, 6)
    wt = torch.randn(3, 2, 4) * 0.3
    fn = lambda x, wt: F.conv_transpose1d(x, wt, stride=2, padding=1)
    close(grads(fn, x.to(DEV), wt.to(DEV)), grads(fn, x, wt), **TOL)


def test_nn_conv2d_module_training():
    torch.manual_seed(0)
    m = torch.nn.Conv2d(4, 8, 3, padding=1, stride=2)
    md = torch.nn.Conv2d(4, 8, 3, padding=1, stride=2).to(DEV)
    md.load_state_dict(m.state_dict())
    x = torch.randn(2, 4, 9, 9)
    for mod, inp in ((m, x), (md, x.to(DEV))):
        mod(inp).square().mean().backward()
    close(md.weight.grad, m.weight.grad, **TOL)
    close(md.bias.grad, m.bias.grad, **TOL)


def test_convolution_backward_output_mask():
    x, wt = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)
    go = torch.randn(1, 3, 3, 3)
    for mask in ([True, False, False], [False, True, True], [True, True, False]):
        r = torch.ops.aten.convolution_backward(go.to(DEV), x.to(DEV), wt.to(DEV), [3], [1, 1], [0, 0], [1, 1],
                                                False, [0, 0], 1, mask)
        e = torch.ops.aten.convolution_backward(go, x, wt, [3], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, mask)
        for a, b_, m in zip(r, e, mask):
            if m:
                close(a, b_, **TOL)
            else:
                assert a is None


def test_convolution_direct_overloads():
    x, wt, b = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3), torch.randn(3)
    check(lambda x, wt, b: torch.ops.aten._convolution(x, wt, b, [2, 1], [1, 1], [1, 1], False, [0, 0], 1,
                                                       False, False, True, True), x, wt, b, **TOL)
    check(lambda x, wt, b: torch.ops.aten.convolution(x, wt, b, [2, 2], [1, 1], [1, 1], True, [1, 1], 1),
          torch.randn(1, 3, 4, 4), wt, torch.randn(2), **TOL)


def test_backward_out_variants():
    x = torch.randn(2, 3, 6, 6)
    g = torch.randn(2, 3, 3, 3)

    def avg_bwd(g, x):
        out = torch.empty_like(x)
        return torch.ops.aten.avg_pool2d_backward.grad_input(g, x, [2, 2], [2, 2], [0, 0], False, True, None,
                                                             grad_input=out)
    check(avg_bwd, g, x, **TOL)

    def max_bwd(g, x):
        _, idx = F.max_pool2d(x, 2, return_indices=True)
        out = torch.empty_like(x)
        return torch.ops.aten.max_pool2d_with_indices_backward.grad_input(g, x, [2, 2], [2, 2], [0, 0], [1, 1],
                                                                          False, idx, grad_input=out)
    check(max_bwd, g, x)

    def near_bwd(g):
        out = torch.empty(2, 3, 6, 6, device=g.device)
        return torch.ops.aten.upsample_nearest2d_backward.grad_input(g, [3, 3], [2, 3, 6, 6], None, None,
                                                                     grad_input=out)
    check(near_bwd, g)

    def bil_bwd(g):
        out = torch.empty(2, 3, 6, 6, device=g.device)
        return torch.ops.aten.upsample_bilinear2d_backward.grad_input(g, [3, 3], [2, 3, 6, 6], True, None, None,
                                                                      grad_input=out)
    check(bil_bwd, g, **TOL)

    def avg_out(x):
        out = torch.empty(2, 3, 3, 3, device=x.device)
        torch._C._nn.avg_pool2d(x, 2, out=out)
        return out
    check(avg_out, x, **TOL)


def test_conv_bad_input():
    with pytest.raises(Exception):
        F.conv2d(torch.randn(1, 3, 5, 5, device=DEV), torch.randn(4, 2, 3, 3, device=DEV))


# ---- pooling ----

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("k,s,p,d,ceil", [(2, None, 0, 1, False), (3, 2, 1, 1, False), (3, 2, 1, 1, True),
                                          (2, 2, 0, 1, True), ((3, 2), (1, 2), (1, 0), 2, False)])
def test_max_pool2d(dtype, k, s, p, d, ceil):
    x = torch.randn(2, 3, 7, 8).to(dtype)
    fn = lambda x: F.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)
    check(fn, x, dtype=dtype)
    close(grads(lambda x: F.max_pool2d(x, k, s, p, d, ceil_mode=ceil), x.to(DEV)),
          grads(lambda x: F.max_pool2d(x, k, s, p, d, ceil_mode=ceil), x), dtype)


def test_max_pool2d_ties_and_unbatched():
    x = torch.tensor([[[1.0, 1.0, 0.0], [1.0, 2.0, 2.0], [0.0, 2.0, -1.0]]])
    check(lambda x: F.max_pool2d(x, 2, 1, return_indices=True), x)
    check(lambda x: F.max_pool2d(x, 2, 1, return_indices=True), torch.full((1, 1, 4, 4), -float("inf")))
    check(lambda x: F.max_pool2d(x, 3, 2, 1), torch.randn(3, 6, 5))
    check(lambda x: F.max_pool2d(x, 2), torch.randn(2, 3, 8, 6).transpose(2, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("k,s,p,ceil,include,div", [
    (2, None, 0, False, True, None), (3, 2, 1, False, True, None), (3, 2, 1, False, False, None),
    (3, 2, 1, True, True, None), (3, 2, 1, True, False, None), (2, 2, 1, True, False, 3),
    ((3, 2), (2, 1), (1, 1), False, True, None)])
def test_avg_pool2d(dtype, k, s, p, ceil, include, div):
    x = torch.randn(2, 3, 7, 8).to(dtype)
    fn = lambda x: F.avg_pool2d(x, k, s, p, ceil_mode=ceil, count_include_pad=include, divisor_override=div)
    check(fn, x, dtype=dtype, **tol(dtype))
    close(grads(fn, x.to(DEV)), grads(fn, x), dtype, **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("out", [(1, 1), (2, 4), (3, 3), (5, 3), 4])
def test_adaptive_avg_pool2d(dtype, out):
    x = torch.randn(2, 3, 8, 12).to(dtype)
    fn = lambda x: F.adaptive_avg_pool2d(x, out)
    check(fn, x, dtype=dtype, **tol(dtype))
    close(grads(fn, x.to(DEV)), grads(fn, x), dtype, **tol(dtype))
    check(fn, torch.randn(3, 7, 9).to(dtype), dtype=dtype, **tol(dtype))


# ---- group norm ----

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape,groups,affine", [((2, 8, 5, 4), 4, True), ((2, 6, 7), 3, False),
                                                 ((1, 4, 3, 2, 2), 1, True), ((3, 4), 2, True)])
def test_group_norm(dtype, shape, groups, affine):
    c = shape[1]
    x = (torch.randn(shape) * 3 + 1).to(dtype)
    args = [x]
    if affine:
        args += [torch.randn(c).to(dtype), torch.randn(c).to(dtype)]
        fn = lambda x, w, b: F.group_norm(x, groups, w, b, eps=1e-5)
    else:
        fn = lambda x: F.group_norm(x, groups, eps=1e-5)
    check(fn, *args, dtype=dtype, **tol(dtype))
    close(grads(fn, *[a.to(DEV) for a in args]), grads(fn, *args), dtype, **tol(dtype))


def test_nn_group_norm_module():
    m = torch.nn.GroupNorm(4, 8)
    with torch.no_grad():
        m.weight.normal_()
        m.bias.normal_()
    md = torch.nn.GroupNorm(4, 8).to(DEV)
    md.load_state_dict(m.state_dict())
    x = torch.randn(2, 8, 4, 4)
    close(grads(md, x.to(DEV)), grads(m, x), **TOL)
    mean, rstd = torch.ops.aten.native_group_norm(x, None, None, 2, 8, 16, 4, 1e-5)[1:]
    r = torch.ops.aten.native_group_norm(x.to(DEV), None, None, 2, 8, 16, 4, 1e-5)
    close(r[1], mean, **TOL)
    close(r[2], rstd, **TOL)


# ---- upsampling ----

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kw", [dict(scale_factor=2), dict(size=(7, 5)), dict(size=(3, 10)),
                                dict(scale_factor=(1.5, 0.5)), dict(scale_factor=3)])
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_interpolate_nearest(dtype, kw, mode):
    x = torch.randn(2, 3, 4, 6).to(dtype)
    fn = lambda x: F.interpolate(x, mode=mode, **kw)
    check(fn, x, dtype=dtype)
    close(grads(fn, x.to(DEV)), grads(fn, x), dtype, **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("kw", [dict(scale_factor=2), dict(size=(7, 5)), dict(size=(1, 9)),
                                dict(scale_factor=(1.5, 0.5))])
def test_interpolate_bilinear(dtype, align, kw):
    x = torch.randn(2, 3, 4, 6).to(dtype)
    fn = lambda x: F.interpolate(x, mode="bilinear", align_corners=align, **kw)
    check(fn, x, dtype=dtype, **tol(dtype))
    close(grads(fn, x.to(DEV)), grads(fn, x), dtype, **tol(dtype))


def test_upsample_module_noncontiguous():
    x = torch.randn(2, 3, 6, 4).transpose(2, 3)
    check(lambda x: torch.nn.Upsample(scale_factor=2, mode="nearest")(x), x)
    check(lambda x: torch.nn.Upsample(scale_factor=2, mode="bilinear")(x), x, **TOL)


# ---- a small UNet-ish block end to end ----

def test_unet_block_training_step():
    torch.manual_seed(0)

    def block():
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.GroupNorm(4, 8), torch.nn.SiLU(),
            torch.nn.Conv2d(8, 8, 3, stride=2, padding=1), torch.nn.Upsample(scale_factor=2, mode="nearest"),
            torch.nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1), torch.nn.AvgPool2d(2),
            torch.nn.AdaptiveAvgPool2d(2))

    m = block()
    md = block().to(DEV)
    md.load_state_dict(m.state_dict())
    x = torch.randn(2, 3, 8, 8)
    lc = m(x).square().mean()
    ld = md(x.to(DEV)).square().mean()
    lc.backward()
    ld.backward()
    close(ld, lc, **TOL)
    for (n, p), pd in zip(m.named_parameters(), md.parameters()):
        close(pd.grad, p.grad, atol=1e-4, rtol=1e-3)
