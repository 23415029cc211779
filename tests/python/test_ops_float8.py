"""float8_e4m3fn / float8_e5m2 on tpu against PyTorch on the CPU: transfers, conversions both
ways (rounding, NaN, ±inf, values past the largest float8), copies and data movement, and the
float8 matmul torch._scaled_mm, with no CPU fallback; ops the CPU does not implement for float8
raise its error."""
import pytest
import torch

from helpers import DEV, fallbacks

F8 = [torch.float8_e4m3fn, torch.float8_e5m2]
WIDE = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.uint8, torch.bool]

# Values around each float8 type's rounding edges: ties, largest finite values (448, 57344) and
# what lies past them, subnormals and their ties, specials.
EDGES = [0.0, -0.0, 1.0, -2.5, 1.0625, 1.125, 1.125 + 2 ** -12, 1.1875, 3.0 + 2 ** -20, 240.0, 448.0, 464.0,
         464.001, 479.9, 480.0, 500.0, -1000.0, 1e6, 3e38, 57344.0, 61439.0, 61440.0, 65536.0, -7e4,
         2 ** -6, 2 ** -7, 2 ** -9, 2 ** -10, 3 * 2 ** -10, 2 ** -10 + 2 ** -20, 2 ** -14, 2 ** -16, 2 ** -17,
         3 * 2 ** -17, 1e-30, -1e-30, float("inf"), float("-inf"), float("nan"), -float("nan")]


