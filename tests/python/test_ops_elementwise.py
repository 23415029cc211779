"""Element-wise ops vs PyTorch CPU: dtypes, promotion, broadcasting, Python scalars, in-place, out=."""
import pytest
import torch

from helpers import check

FLOATS = [torch.float32, torch.bfloat16]
INTS = [torch.int32, torch.int64, torch.uint8, torch.int8, torch.int16]


def sample(shape, dtype, low=-3, high=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g) * (high - low) + low).to(dtype)
    lo = 0 if dtype == torch.uint8 else low
    return torch.randint(lo, high + 1, shape, generator=g).to(dtype)


def close(actual, expected, dtype=None):
    dtype = dtype or expected.dtype
    if dtype in (torch.bfloat16, torch.float16):
        torch.testing.assert_close(actual.cpu(), expected, atol=2e-2, rtol=2e-2, equal_nan=True)
    else:
        torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)


BINARY = [torch.add, torch.sub, torch.mul, torch.maximum, torch.minimum]


@pytest.mark.parametrize("op", BINARY, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_binary_broadcast(op, dtype, no_fallbacks):
    a, b = sample((4, 1, 5), dtype, seed=1), sample((3, 5), dtype, seed=2)
    close(op(a.to("tpu"), b.to("tpu")), op(a, b))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.int64])
def test_true_divide_and_floor_trunc(dtype, no_fallbacks):
    a = sample((5, 6), dtype, seed=3)
    b = sample((5, 6), dtype, low=1, high=4, seed=4)
    b = torch.where(b == 0, torch.ones_like(b), b)
    for mode in (None, "trunc", "floor"):
        close(torch.div(a.to("tpu"), b.to("tpu"), rounding_mode=mode), torch.div(a, b, rounding_mode=mode))
    close(torch.remainder(a.to("tpu"), b.to("tpu")), torch.remainder(a, b))
    close(torch.fmod(a.to("tpu"), b.to("tpu")), torch.fmod(a, b))


@pytest.mark.parametrize("scalar", [2, -1.5, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32])
def test_python_scalar_promotion(scalar, dtype, no_fallbacks):
    a = sample((3, 4), dtype, seed=5)
    t = a.to("tpu")
    fns = [lambda x: x + scalar, lambda x: x * scalar, lambda x: x > scalar]
    if not isinstance(scalar, bool):
        fns.append(lambda x: scalar - x)
    for fn in fns:
        expected = fn(a)
        got = fn(t)
        assert got.dtype == expected.dtype
        close(got, expected)


def test_mixed_dtype_promotion(no_fallbacks):
    a = sample((3, 4), torch.int32, seed=6)
    b = sample((3, 4), torch.bfloat16, seed=7)
    c = sample((4,), torch.float32, seed=8)
    got = a.to("tpu") + b.to("tpu") * c.to("tpu")
    expected = a + b * c
    assert got.dtype == expected.dtype
    close(got, expected)
    z = torch.tensor(2.5, dtype=torch.float64)
    assert (a.to("tpu") * z.to("tpu")).dtype == (a * z).dtype


UNARY_FLOAT = [torch.exp, torch.log1p, torch.sqrt, torch.rsqrt, torch.sin, torch.cos, torch.tanh,
               torch.sigmoid, torch.erf, torch.abs, torch.neg, torch.floor, torch.ceil, torch.round,
               torch.trunc, torch.reciprocal, torch.expm1, torch.log2, torch.atan, torch.sign]


