"""Activations, misc element-wise ops, losses, cumulative ops and _foreach unary ops vs PyTorch
on the CPU: NaN/+-inf/-0.0 in every operand, odd extents, non-contiguous and 0-size inputs,
float32/bfloat16/float64 and integer dtypes, gradients against CPU autograd, bad input.

bfloat16 results are compared with the CPU's float32 result rounded once to bfloat16 (our
kernels compute in float32 and round once; the CPU's bf16 kernels sometimes round per step),
at assert_close's default bfloat16 tolerances."""
import math

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

from cpu_loops import either, scalar_loop, vector_loop

from helpers import DEV

NAN, INF = float("nan"), float("inf")
FLOATS = [torch.float32, torch.bfloat16, torch.float64]


def fallbacks():
    return dict(torch_tpu.metrics.counters()["fallbacks"])


def edge(shape, dtype=torch.float32, lo=-4.0, hi=4.0, seed=0, specials=(NAN, INF, -INF, -0.0, 0.0)):
    """Uniform values in [lo, hi) with NaN, +-inf, -0.0 and 0.0 at the first positions."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo
    flat = x.view(-1)
    for i, v in enumerate(specials[: flat.numel()]):
        flat[i] = v
    return x.to(dtype)


def ints(shape, dtype, lo=-20, hi=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.uint8:
        lo = max(lo, 0)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


# Layouts: applied to the CPU tensor and to its tpu copy alike.
LAYOUTS = {
    "contiguous": lambda x: x,
    "transposed": lambda x: x.transpose(0, 1),
    "step_slice": lambda x: x[:, ::2],
}


def to_dev(x):
    return x.to(DEV) if isinstance(x, torch.Tensor) else x


def upcast(x):
    if isinstance(x, torch.Tensor) and x.dtype in (torch.bfloat16, torch.float16):
        return x.float()
    return x


def compare(got, exp, dtype=None, exp_dtype=None):
    """got (a tpu result) equals exp; with a low-precision dtype, a float32 exp is rounded to it
    first. exp_dtype: the dtype PyTorch gives (when exp was computed in float32)."""
    if isinstance(exp, (tuple, list)):
        assert len(got) == len(exp)
        for i, (g, e) in enumerate(zip(got, exp)):
            compare(g, e, dtype, exp_dtype[i] if exp_dtype else None)
        return
    if dtype in (torch.bfloat16, torch.float16) and got.dtype == dtype and exp.dtype == torch.float32:
        exp = exp.to(dtype)
    assert got.dtype == (exp_dtype or exp.dtype), (got.dtype, exp_dtype, exp.dtype)
    assert got.shape == exp.shape, (got.shape, exp.shape)
    torch.testing.assert_close(got.cpu(), exp, equal_nan=True, check_dtype=False)


def dtypes_of(r):
    return [t.dtype for t in r] if isinstance(r, (tuple, list)) else [r.dtype]


def check(f, *xs, dtype=None, layout=None, native=False, loops=None):
    """f on tpu copies of xs vs f on the CPU. bf16/f16 inputs: against the CPU's float32 result
    rounded once, unless `native` (ops without arithmetic, e.g. nan_to_num). `loops`: the name of
    a point-wise op whose CPU loops may disagree (cpu_loops.py): the CPU result is taken both ways
    and each element may match either."""
    view = LAYOUTS[layout] if layout else (lambda x: x)
    before = fallbacks()
    dev = [view(to_dev(x)) if isinstance(x, torch.Tensor) else x for x in xs]
    cpu = [view(x) if isinstance(x, torch.Tensor) else x for x in xs]
    low = dtype in (torch.bfloat16, torch.float16) and not native
    got = f(*dev)
    exp_native = f(*cpu)
    ref_in = [upcast(x) for x in cpu] if low else cpu
    exp = either(got, scalar_loop(f, *ref_in), vector_loop(f, *ref_in), loops) if loops else f(*ref_in)
    types = dtypes_of(exp_native)
    compare(got, exp, dtype if low else None, types if isinstance(exp, (tuple, list)) else types[0])
    assert fallbacks() == before, fallbacks()
    return got


def _autograd(f, r):
    """(f(xs), d sum(f(xs) * r) / d xs for each float input) on the CPU, as one point-wise function
    of (r, *xs) that cpu_loops can evaluate either way."""
    def run(r, *xs):
        leaves = [x.clone().requires_grad_() if x.is_floating_point() else x for x in xs]
        out = f(*leaves)
        (out * r).sum().backward()
        return (out.detach(),) + tuple(x.grad for x in leaves if x.is_floating_point())
    return run


def check_grad(f, *xs, grad_seed=1, dtype=None, native=False, loops=None):
    """Gradients of sum(f(xs) * r) w.r.t. every float input, tpu vs CPU autograd (in float32
    for bf16 inputs unless `native`). `loops` as in check()."""
    before = fallbacks()
    low = dtype in (torch.bfloat16, torch.float16)
    cast = (lambda x: x) if native else upcast
    cpu = [cast(x) for x in xs]
    dev = [to_dev(x).clone().requires_grad_() if x.is_floating_point() else to_dev(x) for x in xs]
    ref_out = f(*cpu)
    g = torch.Generator().manual_seed(grad_seed)
    r = torch.rand(ref_out.shape, generator=g).to(dtype or torch.float32).to(ref_out.dtype)  # exact in bf16
    out_d = f(*dev)
    (out_d * r.to(out_d.dtype).to(DEV)).sum().backward()
    got = (out_d.detach(),) + tuple(d.grad for d in dev if d.is_floating_point())
    run = _autograd(f, r)
    exp = either(got, scalar_loop(run, r, *cpu), vector_loop(run, r, *cpu), loops) if loops else run(r, *cpu)
    compare(got, exp, dtype if low else None)
    assert fallbacks() == before, fallbacks()


@pytest.fixture
def no_fallbacks():
    before = fallbacks()
    yield
    assert fallbacks() == before, fallbacks()


# ----------------------------------------------------------------------------------------------
# Activations
# ----------------------------------------------------------------------------------------------

ACTIVATIONS = {
    "elu": lambda x: F.elu(x),
    "elu_params": lambda x: F.elu(x, alpha=0.7) * 1.0 + torch.ops.aten.elu(x, 1.3, 1.1, 0.9),
    "selu": F.selu,
    "celu": lambda x: F.celu(x, alpha=1.5),
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "logit": torch.logit,
    "logit_eps": lambda x: torch.logit(x, eps=0.1),
    "logsigmoid": F.logsigmoid,
    "threshold": lambda x: F.threshold(x, 0.5, -2.0),
    "glu_last": lambda x: F.glu(x[..., :6], dim=-1),
    "glu_first": lambda x: F.glu(x[:4], dim=0),
    "prelu": lambda x: F.prelu(x, torch.tensor([0.25], device=x.device, dtype=x.dtype)),
    "signbit": torch.signbit,
    "angle": torch.angle,
    "nan_to_num": torch.nan_to_num,
    "nan_to_num_args": lambda x: torch.nan_to_num(x, nan=1.5, posinf=1e40, neginf=-7.0),
}
# The ATen op behind each point-wise activation: its CPU reference is taken both ways
# (cpu_loops.py); glu and prelu (a weight of another shape) are not point-wise.
FORWARD_OPS = {"elu": "elu", "elu_params": "elu", "selu": "elu", "celu": "elu", "hardsigmoid": "hardsigmoid",
               "hardswish": "hardswish", "logit": "logit", "logit_eps": "logit", "logsigmoid": "log_sigmoid_forward",
               "threshold": "threshold", "signbit": "signbit", "angle": "angle", "nan_to_num": "nan_to_num",
               "nan_to_num_args": "nan_to_num"}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_forward(name, dtype, layout):
    x = edge((7, 13), dtype, lo=-5, hi=5, seed=3)
    if name.startswith("logit"):
        x = edge((7, 13), dtype, lo=-0.2, hi=1.2, seed=3, specials=(NAN, INF, -INF, -0.0, 0.0, 1.0))
    check(ACTIVATIONS[name], x, dtype=dtype, layout=layout, native=name.startswith("nan_to_num"),
          loops=FORWARD_OPS.get(name))


@pytest.mark.parametrize("name", ["elu", "hardsigmoid", "hardswish", "logsigmoid", "threshold", "signbit", "nan_to_num"])
def test_activation_zero_size(name, no_fallbacks):
    x = torch.empty(0, 5)
    check(ACTIVATIONS[name], x)


GRAD_ACTIVATIONS = {
    "elu": lambda x: F.elu(x, alpha=0.8),
    "selu": F.selu,
    "celu": lambda x: F.celu(x, alpha=1.5),
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "logit": torch.logit,
    "logit_eps": lambda x: torch.logit(x, eps=0.2),
    "logsigmoid": F.logsigmoid,
    "glu": lambda x: F.glu(x, dim=-2),
    "elu_inplace": lambda x: F.elu(x * 1.0, alpha=1.2, inplace=True),  # backward from the result
    "hardswish_inplace": lambda x: F.hardswish(x * 1.0, inplace=True),
}
BACKWARD_OPS = {"elu": "elu_backward", "selu": "elu_backward", "celu": "elu_backward", "elu_inplace": "elu_backward",
                "hardsigmoid": "hardsigmoid_backward", "hardswish": "hardswish_backward",
                "hardswish_inplace": "hardswish_backward", "logit": "logit_backward", "logit_eps": "logit_backward",
                "logsigmoid": "log_sigmoid_backward"}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("name", list(GRAD_ACTIVATIONS))
def test_activation_backward(name, dtype):
    # NaN, the infinities and both zeros in every dtype: where PyTorch CPU's own loops disagree
    # (float64's vector loop at NaN, say), either answer is accepted (cpu_loops.py).
    x = edge((6, 5), dtype, lo=-5, hi=5, seed=4)
    if name.startswith("logit"):
        x = edge((6, 5), dtype, lo=-0.2, hi=1.2, seed=4, specials=(NAN, -0.0, 0.0, 1.0, 0.1, 0.9))
    # elu's in-place backward reads the (rounded) result: compare with the CPU's bf16 autograd.
    check_grad(GRAD_ACTIVATIONS[name], x, dtype=dtype, native=name == "elu_inplace", loops=BACKWARD_OPS.get(name))


def test_activation_backward_at_kinks(no_fallbacks):
    # The branch points of every piecewise formula, plus NaN and the infinities.
    x = torch.tensor([-3.0, 3.0, 0.0, -0.0, NAN, INF, -INF, -3.0001, 2.9999, 1e-8])
    for name in ["elu", "hardsigmoid", "hardswish", "logsigmoid", "elu_inplace", "hardswish_inplace"]:
        check_grad(GRAD_ACTIVATIONS[name], x, loops=BACKWARD_OPS[name])
    g = torch.full_like(x, -1.5)
    p = torch.tensor([0.0, -0.0, 1.0, 0.5, -1.0, 2.0, NAN, INF, -INF, 0.25])
    check(lambda g, x: torch.ops.aten.logit_backward(g, x), g, p, loops="logit_backward")
    check(lambda g, x: torch.ops.aten.logit_backward(g, x, 0.0), g, p, loops="logit_backward")
    # log_sigmoid_backward reads the forward's buffer, like the CPU kernel.
    out, buf = torch.ops.aten.log_sigmoid_forward(x)
    dev_out, dev_buf = check(torch.ops.aten.log_sigmoid_forward, x)
    compare(torch.ops.aten.log_sigmoid_backward(g.to(DEV), x.to(DEV), dev_buf), torch.ops.aten.log_sigmoid_backward(g, x, buf))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_prelu_forward_backward(dtype):
    x = edge((4, 3, 5), dtype, seed=5)
    w = torch.tensor([0.25, -0.5, 2.0], dtype=dtype)
    check_grad(lambda x, w: F.prelu(x, w), x, w, dtype=dtype)
    check_grad(lambda x, w: F.prelu(x, w), x, torch.tensor([0.3], dtype=dtype), dtype=dtype)
    check_grad(lambda x, w: torch.ops.aten._prelu_kernel(x, w.view(1, 3, 1)), x, w, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int64, torch.uint8])
def test_threshold_dtypes(dtype, no_fallbacks):
    x = edge((5, 9), dtype, seed=6) if dtype.is_floating_point else ints((5, 9), dtype)
    check(lambda x: torch.threshold(x, 2, 9), x, dtype=dtype)
    check(lambda x: torch.threshold(x, 2.5, -1), x, dtype=dtype) if dtype != torch.uint8 else None
    y = to_dev(x).clone()
    torch.threshold_(y, 1, 7)
    compare(y, torch.threshold(x, 1, 7))


def test_add_relu(no_fallbacks):
    # At a NaN sum the CPU's vector loop gives NaN, its scalar loop 0: both are references.
    for dtype in [torch.float32, torch.float64, torch.int64]:
        sp = (INF, -INF, -0.0, NAN)  # the CPU clamps inf to the largest finite value
        x = edge((9, 11), dtype, seed=7, specials=sp) if dtype.is_floating_point else ints((9, 11), dtype)
        y = edge((9, 11), dtype, seed=8, specials=()) if dtype.is_floating_point else ints((9, 11), dtype, seed=8)
        check(lambda a, b: torch.ops.aten._add_relu(a, b, alpha=2), x, y, dtype=dtype, loops="_add_relu")
        z = to_dev(x).clone()
        torch.ops.aten._add_relu_(z, to_dev(y))
        add_relu_ = lambda a, b: torch.ops.aten._add_relu_(a.clone(), b)  # noqa: E731
        compare(z, either(z, scalar_loop(add_relu_, x, y), vector_loop(add_relu_, x, y), "_add_relu"))


def test_glu_bad_dim():
    x = torch.randn(3, 5)
    with pytest.raises(RuntimeError, match="even"):
        F.glu(x, dim=1)
    with pytest.raises(RuntimeError, match="even"):
        F.glu(x.to(DEV), dim=1)
    with pytest.raises(IndexError):
        F.glu(x.to(DEV), dim=2)


# ----------------------------------------------------------------------------------------------
# Misc element-wise ops
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_xlogy_overloads(dtype, no_fallbacks):
    x = edge((6, 7), dtype, lo=-2, hi=3, seed=9)
    y = edge((6, 7), dtype, lo=-1, hi=3, seed=10, specials=(0.0, NAN, INF, 0.0, -0.0, -INF, 1.0))
    x.view(-1)[7:14] = torch.tensor([0.0, 0.0, 0.0, -0.0, 1.0, NAN, 0.0], dtype=dtype)
    check(torch.xlogy, x, y, dtype=dtype)
    check(torch.xlogy, x, y, dtype=dtype, layout="transposed")
    check(lambda y: torch.xlogy(2.5, y), y, dtype=dtype)
    check(lambda x: torch.xlogy(x, 3), x, dtype=dtype)
    check(lambda x, y: torch.xlogy(x, y[:1]), x, y, dtype=dtype)  # broadcast
    check(lambda x: torch.special.xlogy(x, 0.0), x, dtype=dtype)


def test_xlogy_int_and_mixed(no_fallbacks):
    a, b = ints((4, 5), torch.int64, lo=-3, hi=4), ints((4, 5), torch.int32, lo=0, hi=5, seed=2)
    check(torch.xlogy, a, b)
    check(torch.xlogy, a, edge((4, 5), torch.bfloat16, seed=3), dtype=torch.bfloat16)
    y = edge((4, 5), seed=4).to(DEV)
    y.xlogy_(2.0)
    compare(y, edge((4, 5), seed=4).xlogy(2.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.float16])
def test_nan_to_num(dtype, no_fallbacks):
    x = edge((5, 7), dtype, seed=11, specials=(NAN, INF, -INF, -0.0, NAN, INF))
    for kw in [{}, {"nan": 2.0}, {"posinf": 10.0, "neginf": -10.0}, {"nan": -1.0, "posinf": 1e40, "neginf": -1e40}]:
        check(lambda x: torch.nan_to_num(x, **kw), x, dtype=dtype, native=True)
    y = to_dev(x).clone()
    torch.nan_to_num_(y, nan=3.0)
    compare(y, torch.nan_to_num(x, nan=3.0))


def test_nan_to_num_integers(no_fallbacks):
    for dtype in [torch.int32, torch.int64, torch.uint8, torch.bool]:
        x = ints((3, 4), dtype) if dtype != torch.bool else ints((3, 4), torch.int64) > 0
        check(lambda x: torch.nan_to_num(x, nan=1.0), x)


@pytest.mark.parametrize("dtype", FLOATS + [torch.float16, torch.int8, torch.int32, torch.int64, torch.uint8, torch.bool])
def test_signbit(dtype, no_fallbacks):
    if dtype.is_floating_point:
        x = torch.tensor([-0.0, 0.0, NAN, -NAN, INF, -INF, -1e-30, 2.0, -3.0], dtype=dtype)
        x[3] = -torch.tensor(NAN, dtype=dtype)  # a NaN with the sign bit set
    elif dtype == torch.bool:
        x = torch.tensor([True, False])
    else:
        x = ints((3, 5), dtype)
    check(torch.signbit, x)


def test_angle(no_fallbacks):
    for dtype in FLOATS:
        check(torch.angle, edge((5, 7), dtype, seed=12), dtype=dtype)
    check(torch.angle, ints((5, 7), torch.int64))
    check(torch.angle, ints((5, 7), torch.int32))
    re = edge((4, 6), seed=13, specials=(NAN, INF, -INF, -0.0, 0.0, -1.0))
    im = edge((4, 6), seed=14, specials=(1.0, -0.0, INF, 0.0, -0.0, -0.0))
    check(torch.angle, torch.complex(re, im))
    check(torch.angle, torch.complex(re.double(), im.double()))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_complex_and_polar(dtype, no_fallbacks):
    re = edge((5, 6), dtype, seed=15)
    im = edge((5, 6), dtype, seed=16, specials=(1.0, NAN, 2.0, INF))
    check(torch.complex, re, im)
    check(torch.complex, re, im, layout="transposed")
    check(lambda a, b: torch.complex(a, b[:1]), re, im)
    r = edge((5, 6), dtype, lo=0, hi=3, seed=17, specials=(0.0, INF, NAN))
    check(torch.polar, r, edge((5, 6), dtype, seed=18, specials=()))
    check(torch.polar, r, edge((5, 6), dtype, seed=18, specials=()), layout="step_slice")


def test_ldexp(no_fallbacks):
    for dtype in [torch.float32, torch.bfloat16, torch.float64]:
        x = edge((4, 9), dtype, seed=19)
        e = ints((4, 9), torch.int64, lo=-10, hi=10)
        check(torch.ldexp, x, e, dtype=dtype)
        check(torch.ldexp, x, e.to(torch.int32), dtype=dtype)
    check(torch.ldexp, ints((4, 9), torch.int64), ints((4, 9), torch.int64, lo=-3, hi=5, seed=3))


def test_rsub(no_fallbacks):
    for dtype in [torch.float32, torch.bfloat16, torch.int64, torch.int32]:
        x = edge((5, 7), dtype, seed=20) if dtype.is_floating_point else ints((5, 7), dtype)
        y = edge((5, 7), dtype, seed=21) if dtype.is_floating_point else ints((5, 7), dtype, seed=21)
        check(torch.rsub, x, y, dtype=dtype)
        check(lambda a, b: torch.rsub(a, b, alpha=3), x, y, dtype=dtype)
        check(lambda a: torch.rsub(a, 2), x, dtype=dtype)
        check(lambda a: torch.rsub(a, 2, alpha=2), x, dtype=dtype)
        check(lambda a: 5 - a, x, dtype=dtype)
    check(lambda a: torch.rsub(a, 2.5), ints((3, 4), torch.int64))  # promotes to float


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_floor_divide_float(dtype, no_fallbacks):
    # From fmod, like Python: 1 // 0.1 == 9; inf // 2 is NaN on the CPU; x // 0 is +-inf/NaN.
    a = torch.tensor([1.0, -1.0, 0.0, -0.0, 5.0, -5.0, INF, NAN, 7.5, -7.5, 0.0, 3.0, INF, -INF], dtype=dtype)
    b = torch.tensor([0.1, 0.1, -3.0, 3.0, 0.0, 0.0, 2.0, 1.0, -2.0, 2.0, 0.0, INF, INF, 3.0], dtype=dtype)
    check(torch.floor_divide, a, b, dtype=dtype)
    x, y = edge((6, 9), dtype, seed=22), edge((6, 9), dtype, seed=23, specials=(0.0, -0.0, INF, NAN, -INF))
    check(torch.floor_divide, x, y, dtype=dtype)
    check(torch.floor_divide, x, y, dtype=dtype, layout="transposed")
    check(lambda x: torch.floor_divide(x, 0.3), x, dtype=dtype)
    check(lambda x: x // -2, x, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8])
def test_floor_divide_int(dtype, no_fallbacks):
    a = ints((7, 9), dtype, lo=-50, hi=50)
    b = ints((7, 9), dtype, lo=-7, hi=8, seed=1)
    b[b == 0] = 3
    check(torch.floor_divide, a, b)
    check(lambda a: a // 4, a)
    y = to_dev(a).clone()
    y //= to_dev(b)
    compare(y, a // b)


def test_floor_divide_by_zero_raises():
    a, b = torch.tensor([3, 4]), torch.tensor([1, 0])
    with pytest.raises(RuntimeError):
        torch.floor_divide(a, b)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.floor_divide(a.to(DEV), b.to(DEV)).cpu()


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8])
def test_gcd_lcm(dtype, no_fallbacks):
    a = ints((5, 7), dtype, lo=-30, hi=30)
    b = ints((5, 7), dtype, lo=-30, hi=30, seed=1)
    a.view(-1)[:4] = torch.tensor([0, 0, 6, 1], dtype=dtype)
    b.view(-1)[:4] = torch.tensor([0, 5, 0, 1], dtype=dtype)
    check(torch.lcm, a, b)
    check(torch.gcd, a, b)
    check(torch.lcm, a, b, layout="transposed")
    check(lambda a, b: torch.lcm(a, b[:1]), a, b)
    check(torch.lcm, torch.empty(0, 3, dtype=dtype), torch.empty(0, 3, dtype=dtype))
    y = to_dev(a).clone()
    y.lcm_(to_dev(b))
    compare(y, torch.lcm(a, b))


SHIFT_DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]


@pytest.mark.parametrize("dtype", SHIFT_DTYPES)
def test_shifts(dtype, no_fallbacks):
    bits = torch.iinfo(dtype).bits
    a = ints((4, 9), dtype, lo=-100, hi=100)
    a.view(-1)[:4] = torch.tensor([1, -1 if dtype != torch.uint8 else 255, torch.iinfo(dtype).min, torch.iinfo(dtype).max], dtype=dtype)
    # Amounts past the width and (for signed types) negative ones.
    s = torch.tensor([0, 1, bits - 1, bits, bits + 1, 3, 2, 5, 7] * 4, dtype=dtype).view(4, 9)
    if dtype != torch.uint8:
        s.view(-1)[-3:] = torch.tensor([-1, -bits, -100], dtype=dtype)
    for f in [torch.bitwise_left_shift, torch.bitwise_right_shift, lambda x, y: x << y, lambda x, y: x >> y]:
        check(f, a, s)
        check(f, a, s, layout="transposed")
    check(lambda x: x << 3, a)
    check(lambda x: x >> 2, a)
    check(lambda x: torch.bitwise_left_shift(x, 1), a)
    check(lambda x: torch.bitwise_right_shift(x, bits), a)
    check(lambda y: torch.bitwise_left_shift(3, y), s)
    check(lambda y: torch.bitwise_right_shift(-64 if dtype != torch.uint8 else 200, y), s)
    check(lambda x, y: x.to(torch.int64) << y, a, s)  # promotion
    for op in ["__ilshift__", "__irshift__"]:
        y = to_dev(a).clone()
        getattr(y, op)(to_dev(s))
        e = a.clone()
        getattr(e, op)(s)
        compare(y, e)
        y = to_dev(a).clone()
        getattr(y, op)(2)
        e = a.clone()
        getattr(e, op)(2)
        compare(y, e)
    y = to_dev(a).clone()
    y.bitwise_left_shift_(to_dev(s))
    compare(y, a.bitwise_left_shift(s))


def test_shift_of_float_raises_like_cpu():
    x = torch.randn(3)
    with pytest.raises(RuntimeError) as cpu_err:
        torch.bitwise_left_shift(x, 1)
    with pytest.raises(type(cpu_err.value)):
        torch.bitwise_left_shift(x.to(DEV), 1)


# ----------------------------------------------------------------------------------------------
# Losses
# ----------------------------------------------------------------------------------------------

def bce_data(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=g).to(dtype)
    x.view(-1)[:4] = torch.tensor([0.0, 1.0, 1e-30, 0.5])
    t = torch.rand(shape, generator=g).to(dtype)
    t.view(-1)[:4] = torch.tensor([1.0, 0.0, 1.0, 0.5])
    return x, t


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_binary_cross_entropy(reduction, dtype):
    x, t = bce_data((5, 7), dtype)
    w = edge((5, 7), dtype, lo=0, hi=2, seed=2, specials=())
    check(lambda x, t: F.binary_cross_entropy(x, t, reduction=reduction), x, t, dtype=dtype)
    check(lambda x, t, w: F.binary_cross_entropy(x, t, weight=w, reduction=reduction), x, t, w, dtype=dtype)
    check(lambda x, t, w: F.binary_cross_entropy(x, t, weight=w[:1], reduction=reduction), x, t, w, dtype=dtype)
    check(lambda x, t: F.binary_cross_entropy(x, t, reduction=reduction), x, t, dtype=dtype, layout="transposed")
    # Gradients away from the clamped ends (there the CPU's own gradient is +-1e12).
    xg, tg = bce_data((5, 7), dtype, seed=3)
    xg = xg.clamp(0.05, 0.95)
    check_grad(lambda x: F.binary_cross_entropy(x, tg.to(x.device, x.dtype), weight=w.to(x.device, x.dtype), reduction=reduction), xg, dtype=dtype)
    check_grad(lambda x: F.binary_cross_entropy(x, tg.to(x.device, x.dtype), reduction=reduction), xg, dtype=dtype)


def test_binary_cross_entropy_backward_at_ends(no_fallbacks):
    x = torch.tensor([0.0, 1.0, 0.5, 1e-7])
    t = torch.tensor([1.0, 0.0, 0.5, 0.0])
    for red in [0, 1, 2]:
        g = torch.rand(4) if red == 0 else torch.tensor(1.5)
        check(lambda g, x, t: torch.ops.aten.binary_cross_entropy_backward(g, x, t, None, red), g, x, t)


def test_binary_cross_entropy_empty_and_bad_input():
    e = torch.empty(0, 3)
    check(lambda x, t: F.binary_cross_entropy(x, t), e, e)  # mean of nothing: NaN
    check(lambda x, t: F.binary_cross_entropy(x, t, reduction="sum"), e, e)
    for bad in [torch.tensor([0.5, 1.5]), torch.tensor([-0.1, 0.5]), torch.tensor([NAN, 0.5])]:
        t = torch.tensor([1.0, 0.0])
        with pytest.raises(RuntimeError, match="between 0 and 1"):
            F.binary_cross_entropy(bad, t)
        with pytest.raises(RuntimeError, match="between 0 and 1"):
            F.binary_cross_entropy(bad.to(DEV), t.to(DEV)).cpu()
    for bad in [torch.tensor([0.5, 1.5]), torch.tensor([NAN, 0.5])]:
        x = torch.tensor([0.5, 0.5])
        with pytest.raises(RuntimeError, match="target should be between 0 and 1"):
            F.binary_cross_entropy(x, bad)
        with pytest.raises(RuntimeError, match="target should be between 0 and 1"):
            F.binary_cross_entropy(x.to(DEV), bad.to(DEV)).cpu()
    with pytest.raises(ValueError):
        F.binary_cross_entropy(torch.rand(3).to(DEV), torch.rand(2).to(DEV))


def test_add_relu_bf16_raises_like_cpu():
    x = torch.randn(4, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="Unsupported datatype"):
        torch.ops.aten._add_relu(x, x)
    with pytest.raises(RuntimeError, match="Unsupported datatype"):
        torch.ops.aten._add_relu(x.to(DEV), x.to(DEV))


def nll2d_data(dtype, n=2, c=5, h=3, w=7, seed=0, ignore=-100):
    g = torch.Generator().manual_seed(seed)
    x = torch.log_softmax(torch.randn(n, c, h, w, generator=g), 1).to(dtype)
    t = torch.randint(0, c, (n, h, w), generator=g)
    t.view(-1)[:3] = ignore
    return x, t


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_loss2d(reduction, dtype):
    x, t = nll2d_data(dtype)
    w = torch.tensor([0.5, 2.0, 1.0, 0.0, 3.0], dtype=dtype)
    check(lambda x, t: F.nll_loss(x, t, reduction=reduction), x, t, dtype=dtype)
    check(lambda x, t, w: F.nll_loss(x, t, weight=w, reduction=reduction), x, t, w, dtype=dtype)
    x2, t2 = nll2d_data(dtype, ignore=2, seed=1)
    check(lambda x, t: F.nll_loss(x, t, ignore_index=2, reduction=reduction), x2, t2, dtype=dtype)
    check_grad(lambda x: F.nll_loss(x, t.to(x.device), weight=w.to(x.device, x.dtype), reduction=reduction), x, dtype=dtype)
    check_grad(lambda x: F.nll_loss(x, t2.to(x.device), ignore_index=2, reduction=reduction), x2, dtype=dtype)
    # cross_entropy over an image (log_softmax + nll_loss2d), non-contiguous input.
    logits = torch.randn(3, 2, 5, 4, generator=torch.Generator().manual_seed(5)).to(dtype)
    tgt = torch.randint(0, 4, (2, 5, 3), generator=torch.Generator().manual_seed(6))
    check_grad(lambda z: F.cross_entropy(z.permute(1, 3, 2, 0), tgt.to(z.device), reduction=reduction), logits, dtype=dtype)


def test_nll_loss2d_all_ignored_and_bad_target():
    x, _ = nll2d_data(torch.float32)
    t = torch.full((2, 3, 7), -100)
    check(lambda x, t: F.nll_loss(x, t), x, t)  # mean over no targets: NaN
    check_grad(lambda x: F.nll_loss(x, t.to(x.device), reduction="sum"), x)
    t1 = torch.full((2, 3, 7), 1)
    check_grad(lambda x: F.nll_loss(x, t1.to(x.device), ignore_index=1), x)  # mean over nothing
    bad = torch.zeros(2, 3, 7, dtype=torch.long)
    bad[0, 0, 0] = 5
    with pytest.raises(IndexError):
        F.nll_loss(x, bad)
    with pytest.raises(IndexError):
        F.nll_loss(x.to(DEV), bad.to(DEV)).cpu()


# ----------------------------------------------------------------------------------------------
# Cumulative ops
# ----------------------------------------------------------------------------------------------

def tie_data(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-3, 4, shape, generator=g).to(torch.float64)  # many ties
    flat = x.view(-1)
    if dtype.is_floating_point:
        for i, v in zip([1, 5, 6, 12, 13, 20], [NAN, -0.0, 0.0, INF, -INF, NAN]):
            if i < flat.numel():
                flat[i] = v
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.uint8, torch.int8])
@pytest.mark.parametrize("op", [torch.cummax, torch.cummin], ids=["cummax", "cummin"])
def test_cummax_cummin(op, dtype, no_fallbacks):
    x = tie_data((5, 11), dtype) if dtype != torch.uint8 else ints((5, 11), dtype, 0, 4)
    for dim in [0, 1, -1, -2]:
        got = op(to_dev(x), dim)
        exp = op(x, dim)
        compare(got.values, exp.values)
        compare(got.indices, exp.indices)
    got = op(to_dev(x).t(), 1)
    compare(got.values, op(x.t(), 1).values)
    compare(got.indices, op(x.t(), 1).indices)


def test_cummax_cummin_edge_shapes(no_fallbacks):
    for op in [torch.cummax, torch.cummin]:
        for x in [torch.tensor(2.5), torch.empty(0, 4), torch.tensor([NAN]), torch.tensor([True, False, True, False]),
                  torch.tensor([NAN, NAN, 1.0, NAN]), torch.full((17,), -INF), tie_data((3, 4, 33), torch.float32)[:, ::2]]:
            got, exp = op(to_dev(x), -1), op(x, -1)
            compare(got.values, exp.values)
            compare(got.indices, exp.indices)
        vals, idx = torch.empty(4), torch.empty(4, dtype=torch.long)
        dv, di = vals.to(DEV), idx.to(DEV)
        op(to_dev(tie_data((4,), torch.float32)), 0, out=(dv, di))
        op(tie_data((4,), torch.float32), 0, out=(vals, idx))
        compare(dv, vals)
        compare(di, idx)


def test_cummax_backward():
    x = tie_data((4, 9), torch.float32, seed=3)
    x = torch.nan_to_num(x, 0.5, 2.0, -2.0)
    check_grad(lambda x: torch.cummax(x, 1).values, x)
    check_grad(lambda x: torch.cummin(x, 0).values, x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_logcumsumexp(dtype, no_fallbacks):
    x = edge((6, 13), dtype, lo=-10, hi=10, seed=24)
    for dim in [0, 1, -1]:
        check(lambda x: torch.logcumsumexp(x, dim), x, dtype=dtype)
    check(lambda x: torch.logcumsumexp(x, 1), x, dtype=dtype, layout="transposed")
    check(lambda x: torch.logcumsumexp(x, 0), x, dtype=dtype, layout="step_slice")
    inf_rows = torch.tensor([[-INF, -INF, 1.0, INF, INF, 2.0, -INF],
                             [INF, -INF, INF, 3.0, NAN, 1.0, -INF],
                             [-INF, -INF, -INF, -INF, -INF, 0.0, -INF],
                             [1e30, -1e30, 88.0, 89.0, -104.0, 0.0, 5.0]], dtype=dtype)
    check(lambda x: torch.logcumsumexp(x, 1), inf_rows, dtype=dtype)
    check(lambda x: torch.logcumsumexp(x, 0), torch.tensor(3.0, dtype=dtype), dtype=dtype)
    check(lambda x: torch.logcumsumexp(x, 1), torch.empty(2, 0, dtype=dtype), dtype=dtype)


def test_logcumsumexp_backward():
    check_grad(lambda x: torch.logcumsumexp(x, 1), edge((4, 10), seed=25, specials=()))


def test_cumulative_bad_dim():
    for f in [lambda x: torch.cummax(x, 2), lambda x: torch.logcumsumexp(x, -3)]:
        with pytest.raises(IndexError):
            f(torch.randn(3, 4))
        with pytest.raises(IndexError):
            f(torch.randn(3, 4).to(DEV))


# ----------------------------------------------------------------------------------------------
# _foreach unary ops
# ----------------------------------------------------------------------------------------------

FOREACH_UNARY = ["acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "expm1", "floor", "frac",
                 "lgamma", "log10", "log1p", "log2", "round", "sigmoid", "sin", "sinh", "tan", "tanh", "trunc"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", FOREACH_UNARY)
def test_foreach_unary(name, dtype, no_fallbacks):
    lo, hi = (-1, 1) if name in ("acos", "asin") else (-3, 3)
    xs = [edge((3, 5), dtype, lo, hi, seed=1), edge((7,), dtype, lo, hi, seed=2, specials=(2.5, -2.5, 0.5, -0.0)),
          edge((2, 3, 4), dtype, lo, hi, seed=3, specials=()), torch.empty(0, 2, dtype=dtype)]
    if name in ("acos", "asin"):  # keep them in the domain so both sides agree on where NaN is
        xs[0] = edge((3, 5), dtype, lo, hi, seed=1, specials=(NAN, -0.0, 1.0, -1.0))
    f = getattr(torch, f"_foreach_{name}")
    f_ = getattr(torch, f"_foreach_{name}_")
    got = f([to_dev(x) for x in xs])
    ref = getattr(torch, name)
    exp = [ref(x.float()).to(dtype) for x in xs]
    for g, e in zip(got, exp):
        compare(g, e)
    dev = [to_dev(x) for x in xs]
    f_(dev)
    for g, e in zip(dev, exp):
        compare(g, e)


def test_foreach_unary_integers_and_max(no_fallbacks):
    xs = [ints((3, 4), torch.int64), ints((5,), torch.int32, seed=2)]
    for name in ["ceil", "floor", "round", "trunc"]:
        got = getattr(torch, f"_foreach_{name}")([to_dev(x) for x in xs])
        for g, x in zip(got, xs):
            compare(g, getattr(torch, name)(x))
    fl = [edge((3, 4), seed=3, specials=()), edge((5,), seed=4, specials=(NAN,)), edge((2, 9), torch.bfloat16, seed=5, specials=(INF,)),
          torch.tensor(-2.0), edge((4,), seed=6, specials=(-INF, -INF, -INF, -INF))]
    got = torch._foreach_max([to_dev(x) for x in fl])
    for g, x in zip(got, fl):
        compare(g, x.max())
    got = torch._foreach_max([to_dev(x) for x in xs])
    for g, x in zip(got, xs):
        compare(g, x.max())


def test_foreach_optimizer_style_usage(no_fallbacks):
    # clip-style usage: the max of the absolute values over a list of grads.
    grads = [edge((8, 3), seed=7, specials=()), edge((5,), seed=8, specials=())]
    got = torch.stack(torch._foreach_max(torch._foreach_abs([to_dev(g) for g in grads]))).max()
    compare(got, torch.stack([g.abs().max() for g in grads]).max())


# ----------------------------------------------------------------------------------------------
# torch.compile
# ----------------------------------------------------------------------------------------------

def test_compiled_graph_uses_the_new_rules(no_fallbacks):
    import torch._dynamo
    torch._dynamo.reset()

    def f(x, t):
        h = F.hardswish(x) + F.elu(x) + F.logsigmoid(x) + torch.logit(x.sigmoid(), 1e-3)
        v, i = torch.cummax(h, 1)
        l = torch.logcumsumexp(h, 0)
        loss = F.binary_cross_entropy(torch.sigmoid(h), t)
        return v, i, l, torch.floor_divide(h, 0.3), torch.nan_to_num(h.log()), loss

    x = edge((5, 9), seed=30, specials=())
    t = torch.rand(5, 9, generator=torch.Generator().manual_seed(31))
    compiled = torch.compile(f, backend="tpu", fullgraph=True)
    got = compiled(to_dev(x), to_dev(t))
    compare(got, f(x, t))
    torch._dynamo.reset()


def test_compiled_training_step_with_new_backwards(no_fallbacks):
    import torch._dynamo
    torch._dynamo.reset()

    def step(x, w, t):
        h = F.glu(F.hardswish(x) @ w, dim=-1)
        h = F.elu(h) + F.hardsigmoid(h)
        return F.binary_cross_entropy(torch.sigmoid(h), t)

    x = edge((6, 8), seed=32, specials=())
    w = edge((8, 10), seed=33, specials=()) * 0.3
    t = torch.rand(6, 5, generator=torch.Generator().manual_seed(34))
    wc = w.clone().requires_grad_()
    step(x, wc, t).backward()
    wd = to_dev(w).requires_grad_()
    compiled = torch.compile(step, backend="tpu", fullgraph=True)
    loss = compiled(to_dev(x), wd, to_dev(t))
    loss.backward()
    compare(loss.detach(), step(x, w, t))
    compare(wd.grad, wc.grad)
    torch._dynamo.reset()


def test_out_variants(no_fallbacks):
    # grad_input= / output= / out= overloads reach the same rules.
    x = edge((4, 6), seed=40)
    p = torch.rand(4, 6, generator=torch.Generator().manual_seed(41)) * 0.9 + 0.05
    g = edge((4, 6), seed=42, specials=())
    # (call, its inputs, the op when it is point-wise: its CPU reference is then taken both ways)
    calls = [
        (lambda g, x, o: torch.ops.aten.elu_backward.grad_input(g, 1.0, 1.0, 1.0, False, x, grad_input=o), (g, x),
         "elu_backward"),
        (lambda g, x, o: torch.ops.aten.hardsigmoid_backward.grad_input(g, x, grad_input=o), (g, x),
         "hardsigmoid_backward"),
        (lambda g, x, o: torch.ops.aten.hardswish_backward.out(g, x, out=o), (g, x), "hardswish_backward"),
        (lambda g, x, o: torch.ops.aten.logit_backward.grad_input(g, x, 0.1, grad_input=o), (g, p), "logit_backward"),
        (lambda g, x, o: torch.ops.aten.log_sigmoid_backward.grad_input(g, x, torch.exp(-x.abs()), grad_input=o), (g, x),
         "log_sigmoid_backward"),
        (lambda g, x, o: torch.ops.aten.binary_cross_entropy_backward.grad_input(g, x, x * 0.5, None, 0, grad_input=o), (g, p),
         "binary_cross_entropy_backward"),
        (lambda g, x, o: torch.ops.aten.glu_backward.grad_input(g[:, :3], x, 1, grad_input=o), (g, x), None),
        (lambda g, x, o: torch.ops.aten.xlogy.OutTensor(g, x, out=o), (g, x), "xlogy"),
        (lambda g, x, o: torch.ops.aten.xlogy.OutScalar_Self(2.0, x, out=o), (g, x), "xlogy"),
        (lambda g, x, o: torch.ops.aten.xlogy.OutScalar_Other(x, 3.0, out=o), (g, x), "xlogy"),
        (lambda g, x, o: torch.ops.aten.reflection_pad1d_backward.grad_input(
            torch.ones(4, 9, device=x.device), x, [1, 2], grad_input=o), (g, x), None),
        (lambda g, x, o: torch.ops.aten.replication_pad2d_backward.grad_input(
            torch.ones(1, 5, 9, device=x.device), x[None], [1, 2, 0, 1], grad_input=o[None]), (g, x), None),
    ]
    for f, args, op in calls:
        o_dev = torch.empty(4, 6).to(DEV)
        f(*[to_dev(a) for a in args], o_dev)

        def into_new_out(*a, f=f):
            o = torch.empty_like(a[0])
            f(*a, o)
            return o
        exp = either(o_dev, scalar_loop(into_new_out, *args), vector_loop(into_new_out, *args), op) if op \
            else into_new_out(*args)
        compare(o_dev, exp)
    out, buf = torch.empty(4, 6), torch.empty(4, 6)
    od, bd = out.to(DEV), buf.to(DEV)
    torch.ops.aten.log_sigmoid_forward.output(x.to(DEV), output=od, buffer=bd)
    torch.ops.aten.log_sigmoid_forward.output(x, output=out, buffer=buf)
    compare(od, out)
    compare(bd, buf)


def test_compiled_segmentation_loss_and_foreach(no_fallbacks):
    import torch._dynamo
    torch._dynamo.reset()

    def step(z, t, w):
        logits = F.glu(z * w, dim=1)  # (N, C, H, W)
        loss = F.cross_entropy(logits, t, ignore_index=1) + F.nll_loss(F.log_softmax(logits, 1), t, reduction="sum")
        return loss + torch.logcumsumexp(logits, 3).mean()

    g = torch.Generator().manual_seed(50)
    z = torch.randn(2, 8, 3, 5, generator=g)
    t = torch.randint(0, 4, (2, 3, 5), generator=g)
    w = torch.randn(1, 8, 1, 1, generator=g)
    wc = w.clone().requires_grad_()
    step(z, t, wc).backward()
    wd = w.to(DEV).requires_grad_()
    loss = torch.compile(step, backend="tpu", fullgraph=True)(z.to(DEV), t.to(DEV), wd)
    loss.backward()
    compare(loss.detach(), step(z, t, w))
    compare(wd.grad, wc.grad)

    def unary_list(xs):
        # (dynamo cannot trace _foreach_max: it is tested eagerly above)
        return torch._foreach_sigmoid(torch._foreach_log1p(torch._foreach_cos(xs)))

    xs = [torch.rand(3, 4, generator=g), torch.rand(5, generator=g)]
    got = torch.compile(unary_list, backend="tpu", fullgraph=True)([to_dev(x) for x in xs])
    compare(got, unary_list(xs))
    torch._dynamo.reset()


def test_nan_to_num_complex(no_fallbacks):
    for dtype in [torch.float32, torch.float64]:
        re = edge((4, 6), dtype, seed=60, specials=(NAN, INF, -INF, 1.0, NAN))
        im = edge((4, 6), dtype, seed=61, specials=(INF, NAN, 2.0, -INF, NAN))
        z = torch.complex(re, im)
        check(torch.nan_to_num, z)
        check(lambda z: torch.nan_to_num(z, nan=1.0, posinf=5.0, neginf=-5.0), z)
        check(torch.nan_to_num, z, layout="transposed")


# Dtypes the CPU kernels do not implement: the same exception type as on the CPU (the rules
# decline them, so the CPU fallback raises PyTorch's own error).
BAD_DTYPE_CASES = [
    ("elu", F.elu, torch.int64), ("hardsigmoid", F.hardsigmoid, torch.int64), ("hardswish", F.hardswish, torch.bool),
    ("glu", lambda x: F.glu(x, -1), torch.int64), ("logit", torch.logit, torch.complex64),
    ("logsigmoid", F.logsigmoid, torch.int64), ("threshold", lambda x: F.threshold(x, 1, 5), torch.bool),
    ("signbit", torch.signbit, torch.complex64), ("xlogy", lambda x: torch.xlogy(x, x), torch.complex64),
    ("lcm", lambda x: torch.lcm(x, x), torch.float32), ("shift", lambda x: x << x, torch.float32),
    ("prelu", lambda x: torch.ops.aten._prelu_kernel(x, x), torch.int64), ("cummax", lambda x: torch.cummax(x, 1), torch.complex64),
    ("logcumsumexp", lambda x: torch.logcumsumexp(x, 1), torch.int64), ("reflect", lambda x: F.pad(x[None], (1, 1), mode="reflect"), torch.bool),
    ("bce", lambda x: F.binary_cross_entropy(x, x), torch.int64), ("polar", lambda x: torch.polar(x, x), torch.int64),
    ("complex", lambda x: torch.complex(x, x), torch.int64), ("floor_divide", lambda x: torch.floor_divide(x, x), torch.bool),
]


@pytest.mark.parametrize("name,f,dtype", BAD_DTYPE_CASES, ids=[c[0] for c in BAD_DTYPE_CASES])
def test_unsupported_dtype_raises_like_cpu(name, f, dtype):
    x = torch.tensor([[1, 0, 3, 1]]).to(dtype)
    with pytest.raises(Exception) as cpu_err:
        f(x)
    with pytest.raises(type(cpu_err.value)):
        f(x.to(DEV))


def test_compiled_bad_input_raises_like_cpu():
    import torch._dynamo
    torch._dynamo.reset()
    f = torch.compile(lambda x, t: F.binary_cross_entropy(x, t), backend="tpu", fullgraph=True)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        f(torch.tensor([0.5, 1.5], device=DEV), torch.tensor([1.0, 0.0], device=DEV)).cpu()
    compare(f(torch.tensor([0.5, 0.25], device=DEV), torch.tensor([1.0, 0.0], device=DEV)),
            F.binary_cross_entropy(torch.tensor([0.5, 0.25]), torch.tensor([1.0, 0.0])))
    g = torch.compile(lambda x, t: F.nll_loss(x, t), backend="tpu", fullgraph=True)
    x = torch.randn(1, 3, 2, 2).log_softmax(1)
    with pytest.raises(IndexError):
        g(x.to(DEV), torch.tensor([[[0, 3], [1, 2]]], device=DEV)).cpu()
    torch._dynamo.reset()