def edges(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    spread = torch.randn(301, generator=g) * torch.logspace(-6, 5, 301)  # every binade
    return torch.cat([torch.tensor(EDGES), spread]).to(dtype)


def same(got, want):
    """Equal values and dtypes, NaN where the CPU has NaN, signed zeros alike."""
    got = got.cpu()
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype in F8:
        nan = want.float().isnan()
        assert torch.equal(got.float().isnan(), nan)
        assert torch.equal(got.view(torch.uint8)[~nan], want.view(torch.uint8)[~nan])
    else:
        torch.testing.assert_close(got, want, equal_nan=True, atol=0, rtol=0)


@pytest.fixture
def no_fallbacks():
    before = fallbacks()
    yield
    assert fallbacks() == before, fallbacks()


@pytest.mark.parametrize("dtype", F8)
def test_round_trip_keeps_bits(dtype, no_fallbacks):
    x = torch.arange(256, dtype=torch.uint8).view(dtype)  # every bit pattern, NaNs included
    y = x.to(DEV)
    assert y.dtype == dtype and y.device.type == DEV
    assert torch.equal(y.cpu().view(torch.uint8), x.view(torch.uint8))


@pytest.mark.parametrize("dtype", F8)
@pytest.mark.parametrize("src", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_float_to_float8(dtype, src, no_fallbacks):
    # e4m3fn saturates past 448 (±inf too); e5m2 rounds to ±inf; f64 rounds through float as in C++
    x = edges(src)
    same(x.to(DEV).to(dtype), x.to(dtype))


@pytest.mark.parametrize("dtype", F8)
@pytest.mark.parametrize("src", [torch.int32, torch.int64, torch.int8, torch.uint8, torch.bool])
def test_int_to_float8(dtype, src, no_fallbacks):
    info = torch.iinfo(src) if src != torch.bool else None
    lo, hi = (0, 2) if info is None else (max(info.min, -(2 ** 20)), min(info.max, 2 ** 20))
    x = torch.cat([torch.randint(lo, hi, (257,), generator=torch.Generator().manual_seed(1)),
                   torch.tensor([lo, hi - 1, 0])]).to(src)
    same(x.to(DEV).to(dtype), x.to(dtype))


@pytest.mark.parametrize("dtype", F8)
@pytest.mark.parametrize("dst", WIDE)
def test_float8_to_other(dtype, dst, no_fallbacks):
    x = torch.arange(256, dtype=torch.uint8).view(dtype)
    if dst not in (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.bool):
        # float -> int of NaN, inf or values out of range is undefined in C++ (docs/limits.md)
        v = x.float()
        x = x[~v.isnan() & ~v.isinf() & (v >= torch.iinfo(dst).min) & (v < torch.iinfo(dst).max)]
    same(x.to(DEV).to(dst), x.to(dst))


@pytest.mark.parametrize("pair", [(torch.float8_e4m3fn, torch.float8_e5m2), (torch.float8_e5m2, torch.float8_e4m3fn)])
def test_float8_to_float8(pair, no_fallbacks):
    x = torch.arange(256, dtype=torch.uint8).view(pair[0])
    same(x.to(DEV).to(pair[1]), x.to(pair[1]))


@pytest.mark.parametrize("dtype", F8)
def test_copy_fill_zero_factories(dtype, no_fallbacks):
    x = edges().reshape(-1)[:105].reshape(7, 15)
    want = torch.empty(7, 15, dtype=dtype).copy_(x)
    got = torch.empty(7, 15, dtype=dtype, device=DEV).copy_(x.to(DEV))
    same(got, want)
    same(got.clone(), want.clone())
    for v in [2.3, 448.0, -0.0, float("nan"), 1e-9]:
        same(got.clone().fill_(v), want.clone().fill_(v))
    # a Python number is converted with a check: past the largest value (inf for e4m3fn) raises
    for v in [449.0, 1000.0, 57344.0, 57345.0, -1e9, float("inf"), float("-inf")]:
        try:
            expected = want.clone().fill_(v)
        except RuntimeError as e:
            with pytest.raises(RuntimeError, match="without overflow"):
                got.clone().fill_(v)
            assert "without overflow" in str(e)
        else:
            same(got.clone().fill_(v), expected)
    same(got.clone().fill_(torch.tensor(1000.0).to(DEV)), want.clone().fill_(torch.tensor(1000.0)))
    same(got.clone().zero_(), want.clone().zero_())
    same(torch.zeros(3, 5, dtype=dtype, device=DEV), torch.zeros(3, 5, dtype=dtype))
    same(torch.ones(3, 5, dtype=dtype, device=DEV), torch.ones(3, 5, dtype=dtype))
    same(torch.full((4,), 440.0, dtype=dtype, device=DEV), torch.full((4,), 440.0, dtype=dtype))
    same(torch.zeros_like(got), torch.zeros_like(want))
    assert torch.empty(0, 3, dtype=dtype, device=DEV).cpu().shape == (0, 3)
    same(torch.empty(0, 3, dtype=dtype).to(DEV).to(torch.float32), torch.empty(0, 3))


@pytest.mark.parametrize("dtype", F8)
def test_views_and_data_movement(dtype, no_fallbacks):
    x = edges()[:105].reshape(7, 15).to(dtype)
    d = x.to(DEV)
    same(d.t().contiguous(), x.t().contiguous())
    same(d[1:6:2, ::3].contiguous(), x[1:6:2, ::3].contiguous())
    same(d[2], x[2])
    same(d.view(torch.uint8), x.view(torch.uint8))
    same(d.reshape(15, 7).to(torch.float32), x.reshape(15, 7).to(torch.float32))
    same(d[:, 3:].to(torch.float32), x[:, 3:].to(torch.float32))  # a non-contiguous view converted
    same(torch.cat([d, d[:2]]), torch.cat([x, x[:2]]))
    same(torch.stack([d, d]), torch.stack([x, x]))
    same(d.flip(0), x.flip(0))
    same(d.roll(2, 1), x.roll(2, 1))
    same(d.repeat(2, 1), x.repeat(2, 1))
    same(torch.nn.functional.pad(d, (1, 2)), torch.nn.functional.pad(x, (1, 2)))
    idx = torch.tensor([4, 0, 6])
    same(d.index_select(0, idx.to(DEV)), x.index_select(0, idx))
    same(d[idx.to(DEV)], x[idx])
    y, z = d.clone(), x.clone()
    y[1:3, 2:5] = d[4:6, :3]
    z[1:3, 2:5] = x[4:6, :3]
    same(y, z)
    y[0] = 3.0
    z[0] = 3.0
    same(y, z)
    # a float32 source written into a float8 view
    src = torch.randn(2, 3) * 1000
    y[1:3, 2:5] = src.to(DEV)
    z[1:3, 2:5] = src
    same(y, z)
    assert d[3, 4].item() == x[3, 4].item() or (x[3, 4].float().isnan() and d[3, 4].float().isnan())
    assert d.tolist()[0][:5] == x.tolist()[0][:5] or x.float().isnan().any()


@pytest.mark.parametrize("dtype", F8)
def test_float8_math_the_cpu_lacks_raises_its_error(dtype):
    x = torch.randn(4, 4).to(dtype)
    d = x.to(DEV)
    for f in [lambda t: t + t, lambda t: t.sum(), lambda t: -t, lambda t: t.max(), lambda t: t.sort(),
              lambda t: t.clamp(0, 1), lambda t: t < t]:
        with pytest.raises(NotImplementedError) as want:
            f(x)
        with pytest.raises(NotImplementedError) as got:
            f(d)
        assert str(got.value).split("\n")[0] == str(want.value).split("\n")[0]
    with pytest.raises(RuntimeError, match="Promotion for Float8 Types is not supported"):
        torch.cat([d, d.float()])


@pytest.mark.parametrize("dtype", F8)
def test_float8_math_the_cpu_has_runs_there(dtype):
    x = torch.randn(5, 5).to(dtype)
    d = x.to(DEV)
    same(d * d, x * x)
    same(d.abs(), x.abs())
    same(d == d, x == x)
    same(d @ d, x @ x)


def f8(*shape, dtype=torch.float8_e4m3fn, seed=0, scale=1.0, noncontiguous=False):
    g = torch.Generator().manual_seed(seed + sum(shape))
    x = (torch.randn(*shape, generator=g) * scale).to(dtype)
    return x.t().contiguous().t() if noncontiguous else x


def small_ints(*shape, dtype=torch.float8_e4m3fn, seed=0):
    # products and sums of small integers are exact in float32: the two matmuls agree bit for bit
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-8, 9, shape, generator=g).float().to(dtype)


@pytest.fixture(autouse=True)
def cpu_scaled_mm_without_onednn():
    """PyTorch CPU's _scaled_mm answers two ways by host: with AMX (Sapphire Rapids and later) it
    runs oneDNN, which rejects a float64 bias and raises other errors for bad inputs; elsewhere it
    runs its own emulation (dequantize, matmul, scale). The reference is the emulation on every
    host, as oneDNN is off."""
    with torch.backends.mkldnn.flags(enabled=False):
        yield


def scaled_mm_both(a, b, sa, sb, **kw):
    before = fallbacks()
    dev = {k: (v.to(DEV) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    got = torch._scaled_mm(a.to(DEV), b.to(DEV), sa.to(DEV), sb.to(DEV), **dev)
    assert fallbacks() == before, fallbacks()
    return got.cpu(), torch._scaled_mm(a, b, sa, sb, **kw)


SHAPES = [(16, 32, 16), (5, 7, 3), (1, 1, 1), (17, 33, 9), (0, 4, 3), (3, 0, 5), (4, 6, 0)]


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("out_dtype", [None, torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn,
                                       torch.float8_e5m2])
def test_scaled_mm_exact(m, k, n, out_dtype):
    a, b = small_ints(m, k, seed=1), small_ints(n, k, seed=2, dtype=torch.float8_e5m2).t()
    sa, sb = torch.tensor(0.5), torch.tensor(4.0)
    got, want = scaled_mm_both(a, b, sa, sb, out_dtype=out_dtype)
    same(got, want)


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16, torch.float8_e4m3fn])
@pytest.mark.parametrize("bias_dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_scaled_mm_bias(out_dtype, bias_dtype):
    a, b = small_ints(6, 10, seed=3), small_ints(10, 7, seed=4)
    bias = torch.arange(7, dtype=bias_dtype) * 0.25
    got, want = scaled_mm_both(a, b, torch.tensor(1.0), torch.tensor(2.0), bias=bias, out_dtype=out_dtype)
    same(got, want)


def test_scaled_mm_scale_result_and_overflow():
    a, b = small_ints(8, 16, seed=5), small_ints(16, 8, seed=6)
    sr = torch.tensor(0.25)
    for out_dtype in [torch.float8_e4m3fn, torch.float8_e5m2]:
        got, want = scaled_mm_both(a, b, torch.tensor(2.0), torch.tensor(8.0), scale_result=sr, out_dtype=out_dtype)
        same(got, want)  # past 448 saturates (e4m3fn), past 57344 is inf (e5m2)
    # without out_dtype the CPU ignores scale_result (its default for the test is bfloat16)
    got, want = scaled_mm_both(a, b, torch.tensor(1.0), torch.tensor(1.0), scale_result=sr)
    same(got, want)
    # NaN and inf operands
    a2 = a.float()
    a2[0, 0], a2[1, 1] = float("nan"), float("inf")
    got, want = scaled_mm_both(a2.to(torch.float8_e5m2), b, torch.tensor(1.0), torch.tensor(1.0),
                               out_dtype=torch.float32)
    same(got, want)


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16, torch.float8_e4m3fn])
def test_scaled_mm_rowwise(out_dtype):
    a, b = small_ints(5, 12, seed=7), small_ints(9, 12, seed=8).t()
    sa = torch.tensor([0.5, 1, 2, 4, 0.25]).reshape(5, 1)
    sb = (2.0 ** torch.arange(-4, 5)).reshape(1, 9)
    got, want = scaled_mm_both(a, b, sa, sb, out_dtype=out_dtype)
    same(got, want)