@pytest.mark.parametrize("op", UNARY_FLOAT, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_float(op, dtype, no_fallbacks):
    a = sample((7, 3), dtype, low=0.1, high=3, seed=9)
    close(op(a.to("tpu")), op(a))


@pytest.mark.parametrize("op", [torch.exp, torch.sqrt, torch.sin, torch.abs, torch.neg, torch.sign],
                         ids=lambda f: f.__name__)
def test_unary_on_ints_promotes(op, no_fallbacks):
    a = sample((5,), torch.int64, low=0, high=5, seed=10)
    expected = op(a)
    got = op(a.to("tpu"))
    assert got.dtype == expected.dtype
    close(got, expected)


@pytest.mark.parametrize("fn", [torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_comparisons(fn, dtype, no_fallbacks):
    a, b = sample((4, 4), dtype, seed=11), sample((4,), dtype, seed=12)
    got = fn(a.to("tpu"), b.to("tpu"))
    assert got.dtype == torch.bool
    assert torch.equal(got.cpu(), fn(a, b))


def test_logical_and_bitwise(no_fallbacks):
    a, b = sample((6,), torch.bool, seed=13), sample((6,), torch.bool, seed=14)
    for fn in (torch.logical_and, torch.logical_or, torch.logical_xor):
        assert torch.equal(fn(a.to("tpu"), b.to("tpu")).cpu(), fn(a, b))
    assert torch.equal(torch.logical_not(a.to("tpu")).cpu(), torch.logical_not(a))
    x, y = sample((6,), torch.int32, seed=15), sample((6,), torch.int32, seed=16)
    for fn in (torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor):
        assert torch.equal(fn(x.to("tpu"), y.to("tpu")).cpu(), fn(x, y))
    assert torch.equal((~x.to("tpu")).cpu(), ~x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_where_masked_fill_clamp(dtype, no_fallbacks):
    a, b = sample((3, 5), dtype, seed=17), sample((3, 5), dtype, seed=18)
    cond = sample((3, 5), torch.bool, seed=19)
    close(torch.where(cond.to("tpu"), a.to("tpu"), b.to("tpu")), torch.where(cond, a, b))
    close(a.to("tpu").masked_fill(cond.to("tpu"), 2), a.masked_fill(cond, 2))
    close(a.to("tpu").clamp(-1, 2), a.clamp(-1, 2))
    close(a.to("tpu").clamp(min=0), a.clamp(min=0))
    close(torch.clamp(a.to("tpu"), b.to("tpu").clamp(max=0), b.to("tpu").clamp(min=0)),
          torch.clamp(a, b.clamp(max=0), b.clamp(min=0)))


@pytest.mark.parametrize("fn", [torch.relu, torch.nn.functional.gelu, torch.nn.functional.silu,
                                lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
                                torch.nn.functional.leaky_relu, torch.nn.functional.hardtanh,
                                torch.nn.functional.softplus,
                                lambda x: torch.nn.functional.softplus(x, beta=2.5, threshold=1.5)],
                         ids=["relu", "gelu", "silu", "gelu_tanh", "leaky_relu", "hardtanh", "softplus",
                              "softplus_beta"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_activations_forward_backward(fn, dtype, no_fallbacks):
    a = sample((4, 6), dtype, seed=20)
    x_cpu = a.clone().float().requires_grad_()
    x_tpu = a.clone().float().to("tpu").requires_grad_()
    y_cpu, y_tpu = fn(x_cpu.to(dtype)), fn(x_tpu.to(dtype))
    close(y_tpu, y_cpu)
    g = sample((4, 6), dtype, seed=21)
    y_cpu.backward(g)
    y_tpu.backward(g.to("tpu"))
    close(x_tpu.grad, x_cpu.grad, dtype)


def test_inplace_and_out_variants(no_fallbacks):
    a, b = sample((3, 4), torch.float32, seed=22), sample((3, 4), torch.float32, seed=23)
    t = a.clone().to("tpu")
    t.add_(b.to("tpu"), alpha=2).mul_(3).clamp_(max=4)
    close(t, a.clone().add_(b, alpha=2).mul_(3).clamp_(max=4))
    out = torch.empty(3, 4, device="tpu")
    torch.sub(a.to("tpu"), b.to("tpu"), out=out)
    close(out, a - b)
    ai = sample((3, 4), torch.int64, seed=24)
    ti = ai.clone().to("tpu")
    ti.add_(3)
    close(ti, ai + 3)


def test_nan_and_inf_propagate(no_fallbacks):
    a = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0])
    t = a.to("tpu")
    close(t * 2, a * 2)
    close(torch.nn.functional.softplus(t), torch.nn.functional.softplus(a))
    close(torch.maximum(t, torch.zeros(4, device="tpu")), torch.maximum(a, torch.zeros(4)))
    assert torch.equal(torch.isnan(t).cpu(), torch.isnan(a))


def test_float_predicates_and_isin(no_fallbacks):
    x = torch.tensor([1.0, float("inf"), -float("inf"), float("nan"), -2.0])
    t = x.to("tpu")
    for fn in (torch.isinf, torch.isposinf, torch.isneginf, torch.isfinite, torch.isnan):
        assert torch.equal(fn(t).cpu(), fn(x)), fn.__name__
    i = torch.tensor([3, 1, 4, 1, 5, 9])
    assert torch.equal(torch.isfinite(i.to("tpu")).cpu(), torch.isfinite(i))
    test = torch.tensor([1, 9, 7])
    assert torch.equal(torch.isin(i.to("tpu"), test.to("tpu")).cpu(), torch.isin(i, test))
    assert torch.equal(torch.isin(i.to("tpu"), test.to("tpu"), invert=True).cpu(), torch.isin(i, test, invert=True))
    assert torch.equal(torch.isin(i.to("tpu"), 4).cpu(), torch.isin(i, 4))


def test_nan_in_either_operand_propagates_through_max_min_clamp(no_fallbacks):
    a = torch.tensor([1.0, float("nan"), 3.0, -float("inf"), 0.0, float("nan")])
    b = torch.tensor([float("nan"), 2.0, -float("inf"), float("nan"), -0.0, float("nan")])
    lo, hi = torch.tensor([0.5] * 6), torch.tensor([float("nan"), 9.0, 9.0, 9.0, 9.0, 9.0])
    for f in (torch.maximum, torch.minimum, torch.max, torch.min, torch.fmax, torch.fmin):
        torch.testing.assert_close(f(a.to("tpu"), b.to("tpu")).cpu(), f(a, b), equal_nan=True)
    torch.testing.assert_close(torch.clamp(a.to("tpu"), lo.to("tpu"), hi.to("tpu")).cpu(), torch.clamp(a, lo, hi),
                               equal_nan=True)


@pytest.mark.parametrize("op", [lambda a, b: a.div(b, rounding_mode="trunc"), lambda a, b: a.div(b, rounding_mode="floor"),
                                torch.remainder, torch.fmod, lambda a, b: a % 0],
                         ids=["div_trunc", "div_floor", "remainder", "fmod", "mod_scalar"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
def test_integer_division_by_zero_raises_like_cpu(op, dtype):
    a, b = torch.tensor([5, 7, 3], dtype=dtype), torch.tensor([2, 0, 1], dtype=dtype)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        op(a, b)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        op(a.to("tpu"), b.to("tpu")).cpu()  # reported at the next host sync, like CUDA's asserts
    ok = torch.tensor([2, 3, 1], dtype=dtype)  # nonzero divisors: no error, CPU's values
    torch.testing.assert_close(torch.remainder(a.to("tpu"), ok.to("tpu")).cpu(), torch.remainder(a, ok))


def test_lerp_with_infinite_endpoints_gives_the_cpu_nan():
    """The CPU's two-sided lerp: inf - inf inside either branch is NaN; weight 0/1 stay exact."""
    inf = float("inf")
    start = torch.tensor([inf, 1.0, 1.0, -inf, 2.0, 3.0, 1e30])
    end = torch.tensor([inf, -inf, inf, 5.0, 4.0, float("nan"), -1e30])
    for w in (0.0, 0.25, 0.5, 0.75, 1.0, -0.5, 1.5):
        check(lambda a, b: torch.lerp(a, b, w), start, end)
    weight = torch.tensor([0.3, 0.7, float("nan"), inf, 0.0, 1.0, 0.5])
    check(torch.lerp, start, end, weight)
    z = torch.randn(5, dtype=torch.complex64)
    check(torch.lerp, z, z.flip(0), torch.rand(5, dtype=torch.complex64))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_out_of_a_wider_dtype_rounds_to_the_inputs_dtype_first(dtype):
    """bf16 inputs, float32 out=: the CPU computes in bf16 (float32 internally, rounded once) and
    then casts; the device must not keep float32 precision."""
    a, b = torch.randn(257).to(dtype), torch.randn(257).to(dtype)
    for f in (lambda x, y, out: torch.add(x, y, out=out), lambda x, y, out: torch.mul(x, y, out=out),
              lambda x, y, out: torch.exp(x, out=out), lambda x, y, out: torch.sigmoid(y, out=out)):
        expected = f(a, b, torch.empty(257))
        actual = f(a.to("tpu"), b.to("tpu"), torch.empty(257, device="tpu"))
        torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_clamp_min_max_out_variants(dtype):
    """clamp_min/clamp_max out= (and Tensor bounds) into empty and preallocated outs: the out
    tensor is an argument after the bound and must not be read as a second bound."""
    a = sample((7,), dtype, seed=1)
    b = sample((7,), dtype, seed=2)
    for f in (torch.clamp_min, torch.clamp_max):
        for bound in (b, b[0].item()) if dtype != torch.bool else (b,):  # no bool Scalar kernel on the CPU
            expected = f(a, bound)
            for out in (torch.empty(0, dtype=dtype, device="tpu"), torch.ones(7, dtype=dtype, device="tpu")):
                bound_dev = bound.to("tpu") if isinstance(bound, torch.Tensor) else bound
                result = f(a.to("tpu"), bound_dev, out=out)
                assert result is out
                torch.testing.assert_close(out.cpu(), expected)