@pytest.mark.parametrize("layout", ["row_major_b", "col_major_a", "sliced"])
def test_scaled_mm_any_layout(layout):
    a, b = small_ints(6, 16, seed=9), small_ints(16, 5, seed=10)
    if layout == "col_major_a":
        a = a.t().contiguous().t()
    elif layout == "sliced":
        a, b = a[::2, 1:], b[1:, ::2]
    got, want = scaled_mm_both(a, b, torch.tensor(1.0), torch.tensor(1.0), out_dtype=torch.float32)
    same(got, want)


def test_scaled_mm_random_values_close():
    a, b = f8(33, 64, scale=20), f8(64, 17, seed=1, dtype=torch.float8_e5m2, scale=100)
    sa, sb = torch.tensor(0.01), torch.tensor(0.003)
    got, want = scaled_mm_both(a, b, sa, sb, out_dtype=torch.float32)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    got, want = scaled_mm_both(a, b, sa, sb, out_dtype=torch.bfloat16, bias=torch.randn(17))
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)


def test_scaled_mm_out():
    a, b = small_ints(4, 8, seed=11), small_ints(8, 3, seed=12)
    one = torch.tensor(1.0)
    want = torch._scaled_mm(a, b, one, one, out_dtype=torch.float32)
    out = torch.empty(4, 3, device=DEV)
    torch._scaled_mm(a.to(DEV), b.to(DEV), one.to(DEV), one.to(DEV), out_dtype=torch.float32, out=out)
    same(out, want)


BAD = {
    "float32 operands": lambda a, b, o: ((a.float(), b.float(), o, o), {}),
    "shapes": lambda a, b, o: ((a, b[:8], o, o), {}),
    "double scale": lambda a, b, o: ((a, b, o.double(), o), {}),
    "two-element scale": lambda a, b, o: ((a, b, torch.ones(2), o), {}),
    "1-d row scales": lambda a, b, o: ((a, b, torch.ones(6), torch.ones(5)), {}),
    "row scales of b wrong": lambda a, b, o: ((a, b, torch.ones(6, 1), torch.ones(5, 1)), {}),
    "3-d self": lambda a, b, o: ((a[None], b, o, o), {}),
    "bias size": lambda a, b, o: ((a, b, o, o), {"bias": torch.ones(3), "out_dtype": torch.float32}),
    "bias shape": lambda a, b, o: ((a, b, o, o), {"bias": torch.ones(1, 1, 5), "out_dtype": torch.float32}),
    "complex bias": lambda a, b, o: ((a, b, o, o), {"bias": torch.ones(5, dtype=torch.complex64),
                                                   "out_dtype": torch.float32}),
    "double scale_result": lambda a, b, o: ((a, b, o, o), {"scale_result": o.double(),
                                                          "out_dtype": torch.float8_e4m3fn}),
}


@pytest.mark.parametrize("case", list(BAD))
def test_scaled_mm_bad_inputs_raise_like_the_cpu(case):
    a, b, one = small_ints(6, 16, seed=13), small_ints(16, 5, seed=14), torch.tensor(1.0)
    args, kw = BAD[case](a, b, one)
    with pytest.raises(Exception) as want:
        torch._scaled_mm(*args, **kw)
    dev_args = [t.to(DEV) for t in args]
    dev_kw = {k: (v.to(DEV) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    with pytest.raises(Exception) as got:
        torch._scaled_mm(*dev_args, **dev_kw)
    assert type(got.value) is type(want.value), (got.value, want.value)
    assert "_scaled_mm" in str(got.value)


def test_unsupported_float8_kinds_still_raise():
    with pytest.raises(TypeError, match="not supported on the tpu device"):
        torch.empty(3, dtype=torch.float8_e4m3fnuz, device=DEV)


TW, RW, NO_SWIZZLE = 0, 1, 0  # torch.nn.functional.ScalingType / SwizzleType values


def scaled_mm_v2(a, b, sa, ra, sb, rb, bias=None, out_dtype=None, **kw):
    return torch._scaled_mm_v2(a, b, sa, ra, [NO_SWIZZLE], sb, rb, [NO_SWIZZLE], bias, out_dtype, **kw)


def v2_both(a, b, sa, ra, sb, rb, bias=None, out_dtype=None, **kw):
    before = fallbacks()
    dev = lambda t: None if t is None else t.to(DEV)
    got = scaled_mm_v2(dev(a), dev(b), [dev(s) for s in sa], ra, [dev(s) for s in sb], rb, dev(bias), out_dtype, **kw)
    assert fallbacks() == before, fallbacks()
    return got.cpu(), scaled_mm_v2(a, b, sa, ra, sb, rb, bias, out_dtype, **kw)


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("out_dtype", [None, torch.float32, torch.bfloat16, torch.float8_e5m2])
def test_scaled_mm_v2_tensorwise(m, k, n, out_dtype):
    a, b = small_ints(m, k, seed=15), small_ints(n, k, seed=16, dtype=torch.float8_e5m2).t()
    bias = torch.arange(n, dtype=torch.bfloat16) * 0.5
    got, want = v2_both(a, b, [torch.tensor(0.5)], [TW], [torch.tensor(4.0)], [TW], bias=bias, out_dtype=out_dtype)
    same(got, want)


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16, torch.float8_e4m3fn])
def test_scaled_mm_v2_rowwise(out_dtype):
    a, b = small_ints(5, 12, seed=17), small_ints(12, 9, seed=18)
    sa = torch.tensor([0.5, 1, 2, 4, 0.25]).reshape(5, 1)
    sb = (2.0 ** torch.arange(-4, 5)).reshape(1, 9)
    got, want = v2_both(a, b, [sa], [RW], [sb], [RW], bias=torch.ones(9), out_dtype=out_dtype)
    same(got, want)


def test_scaled_mm_v2_contraction_dim():
    a, b = small_ints(4, 8, seed=19), small_ints(8, 3, seed=20)
    got, want = v2_both(a, b, [torch.tensor(1.0)], [TW], [torch.tensor(1.0)], [TW], out_dtype=torch.float32,
                        contraction_dim=[1, 0])
    same(got, want)


BAD_V2 = {
    "shapes": lambda a, b, o: (a, b[:8], [o], [TW], [o], [TW], None, None),
    "row-wise recipe, tensor scales": lambda a, b, o: (a, b, [o], [RW], [o], [RW], None, None),
    "mixed recipes": lambda a, b, o: (a, b, [o], [TW], [torch.ones(1, 5)], [RW], None, None),
    "double scale": lambda a, b, o: (a, b, [o.double()], [TW], [o], [TW], None, None),
    "bias dtype": lambda a, b, o: (a, b, [o], [TW], [o], [TW], torch.ones(5, dtype=torch.float64), torch.float32),
    "bias size": lambda a, b, o: (a, b, [o], [TW], [o], [TW], torch.ones(4), torch.float32),
    "1-d self": lambda a, b, o: (a[0], b, [o], [TW], [o], [TW], None, None),
    "two scales": lambda a, b, o: (a, b, [torch.ones(2)], [TW], [o], [TW], None, None),
}


@pytest.mark.parametrize("case", list(BAD_V2))
def test_scaled_mm_v2_bad_inputs_raise_like_the_cpu(case):
    a, b, one = small_ints(6, 16, seed=21), small_ints(16, 5, seed=22), torch.tensor(1.0)
    args = BAD_V2[case](a, b, one)
    with pytest.raises(Exception) as want:
        scaled_mm_v2(*args)
    dev = lambda t: [dev(x) for x in t] if isinstance(t, list) else (t.to(DEV) if isinstance(t, torch.Tensor) else t)
    with pytest.raises(Exception) as got:
        scaled_mm_v2(*[dev(x) for x in args])
    assert type(got.value) is type(want.value), (got.value, want.value)
    assert "_scaled_mm_v2" in str(got.value)


@pytest.mark.parametrize("name", ["torch._scaled_mm", "torch._scaled_mm_v2"])
@pytest.mark.parametrize("dtype", F8)
def test_opinfo_samples(name, dtype):
    from torch.testing._internal.common_methods_invocations import op_db
    op = next(o for o in op_db if o.name == name)
    dev = lambda t: [dev(x) for x in t] if isinstance(t, list) else (t.to(DEV) if isinstance(t, torch.Tensor) else t)
    for s in op.sample_inputs("cpu", dtype):
        before = fallbacks()
        got = op(dev(s.input), *[dev(a) for a in s.args], **{k: dev(v) for k, v in s.kwargs.items()})
        assert fallbacks() == before, fallbacks()
        want = op(s.input, *s.args, **s.kwargs)
        torch.testing.assert_close(got.cpu().float(), want.float(), rtol=1e-2, atol=1e-2, equal_nan=True)


def test_compiled_graph_converts_float8():
    import torch._dynamo
    torch._dynamo.reset()
    x = edges()[:96].reshape(8, 12)

    def f(v):
        return v.to(torch.float8_e4m3fn).t().contiguous(), (v.to(torch.float8_e5m2).float() * 2)

    got = torch.compile(f, backend="tpu")(x.to(DEV))
    want = f(x)
    same(got[0], want[0])
    same(got[1], want[1])


def test_compiled_graph_float8_math_is_refused():
    import torch._dynamo
    torch._dynamo.reset()
    x = torch.randn(4, 4).to(torch.float8_e4m3fn)
    with pytest.raises(Exception, match="float8"):
        torch.compile(lambda v: v + v, backend="tpu")(x.to(DEV))


@pytest.mark.parametrize("dtype", F8)
def test_pad_value_checked_like_fill(dtype):
    x = edges()[:12].reshape(4, 3).to(dtype)
    before = fallbacks()
    same(torch.nn.functional.pad(x.to(DEV), (1, 2), value=2.7), torch.nn.functional.pad(x, (1, 2), value=2.7))
    assert fallbacks() == before, fallbacks()
    for v in [1000.0, 1e6, float("inf")]:
        try:
            want = torch.nn.functional.pad(x, (1, 1), value=v)
        except RuntimeError:
            with pytest.raises(RuntimeError, match="without overflow"):
                torch.nn.functional.pad(x.to(DEV), (1, 1), value=v)
        else:
            same(torch.nn.functional.pad(x.to(DEV), (1, 1), value=v), want)


@pytest.mark.parametrize("dtype", F8)
def test_index_put_follows_the_cpu(dtype):
    # accumulating float8 rounds after every add on the CPU, and mixed dtypes raise: it runs there
    x, v, i = torch.randn(4, 3).to(dtype), torch.randn(2, 3).to(dtype), torch.tensor([0, 0])
    same(x.to(DEV).index_put_((i.to(DEV),), v.to(DEV), accumulate=True), x.clone().index_put_((i,), v, accumulate=True))
    with pytest.raises(RuntimeError, match="dtypes match"):
        x.to(DEV).index_put_((i.to(DEV),), v.float().to(DEV))
