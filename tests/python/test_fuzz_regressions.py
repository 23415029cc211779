"""Defects the differential fuzzer (tests/fuzz) found, each pinned by the smallest call that
showed it, compared with PyTorch CPU at assert_close's default tolerances."""
import math

import pytest
import torch

import torch_tpu  # noqa: F401

from cpu_loops import either, scalar_loop, vector_loop
from helpers import fallbacks

inf, nan = math.inf, math.nan
aten = torch.ops.aten


def same_as_cpu(f, *xs, loops=None):
    """f on tpu copies of xs gives the CPU's values, dtypes and shapes, with no CPU fallback.
    `loops`: the name of a point-wise op whose CPU loops may disagree (cpu_loops.py)."""
    before = fallbacks()
    got = f(*[x.to("tpu") if isinstance(x, torch.Tensor) else x for x in xs])
    want = either(got, scalar_loop(f, *xs), vector_loop(f, *xs), loops) if loops else f(*xs)
    got, want = (got, want) if isinstance(want, (tuple, list)) else ([got], [want])
    for g, w in zip(got, want):
        g = g.cpu()
        if w.is_complex():  # parts apart: assert_close measures |inf+ai - (inf+bi)| as NaN
            g, w = torch.view_as_real(g.resolve_conj()), torch.view_as_real(w.resolve_conj())
        torch.testing.assert_close(g, w, equal_nan=True)
    assert fallbacks() == before, fallbacks()


def test_mse_loss_backward_mean_counts_self_not_the_broadcast_gradient():
    # grad_output (7, 5) broadcasts a 0-d self: the mean divides by self's 1 element.
    grad = torch.randn(7, 5)
    same_as_cpu(lambda g, x, y: aten.mse_loss_backward(g, x, y, 1), grad, torch.tensor(4.3), torch.tensor(1.0))


def test_tanh_and_sigmoid_backward_of_complex_take_the_conjugate():
    g = torch.tensor([1 + 2j, -3 + 0.5j], dtype=torch.complex64)
    y = torch.tensor([0.3 - 1.7j, 2 + 1j], dtype=torch.complex64)
    same_as_cpu(aten.tanh_backward, g, y)
    same_as_cpu(aten.sigmoid_backward, g, y)


def test_backward_products_overflow_in_the_cpus_order():
    # g * (1 - y) * y: g * (1 - y) overflows to inf first on the CPU, then * y = inf, not NaN.
    g, y = torch.tensor([1e30, -1e30, 1e30]), torch.tensor([-1e30, 1e-30, 0.5])
    same_as_cpu(aten.sigmoid_backward, g, y)
    same_as_cpu(aten.tanh_backward, g, y)


def test_addcmul_and_addcdiv_multiply_value_first_like_the_cpu():
    x, a, d = torch.zeros(3), torch.tensor([1e30, 3e38, -2e20]), torch.tensor([1e10, 1e-30, 4e20])
    same_as_cpu(lambda x, a, d: torch.addcmul(x, a, d, value=10.0), x, a, d)
    same_as_cpu(lambda x, a, d: torch.addcdiv(x, a, d, value=1e-10), x, a, d)


def test_integer_addcmul_wraps_in_int_before_a_float_out():
    x = torch.tensor([2**31 - 1, -5], dtype=torch.int32)
    a = torch.tensor([2**31 - 1, 7], dtype=torch.int32)
    same_as_cpu(lambda x, a: torch.addcmul(x, a, a, value=-3, out=torch.empty(0, dtype=torch.bfloat16, device=x.device)),
                x, a)


def test_complex_sigmoid_is_nan_where_exp_overflows_like_the_cpu():
    z = torch.tensor([complex(-inf, -1.0), complex(-100.0, 1.0), complex(0.5, -3.0), complex(-0.4, 0.3)] * 3,
                     dtype=torch.complex64)
    same_as_cpu(torch.sigmoid, z)
    same_as_cpu(lambda z: torch._foreach_sigmoid([z])[0], z)


def test_complex_sqrt_keeps_the_sign_of_a_zero_imaginary_part():
    z = torch.tensor([complex(-2.178, 0.0), complex(4.0, 0.0), complex(-1.0, 2.0)], dtype=torch.complex64)
    same_as_cpu(torch.sqrt, z.conj())
    same_as_cpu(torch.sqrt, z)
    got = torch.sqrt(z.conj().to("tpu")).cpu()
    assert torch.equal(got.imag.signbit(), torch.sqrt(z.conj().resolve_conj()).imag.signbit())


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32, torch.complex64])
def test_foreach_abs_of_unsigned_and_complex(dtype):
    xs = [torch.tensor([[3, 2], [0, 7]]).to(dtype), torch.tensor([1, 5, 0]).to(dtype)]
    if dtype == torch.complex64:
        xs = [x * (1 - 2j) for x in xs]
    same_as_cpu(lambda *xs: torch._foreach_abs(list(xs)), *xs)


def test_abs_of_bool_is_not_implemented_like_the_cpu():
    x = torch.tensor([True, False])
    for f in (torch.abs, lambda x: torch._foreach_abs([x])):
        with pytest.raises(NotImplementedError):
            f(x)
        with pytest.raises(NotImplementedError, match="abs"):
            f(x.to("tpu"))


def test_float_math_of_integers_into_a_complex_out_computes_in_reals():
    x = torch.tensor([1, 7, 255, 6], dtype=torch.uint8)
    same_as_cpu(lambda x: torch.erf(x, out=torch.empty(4, dtype=torch.complex64, device=x.device)), x)
    i = torch.tensor([-4, 9], dtype=torch.int32)  # sqrt(-4) is NaN in reals, 2j in complex
    same_as_cpu(lambda i: torch.sqrt(i, out=torch.empty(2, dtype=torch.complex64, device=i.device)), i)


def test_threshold_backward_promotes_integer_grads_like_the_cpu():
    same_as_cpu(lambda g, x: aten.threshold_backward(g, x, -1.147),
                torch.tensor(-2, dtype=torch.int32).expand(7), torch.randn(7, dtype=torch.float64))
    same_as_cpu(lambda g, x: aten.threshold_backward(g, x, 3),
                torch.tensor([6, -1, 4], dtype=torch.int64), torch.tensor(-3.0))


@pytest.mark.parametrize("op", [aten._log_softmax_backward_data, aten._softmax_backward_data])
def test_softmax_backward_data_returns_the_grads_dtype_like_the_cpu(op):
    g = torch.tensor([3.0, -1.0], dtype=torch.float16)
    y = torch.tensor([-0.7, -1.2], dtype=torch.float16)
    same_as_cpu(lambda g, y: op(g, y, -1, torch.float32), g, y)
    same_as_cpu(lambda g, y: op(g, y, 0, torch.bfloat16), g.float(), y.float())


def test_half_convolution_is_at_least_as_close_as_the_cpu_to_float64():
    x = torch.randn(1, 1, 8, 5, dtype=torch.float16)
    w = torch.randn(1, 1, 8, 3, dtype=torch.float16)
    bias = torch.tensor([0.344], dtype=torch.float16)
    args = ([1, 2], [1, 1], [1, 1], True, [0, 0], 1, False, False, True, True)
    cpu = aten._convolution(x, w, bias, *args)
    got = aten._convolution(x.to("tpu"), w.to("tpu"), bias.to("tpu"), *args).cpu()
    ref = aten._convolution(x.double(), w.double(), bias.double(), *args)
    assert got.dtype == cpu.dtype and got.shape == cpu.shape
    assert bool(((got.double() - ref).abs() <= (cpu.double() - ref).abs() + 1e-12).all())


def test_batch_norm_eval_without_running_stats_raises_instead_of_crashing():
    # The CPU kernel reads the missing statistics and segfaults; we raise, naming the op.
    x = torch.randn(1, 2, 3, 8, device="tpu")
    with pytest.raises(RuntimeError, match="_native_batch_norm_legit"):
        aten._native_batch_norm_legit.no_stats(x, None, None, False, 0.9, 1e-3)


def test_complex_remainder_and_fmod_are_not_implemented_like_the_cpu():
    # XLA's compiler crashed (segfault) on a complex stablehlo.remainder.
    z, y = torch.tensor([complex(-1.1, 1.1)]), torch.tensor(-3.3, dtype=torch.float64)
    for f in (torch.remainder, torch.fmod):
        with pytest.raises(NotImplementedError):
            f(z, y)
        with pytest.raises(NotImplementedError, match="_cpu"):
            f(z.to("tpu"), y.to("tpu"))


def test_max_of_no_elements_raises_but_max_out_gives_the_identity_like_the_cpu():
    for dtype in (torch.int32, torch.float32):
        x = torch.ones(4, 5, 0, dtype=dtype)
        same_as_cpu(lambda x: aten.max.unary_out(x, out=torch.empty(0, dtype=dtype, device=x.device)), x)
        same_as_cpu(lambda x: aten.min.unary_out(x, out=torch.empty(0, dtype=dtype, device=x.device)), x)
        with pytest.raises(RuntimeError, match="max"):
            torch.max(x.to("tpu"))


def test_float_predicates_of_complex_look_at_both_parts():
    z = torch.tensor([complex(inf, 0), complex(1, nan), complex(-inf, nan), complex(0.5, -2), complex(1, -inf)])
    for f in (torch.isfinite, torch.isinf, torch.isnan):
        same_as_cpu(f, z)
    for f in (torch.isposinf, torch.isneginf):
        with pytest.raises(RuntimeError, match="complex"):
            f(z.to("tpu"))


def test_dropped_infinite_gradients_are_nan_like_the_cpu():
    g = torch.tensor([inf, -inf, nan, 2.0, inf])
    mask = torch.tensor([False, True, False, False, True])
    same_as_cpu(lambda g, m: aten.native_dropout_backward(g, m, -0.394), g, mask)
    dropped_only = torch.tensor([False, False, False, False, False])  # kept complex infs differ (XLA complex product; open)
    same_as_cpu(lambda g, m: aten.native_dropout_backward(g, m, 2.0), g.to(torch.complex64), dropped_only)


def test_addcdiv_and_addcmul_of_bool_tensors_with_an_infinite_value():
    x, t1 = torch.randn(6), torch.tensor([False, True, False, True, True, False])
    d = torch.tensor([2.0, -1.0, 0.5, nan, 3.0, 1.0])
    same_as_cpu(lambda x, t1, d: torch.addcdiv(x, t1, d, value=inf), x, t1, d)
    same_as_cpu(lambda x, t1, d: torch.addcmul(x, d, t1, value=-inf), x, t1, d)


def test_layer_norm_mean_of_a_row_with_an_inf_is_nan_like_the_cpu():
    x = torch.tensor([[-inf, 1.8, 1.0, -2.1], [0.5, inf, -1.0, 2.0], [1.0, 2.0, 3.0, 4.0]])
    same_as_cpu(lambda x: aten.native_layer_norm(x, [4], None, None, 0.9), x)


def test_foreach_sign_of_nan_is_zero_and_foreach_maximum_propagates_nan():
    x = torch.tensor([nan, -0.0, 2.5, -inf, 1e30])
    same_as_cpu(lambda x: torch._foreach_sign([x])[0], x)
    same_as_cpu(lambda x: torch._foreach_maximum([x], nan)[0], x)
    same_as_cpu(lambda x, y: torch._foreach_minimum([x], [y])[0], x, torch.tensor([0.0, nan, 1.0, 2.0, 3.0]))
    same_as_cpu(lambda x: torch._foreach_clamp_min([x], 0.5)[0], x)


def test_integer_add_relu_and_addcmul_truncate_a_float_alpha_like_the_cpu():
    a = torch.tensor([3, -3, 2**40, -6], dtype=torch.int64)
    b = torch.tensor([4, -1, 2**40, 6], dtype=torch.int64)
    same_as_cpu(lambda a, b: aten._add_relu_(a.clone(), b, alpha=-0.961), a, b)
    same_as_cpu(lambda a, b: aten._add_relu(a, b, alpha=2.7), a, b)
    x, t1, t2 = (torch.tensor([6], dtype=torch.int32), torch.tensor([-1], dtype=torch.int32),
                 torch.tensor([6], dtype=torch.int32))
    for value in (0.545, 1.9, -2.5):
        same_as_cpu(lambda x, t1, t2: torch.addcmul(x, t1, t2, value=value,
                                                    out=torch.empty(0, dtype=torch.int64, device=x.device)), x, t1, t2)


def test_logcumsumexp_out_of_another_dtype_raises_like_the_public_op():
    # The CPU kernel of _logcumsumexp.out writes floats into a uint8 out= past its end.
    x = torch.randn(5, 7)
    with pytest.raises(RuntimeError, match="expected scalar_type Float but found Byte"):
        torch.logcumsumexp(x, 0, out=torch.empty(5, 7, dtype=torch.uint8))
    with pytest.raises(RuntimeError, match="expected scalar_type Float but found Byte"):
        aten._logcumsumexp.out(x.to("tpu"), 0, out=torch.empty(5, 7, dtype=torch.uint8, device="tpu"))


def test_batch_norm_takes_a_0d_per_channel_tensor_of_one_channel_and_checks_sizes():
    x = torch.randn(4, 1, 3)
    same_as_cpu(lambda x, bias, rm, rv: aten._native_batch_norm_legit_functional(x, None, bias, rm, rv, True, 0.5, 1e-3),
                x, torch.tensor(-4.3), torch.tensor([-2.7]), torch.tensor([0.5]))
    with pytest.raises(RuntimeError, match="weight should contain 2 elements not 1"):
        aten._native_batch_norm_legit_functional(torch.randn(5, 2, device="tpu"), torch.ones(1, device="tpu"), None,
                                                 torch.zeros(2, device="tpu"), torch.ones(2, device="tpu"),
                                                 True, 0.9, 1e-3)


def test_cummax_helper_rejects_mis_shaped_outputs():
    # The CPU kernel writes through them out of bounds (docs/limits.md); torch.cummax sizes them.
    x = torch.randn(5, 4, 5, device="tpu")
    values, indices = torch.empty(5, 1, 5, device="tpu"), torch.empty(5, 4, 5, dtype=torch.long, device="tpu")
    with pytest.raises(RuntimeError, match="_cummin_helper.*self's shape"):
        aten._cummin_helper(x, values, indices, 1)
    same_as_cpu(lambda x: torch.cummin(x, 1), x.cpu())


def test_lu_never_pivots_on_a_nan_or_a_row_above_the_diagonal():
    # LAPACK's i?amax skips NaN candidates unless the diagonal one is NaN; a column of NaNs below
    # the diagonal once made us pick an already eliminated row.
    a = torch.tensor([0.523, nan, 3.294, -1.43, 1e30, inf, 1.0, -0.583, -1.941, 1.316, 0.0, -2.5, 0.393, 2.0, -0.07,
                      1.225, -2.469, nan, nan, 0.0, -3.477, -0.656, 0.5, 1.0, 0.807, 0.0, 3.0, 1.249, -0.072, -inf,
                      2.382, 0.0]).reshape(2, 4, 4)
    same_as_cpu(lambda a: torch.linalg.lu_factor_ex(a), a)


def test_complex_log2_log10_exp2_scale_by_a_real_constant_like_the_cpu():
    # A complex multiply/divide by (ln 2 + 0i) turned an infinite part's 0 partner into NaN.
    # The reference scales log(z)'s parts by the real constant (exp2: z's parts before exp), as
    # the CPU's AVX2/AVX-512 kernels do; its generic `default` build gives log2(inf + 0.27j) a NaN
    # imaginary part (docs/limits.md), so the CPU's own log2 is not the same on every host.
    z = torch.tensor([complex(inf, 0.27), complex(-inf, 2.322), complex(3.967, 2.105), complex(0.0, -6.084)])

    def scaled(w, c):
        return torch.view_as_complex((torch.view_as_real(w) * c).contiguous())
    want = {torch.log2: scaled(torch.log(z), 1 / math.log(2)), torch.log10: scaled(torch.log(z), 1 / math.log(10)),
            torch.exp2: torch.exp(scaled(z, math.log(2)))}
    calls = list(want.items()) + [(lambda v: torch._foreach_log2([v])[0], want[torch.log2]),
                                  (lambda v: torch._foreach_log10([v])[0], want[torch.log10])]
    for f, w in calls:
        # parts apart: assert_close measures |inf+ai - (inf+bi)| as NaN
        torch.testing.assert_close(torch.view_as_real(f(z.to("tpu")).cpu()), torch.view_as_real(w), equal_nan=True)


def test_all_any_dims_of_an_empty_list_reduce_nothing():
    # Seed 13 #33: the module reduced every dim and the compiler rejected its shape.
    t = torch.tensor([[-3.0, 0.0, 2.0], [nan, 0.0, 1.0]]).to(torch.bfloat16)
    for keepdim in (True, False):
        same_as_cpu(lambda x: aten.all.dims(x, [], keepdim), t)
        same_as_cpu(lambda x: aten.any.dims(x, [], keepdim), t)
        same_as_cpu(lambda x: aten.all.dims(x, None, keepdim), t)


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_polygamma_in_place_takes_self_first(n):
    # Seed 13 #964/#1010: polygamma_(self, n) was read as polygamma(n, self).
    x = torch.tensor([0.3, 1.5, -2.5, 7.0, nan, inf])
    same_as_cpu(lambda t: t.clone().polygamma_(n), x)
    same_as_cpu(lambda t: torch.polygamma(n, t), x)


def test_softmax_backward_of_integer_or_empty_gradients():
    # Seed 13 #246: an empty int32 gradient built exp() of integers (rejected by the compiler).
    g = torch.zeros(2, 7, 0, dtype=torch.int32)
    same_as_cpu(lambda a, b: aten._log_softmax_backward_data(a, b, 1, torch.float32), g, g.clone())
    same_as_cpu(lambda a, b: aten._softmax_backward_data(a, b, 1, torch.float32), g, g.clone())


def test_inf_times_false_is_nan():
    # XLA rewrites y * convert(bool) as select(bool, y, 0): inf * False became 0.
    x = torch.tensor([inf, -inf, nan, 2.0, 1e30])
    m = torch.tensor([False, False, False, True, False])
    same_as_cpu(lambda a, b: a * b, x, m)
    same_as_cpu(lambda a, b: torch._foreach_mul([a], [b]), x, m)
    same_as_cpu(lambda a, b: torch._foreach_addcmul([a], [a], [b], [-2.5]), x, m)
    same_as_cpu(lambda a, b: a.to(torch.bfloat16) * b, x, m)


def test_alpha_is_rounded_to_the_tensors_dtype_first():
    # 1.997 is 2.0 in bfloat16: the CPU computes 1.6719 - 2 * 1.0938, not - 1.997 * 1.0938.
    a = torch.tensor([1.0938, -0.8008, 3.0, 0.75], dtype=torch.bfloat16)
    b = torch.tensor([1.6719, -3.6562, 2.0, -0.5], dtype=torch.bfloat16)
    same_as_cpu(lambda x, y: torch.rsub(x, y, alpha=1.997), a, b)
    same_as_cpu(lambda x, y: torch.sub(y, x, alpha=1.997), a, b)
    same_as_cpu(lambda x, y: torch.add(y, x, alpha=-1.997), a, b)
    same_as_cpu(lambda x, y: aten.rsub.Tensor_out(x, y, alpha=1.997, out=torch.empty(0, dtype=x.dtype, device=x.device)), a, b)


def test_foreach_scalars_are_rounded_to_the_lists_dtype():
    # _foreach_add_(bf16 list, -1.543): the CPU adds -1.546875 (the scalar in bfloat16).
    xs = [torch.linspace(-3, 3, 37).to(torch.bfloat16), torch.linspace(0.1, 9, 11).to(torch.bfloat16)]

    def add_(a, b):
        torch._foreach_add_([a, b], -1.543)
        return a, b
    same_as_cpu(add_, *xs)
    same_as_cpu(lambda a, b: torch._foreach_mul([a, b], [1.003, -0.7071]), *xs)


def test_silu_backward_groups_products_like_the_cpu():
    # (dy * sigmoid) * (1 + x (1 - sigmoid)): for an infinite complex product the grouping
    # decides between inf and NaN parts.
    g = torch.tensor([-inf, -1.47, 0.5], dtype=torch.bfloat16)
    x = torch.tensor([0.5 + 0.355j, 1.01 + 0.166j, -1.69 + 2j], dtype=torch.complex64)
    same_as_cpu(aten.silu_backward, g, x)


def test_qr_keeps_a_nan_column_out_of_earlier_columns_of_q():
    a = torch.randn(2, 7, 3, generator=torch.Generator().manual_seed(3))
    a[1, 4, 1] = nan
    same_as_cpu(torch.linalg.qr, a)
    geqrf = torch.geqrf(a)
    same_as_cpu(torch.linalg.householder_product, geqrf.a, geqrf.tau)


def test_fft_normalization_codes_past_by_n_scale_like_by_n():
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(0))
    for mode in (0, 1, 2, 3):
        same_as_cpu(lambda t: aten._fft_r2c(t, [1], mode, True), x)
        same_as_cpu(lambda t: aten._fft_c2c(t.to(torch.complex64), [1], mode, False), x)


def test_softmax_backward_with_mismatched_output_raises_naming_the_shapes():
    g, y = torch.randn(4, device="tpu"), torch.randn((), device="tpu")
    with pytest.raises(RuntimeError, match=r"_log_softmax_backward_data.*output shape \[\] must match grad_output shape \[4\]"):
        aten._log_softmax_backward_data(g, y, -1, torch.float32)
    mask = torch.tensor([False, True, True], device="tpu")
    with pytest.raises(RuntimeError, match=r"output shape \[1\] must match grad_output shape \[3\]"):
        aten._masked_softmax_backward(torch.randn(3, device="tpu"), torch.randn(1, device="tpu"), mask, -1)


def test_weight_norm_of_a_0d_tensor_raises_index_error():
    # v.shape()[dim] of a 0-d v read out of bounds (a segfault) before the dim was checked.
    v, g = torch.tensor(0.144, device="tpu"), torch.tensor(1.9, device="tpu")
    with pytest.raises(IndexError, match="Dimension specified as 0 but tensor has no dimensions"):
        aten._weight_norm_interface(v, g, 0)
    with pytest.raises(IndexError, match="no dimensions"):
        aten._weight_norm_interface_backward(v, v, g, g, 0)


def test_fused_optimizer_cpu_fallback_rejects_mis_shaped_lists():
    # _fused_adam.out with a non-empty out= and _fused_sgd of int tensors take the CPU fallback,
    # whose kernels walk each parameter's element count through the other lists (heap corruption).
    p = [torch.randn(4, 4, device="tpu")]
    small = [torch.randn(1, device="tpu")]
    step = [torch.tensor(5.0, device="tpu")]
    with pytest.raises(ValueError, match=r"_fused_adam.*: tensor 0 of argument 4 has shape \[1\], its parameter \[4, 4\]"):
        aten._fused_adam.out(p, p, p, p, small, step, lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8,
                             amsgrad=True, maximize=False, out=[torch.empty(4, 4, device="tpu")])
    ints = [torch.ones(4, 2, dtype=torch.int32, device="tpu")]
    with pytest.raises(ValueError, match=r"_fused_sgd: tensor 0 of argument 1 has shape \[1\], its parameter \[4, 2\]"):
        aten._fused_sgd(ints, [torch.ones(1, dtype=torch.int32, device="tpu")], [], weight_decay=0.0, momentum=0.0,
                        lr=0.1, dampening=0.0, nesterov=False, maximize=False, is_first_step=False)


def test_embedding_dense_backward_with_no_weights_scaled_by_frequency():
    # num_weights == 0: the frequency gather from an empty count vector was invalid HLO. No CPU
    # reference here: the CPU kernel counts frequencies at counts[-3] of a 0-element buffer (a heap
    # write out of bounds that crashed CI); the gradient of an empty table is an empty (0, 1).
    g, idx = torch.randn(4, 1, device="tpu"), torch.full((4, 1), -3, device="tpu")
    before = fallbacks()
    got = aten.embedding_dense_backward(g, idx, 0, -2, True)
    assert got.shape == (0, 1) and got.dtype == torch.float32 and got.device.type == "tpu"
    assert fallbacks() == before
    # In range, the same call with frequencies matches the CPU.
    g, idx = torch.randn(5, 3), torch.tensor([2, 0, 2, 1, 2])
    same_as_cpu(lambda a, i: aten.embedding_dense_backward(a, i, 3, 0, True), g, idx)


def test_logit_clamps_like_the_cpu_when_eps_exceeds_one_half():
    # lo = 0.9 > hi = 0.1: the CPU takes x < lo ? lo : x > hi ? hi : x.
    x = torch.tensor([0.0, 1.188, 0.5, nan, -inf, 0.95])
    for eps in (0.9, 0.25, 0.0):
        same_as_cpu(lambda t: torch.logit(t, eps), x)


def test_log_sigmoid_backward_broadcasts_a_given_buffer():
    g = torch.tensor([[[-1.259, 0.668]], [[-1.696, 3.54]]])
    x = torch.tensor([1.002, 3.459]).expand(2, 1, 2)
    buf = torch.tensor([1.649, -3.572])
    same_as_cpu(aten.log_sigmoid_backward, g, x, buf)


def test_pdist_of_fewer_than_two_rows_takes_any_dtype_like_the_cpu():
    # The CPU kernel dispatches on dtype only when there are pairs: a complex (1, 5) gives an empty result.
    x = torch.tensor([[1 + 2j, 3 - 1j, 0j, 2 + 0j, -1j]], dtype=torch.complex64)
    same_as_cpu(lambda t: aten._pdist_forward(t, 2.0), x)
    with pytest.raises(NotImplementedError, match="pdist"):
        aten._pdist_forward(torch.ones(3, 2, dtype=torch.complex64, device="tpu"), 2.0)


def test_bilinear_source_past_the_last_row_weighs_it_zero_and_one_like_the_cpu():
    # Input height 1 with scale 0.478: output rows 1 and 2 read row 0 with weights (0, 1), so an inf
    # there is 0 * inf + 1 * inf = NaN on the CPU, and inf only in output row 0.
    x = torch.tensor([[[[inf, 1.5, -2.0, 3.0]]], [[[0.5, nan, -inf, 2.0]]]])
    same_as_cpu(lambda t: aten.upsample_bilinear2d(t, [3, 3], False, 0.478, None), x)
    same_as_cpu(lambda t: aten.upsample_bilinear2d(t, [3, 5], False, 0.478, 0.9), x)


def test_addcmul_complex_times_a_true_bool_multiplies_like_the_cpu():
    # value * (1 + 0j) by parts: -inf * 0 in the imaginary part is NaN, as in c10::complex.
    x = torch.tensor([3.36], dtype=torch.float64).expand(3)
    t1 = torch.tensor([True, False, True])
    t2 = torch.tensor(complex(-1.0, -2.423), dtype=torch.complex64)
    same_as_cpu(lambda a, b, c: torch.addcmul(a, b, c, value=-inf), x, t1, t2)
    same_as_cpu(lambda a, b, c: torch.addcmul(a, b, c, value=2.5), x, t1, t2)


def test_cdist_backward_with_mis_shaped_grad_raises_naming_the_shapes():
    x1, x2 = torch.randn(5, 4, 1, device="tpu"), torch.randn(5, 4, 1, device="tpu")
    dist = torch.cdist(x1, x2)
    with pytest.raises(RuntimeError, match=r"grad has shape \[5, 4, 1\], expected \[5, 4, 4\]"):
        aten._cdist_backward(torch.ones(5, 4, 1, device="tpu"), x1, x2, 2.0, dist)
    with pytest.raises(RuntimeError, match=r"cdist has shape \[5, 4\], expected \[5, 4, 4\]"):
        aten._cdist_backward(torch.ones(5, 4, 4, device="tpu"), x1, x2, 2.0, dist[..., 0])
    # Well-shaped, it matches the CPU.
    a, b = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    same_as_cpu(lambda g, p, q, d: aten._cdist_backward(g, p, q, 1.5, d),
                torch.randn(2, 3, 5), a, b, torch.cdist(a, b, 1.5))


def test_fuzzer_compares_complex_infinities_by_parts():
    from tests.fuzz import classify
    c = torch.tensor([complex(inf, 0.6822), complex(1.0, 2.0)], dtype=torch.complex64)
    t = torch.tensor([complex(inf, 0.68220001), complex(1.0, 2.0)], dtype=torch.complex64)
    classify.compare(c, t)  # one ulp apart beside an inf: close
    with pytest.raises(classify.Difference):
        classify.compare(c, torch.tensor([complex(inf, 0.7), complex(1.0, 2.0)], dtype=torch.complex64))
    with pytest.raises(classify.Difference):
        classify.compare(c, torch.tensor([complex(-inf, 0.6822), complex(1.0, 2.0)], dtype=torch.complex64))
    # A complex with a NaN part is NaN (assert_close's equal_nan), whatever its other part.
    classify.compare(torch.tensor(complex(nan, nan)), torch.tensor(complex(-inf, nan)))
    with pytest.raises(classify.Difference):
        classify.compare(torch.tensor(complex(nan, 1.0)), torch.tensor(complex(inf, 1.0)))


def test_mis_ranked_arguments_raise_instead_of_crashing():
    # Each of these segfaulted (or exhausted memory) reading dims the argument does not have.
    def t(*shape):
        return torch.randn(shape, device="tpu")
    with pytest.raises(RuntimeError, match=r"Expected dimensions 0 for `grad_output` but got dimensions 4"):
        aten._adaptive_avg_pool2d_backward(t(5, 1, 3, 3), t())
    with pytest.raises(RuntimeError, match=r"adaptive_avg_pool3d_backward\(\): Expected 4D or 5D tensor, but got \[4\]"):
        aten._adaptive_avg_pool3d_backward(t(3), torch.ones(4, dtype=torch.int64, device="tpu"))
    with pytest.raises(RuntimeError, match=r"Expected dimensions 4 for `gradOutput_` but got dimensions 2"):
        aten._adaptive_avg_pool3d_backward(t(2, 5), t(1, 2, 3, 4))
    # Batch and channel dims other than self's: the CPU kernel read them out of bounds (double free).
    with pytest.raises(RuntimeError, match=r"grad_output has shape \[7, 2, 3, 2\], its leading dims must be self's \[1, 2\]"):
        aten._adaptive_avg_pool2d_backward(t(7, 2, 3, 2), t(1, 2, 3, 2))
    with pytest.raises(RuntimeError, match=r"grad_output has shape \[3, 1, 1, 1\], its leading dims must be self's \[2\]"):
        aten._adaptive_avg_pool3d_backward(t(3, 1, 1, 1), t(2, 4, 4, 4))
    with pytest.raises(RuntimeError, match=r"cholesky_solve: A must have at least 2 dimensions, got \[\]"):
        aten._cholesky_solve_helper(t(1, 7), t(), True)
    with pytest.raises(RuntimeError, match=r"unfold_backward: grad has shape \[\], expected \[5\]"):
        aten.unfold_backward(t(), [], -1, 5, 2)
    with pytest.raises(RuntimeError, match=r"unfold_backward: grad has shape \[2, 3\], expected \[3, 2\]"):
        aten.unfold_backward(t(2, 3), [4], 0, 2, 1)
    # The CPU's FFT writes a two-sided spectrum's mirrored half into out= itself, a complex kernel.
    with pytest.raises(NotImplementedError, match=r'"_fft_fill_with_conjugate_symmetry" not implemented for \'Float\''):
        aten._fft_r2c.out(t(4, 4), [0], 0, False, out=t(0))
    # The CPU fallback's own kernel wrote out of bounds on this: refused before it runs.
    with pytest.raises(RuntimeError, match=r"weight norm: g has 1 elements, expected v.size\(0\) = 7"):
        aten._weight_norm_interface.out(t(7, 4, 1), t(), 0, out0=t(0), out1=t(7, 4, 1))
    # Well-formed calls still match the CPU.
    g, x = torch.randn(2, 3, 2, 2), torch.randn(2, 3, 5, 4)
    same_as_cpu(aten._adaptive_avg_pool2d_backward, g, x)
    a = torch.randn(3, 3, dtype=torch.float64)
    l = torch.linalg.cholesky(a @ a.T + 3 * torch.eye(3, dtype=torch.float64))
    same_as_cpu(lambda r, f: aten._cholesky_solve_helper(r, f, False), torch.randn(3, 2, dtype=torch.float64), l)
    same_as_cpu(lambda gi: aten.unfold_backward(gi, [5, 2], 0, 2, 1), torch.randn(4, 2, 2))


def test_complex_foreach_lerp_and_embedding_renorm_take_real_magnitudes():
    # |w| and row norms of complex tensors are real (their abs was typed complex: invalid HLO).
    xs = [torch.tensor([1 + 2j, -3j, 0.5 + 0j]), torch.tensor([2 - 1j, 1 + 1j])]
    es = [torch.tensor([0j, 1 + 1j, -2 + 0.5j]), torch.tensor([1j, -1 + 0j])]
    same_as_cpu(lambda a, b, c, d: torch._foreach_lerp([a, b], [c, d], 0.3), xs[0], xs[1], es[0], es[1])
    same_as_cpu(lambda a, b, c, d: torch._foreach_lerp([a, b], [c, d], 0.7), xs[0], xs[1], es[0], es[1])
    w = torch.tensor([[3 + 4j, 1j], [0.1 + 0j, 0.2j]])
    same_as_cpu(lambda t, i: aten.embedding_renorm(t, i, 1.5, 2.0), w, torch.tensor([0, 1]))


def test_embedding_renorm_wraps_negative_indices_and_renormalizes_a_row_named_twice_like_the_cpu():
    # The CPU takes self[i] per distinct raw index: -2 and 0 name one row of two, renormalized twice.
    w = torch.tensor([[0.559, 2.773], [-2.5, 0.5]])
    same_as_cpu(lambda t, i: aten.embedding_renorm(t, i, -2.395, -1.854), w, torch.tensor([[-2], [0]]))
    same_as_cpu(lambda t, i: aten.embedding_renorm(t, i, 1.0, 2.0), w, torch.tensor([-1, -1, 0]))
    with pytest.raises(IndexError):
        aten.embedding_renorm(w.to("tpu"), torch.tensor([-3], device="tpu"), 1.0, 2.0).cpu()


def test_per_channel_tensors_of_native_batch_norm_are_size_checked():
    x = torch.randn(1, 5, dtype=torch.float64, device="tpu")
    with pytest.raises(RuntimeError, match="weight should contain 5 elements not 1"):
        aten.native_batch_norm(x, torch.tensor(2.0, dtype=torch.float64, device="tpu"), None, None, None, True, 0.9, 0.5)
    # A 0-d weight of a single channel is one value per channel.
    same_as_cpu(lambda a, w: aten.native_batch_norm(a, w, None, None, None, True, 0.9, 1e-5)[0],
                torch.randn(3, 1), torch.tensor(2.0))


def test_pdist_backward_and_cholesky_solve_helper_refuse_mis_shaped_arguments():
    x = torch.randn(2, 1, device="tpu")
    with pytest.raises(RuntimeError, match=r"_pdist_backward: grad has shape \[2, 1\], expected \[1\]"):
        aten._pdist_backward(torch.ones(2, 1, device="tpu"), x, 0.5, torch.ones(1, device="tpu"))
    with pytest.raises(RuntimeError, match=r"A must be batches of square matrices, got \[1, 4\]"):
        aten._cholesky_solve_helper(torch.randn(1, 4, device="tpu"), torch.randn(1, 4, device="tpu"), False)
    a = torch.randn(4, 3, dtype=torch.float64)
    same_as_cpu(lambda g, t, d: aten._pdist_backward(g, t, 1.5, d), torch.randn(6, dtype=torch.float64), a,
                torch.pdist(a, 1.5))


def test_add_relu_keeps_nan_and_hardtanh_nan_bounds_like_the_cpu():
    # _add_relu: the CPU's vectorized loop keeps a NaN sum, its scalar loop gives 0; we keep NaN
    # everywhere (docs/limits.md), and the CPU reference is taken through both loops.
    x = torch.tensor([1.067, -0.0, 1e30, -1.0, nan, -2.828, nan, inf] * 2)
    same_as_cpu(lambda a, b: aten._add_relu(a, b), x, torch.tensor([0.975]), loops="_add_relu")
    tail = torch.tensor([1.067, -0.0, 1e30, -1.0, nan, -2.828, nan, -inf, inf])
    got = aten._add_relu(tail.to("tpu"), torch.tensor([0.975], device="tpu")).cpu()
    torch.testing.assert_close(got, (tail + 0.975).clamp(0, torch.finfo(torch.float32).max), equal_nan=True)
    same_as_cpu(lambda a: aten.hardtanh(a, nan), torch.tensor([[-0.818, 0.5, 2.0]]))
    same_as_cpu(lambda a: aten.hardtanh(a, -0.5, nan), torch.tensor([-0.818, 0.25, nan]))
    same_as_cpu(lambda a: aten.hardtanh(a, -0.5, 0.5), torch.tensor([-0.818, 0.25, nan, inf]))
    # backward: (x <= min || x >= max) ? 0 : grad, so a NaN x or bound passes the gradient.
    g = torch.tensor([-1.215, 3.521, 0.5, -2.0])
    same_as_cpu(lambda gr, a: aten.hardtanh_backward(gr, a, nan, 1.0), g, torch.tensor([inf, 0.73, -5.0, nan]),
                loops="hardtanh_backward")
    same_as_cpu(lambda gr, a: aten.hardtanh_backward(gr, a, -0.385, 0.0), g, torch.tensor([4.4, -0.0, nan, -0.1]),
                loops="hardtanh_backward")


def test_integer_arange_truncates_a_float_step_like_the_cpu():
    same_as_cpu(lambda o: torch.arange(1, 4, 1.904, out=o), torch.empty(0, dtype=torch.int64))
    same_as_cpu(lambda o: torch.arange(-2.7, 5, 2.5, out=o), torch.empty(0, dtype=torch.int32))
    same_as_cpu(lambda o: torch.arange(0.5, 3, 0.75, out=o), torch.empty(0, dtype=torch.float32))


def test_mse_loss_backward_has_selfs_dtype_and_nll_loss_none_reports_zero_total_weight():
    # The CPU writes mse_loss_backward into zeros_like(self); the meta kernel promotes.
    g, x, t = torch.randn(2, 2), torch.randn(2, 2).half(), torch.tensor([[0, -1], [1, 0]])
    same_as_cpu(lambda a, b, c: aten.mse_loss_backward(a, b, c, 1), g, x, t)
    gi, xi = torch.tensor([-3, 2], dtype=torch.int32), torch.tensor([-2, -1], dtype=torch.int32)
    same_as_cpu(lambda a, b, c: aten.mse_loss_backward(a, b, c, 0), gi, xi, torch.tensor([0, 1]))
    # nll_loss_forward of a batch with reduction none: total_weight stays 0 on the CPU.
    x2, target, w = torch.randn(2, 7), torch.tensor([6, 0]), torch.rand(7)
    same_as_cpu(lambda a, b, c: aten.nll_loss_forward(a, b, c, 0, -100), x2, target, w)
    same_as_cpu(lambda a, b, c: aten.nll_loss_forward(a, b, c, 0, -100), x2[0], target[0], w)
    same_as_cpu(lambda a, b, c: aten.nll_loss_forward(a, b, c, 1, -100), x2, target, w)


def test_complex_abs_has_hypots_nan_and_inf_semantics():
    # XLA's complex abs gave |re| * sqrt(2) for a NaN imaginary part and NaN for (nan, inf).
    z = torch.tensor([complex(inf, nan), complex(nan, inf), complex(nan, 1.0), complex(1.0, nan),
                      complex(-inf, 2), complex(nan, nan), complex(3, 4), complex(2, -inf)])
    same_as_cpu(torch.abs, z)
    same_as_cpu(lambda t: torch._foreach_abs([t, t[1:]]), z)
    same_as_cpu(lambda t: torch.linalg.vector_norm(t, 2), z[2:4])
    same_as_cpu(torch.abs, z.to(torch.complex128))


def test_scatter_with_an_empty_index_skips_the_shape_check_like_the_cpu():
    # PyTorch's scatter_shape_check returns early for an empty index, whatever its shape.
    x, src = torch.empty(1, 0, 1, dtype=torch.float64), torch.empty(1, 0, 1, dtype=torch.float64)
    same_as_cpu(lambda a, i, s: torch.scatter_reduce(a, 1, i, s, "mean"), x, torch.empty(1, 0, 2, dtype=torch.int64), src)
    same_as_cpu(lambda a, i, s: torch.scatter_reduce(a, -1, i, s, "prod"), torch.empty(3, 0),
                torch.empty(0, dtype=torch.int64), torch.tensor([[0.115]]))
    same_as_cpu(lambda a, i, s: torch.scatter(a, 0, i, s), torch.zeros(2), torch.empty(0), torch.zeros(2))


def test_weight_norm_of_a_1d_v_and_backward_reading_the_first_norms_like_the_cpu():
    v, g = torch.randn(4), torch.randn(4)
    got = aten._weight_norm_interface(v.to("tpu"), g.to("tpu"))  # runs on the CPU fallback
    for a, b in zip(got, aten._weight_norm_interface(v, g)):
        torch.testing.assert_close(a.cpu(), b)
    # The CPU kernel reads saved_norms as its first v.size(dim) values, whatever its shape.
    gw, sv, sg = torch.randn(1, 7), torch.randn(1, 7), torch.tensor(0.178)
    norms = torch.rand(7, 1).T + 0.5
    same_as_cpu(lambda a, b, c, d: aten._weight_norm_interface_backward(a, b, c, d, 0), gw, sv, sg, norms)


def test_softmax_backward_groups_like_the_cpu_and_computes_0d_inputs():
    # (grad - sum(grad * out)) * out: with an infinite output the distributed form gave NaN.
    g = torch.tensor([[2.4688, -0.1553], [0.7031, 2.625]], dtype=torch.bfloat16)
    y = torch.tensor([[2.3906, nan], [inf, -1.875]], dtype=torch.bfloat16)
    same_as_cpu(lambda a, b: aten._softmax_backward_data(a, b, -2, torch.bfloat16), g, y)
    # A 0-d softmax backward is not zero: it is the same formula over one element.
    a0, b0 = torch.tensor(-1.309, dtype=torch.bfloat16), torch.tensor(1.102, dtype=torch.bfloat16)
    same_as_cpu(lambda a, b: aten._softmax_backward_data(a, b, -1, torch.bfloat16), a0, b0)
    same_as_cpu(lambda a, b: aten._log_softmax_backward_data(a, b, 0, torch.float32), a0.float(), b0.float())


def test_cumprod_with_dtype_converts_the_input_first_and_padding_backward_checks_shapes():
    # int64 1099511627776 is inf in float16, and 0 * inf is NaN, as on the CPU.
    same_as_cpu(lambda t: torch.cumprod(t, 0, dtype=torch.float16), torch.tensor([0, -5, 2, 1099511627776, 5]))
    same_as_cpu(lambda t: torch.cumsum(t, 0, dtype=torch.float16), torch.tensor([1, 70000, -70000, 3]))
    g = torch.randn(2, 2, device="tpu")
    with pytest.raises(RuntimeError, match=r"grad_output has shape \[2, 2\], expected \[1, 2\]"):
        aten.reflection_pad1d_backward(g, torch.randn(1, 2, device="tpu"), [0, 0])
    with pytest.raises(RuntimeError, match=r"expects a 2-D or 3-D input, got \[5, 7, 1, 2\]"):
        aten.reflection_pad1d_backward(torch.randn(5, 7, 1, 2, device="tpu"), torch.randn(5, 7, 1, 2, device="tpu"), [0, 0])
    same_as_cpu(lambda a, b: aten.reflection_pad1d_backward(a, b, [1, 2]), torch.randn(2, 3, 7), torch.randn(2, 3, 4))


@pytest.mark.parametrize("op", [torch.asin, torch.acos, torch.asinh, torch.acosh])
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_inverse_functions_take_the_side_of_the_branch_cut_a_signed_zero_picks(op, dtype):
    # XLA ignored the sign of a zero part on the cuts: asin(2.5-0j) came out as 1.57+1.57j.
    z = torch.tensor([complex(a, b) for a in (2.5, -2.5, 0.5, 0.0, -0.0) for b in (0.0, -0.0)] +
                     [complex(r, s) for r in (0.0, -0.0) for s in (2.5, -2.5)] +
                     [complex(1.3, -0.7), complex(-3, 4), complex(inf, -0.0), complex(5.057, -0.0)], dtype=dtype)
    same_as_cpu(op, z)
    same_as_cpu(lambda t: op(t.conj()), z)


def test_complex_foreach_add_of_a_scalar_multiplies_it_by_alpha_like_the_cpu():
    # other * alpha with alpha = 1 is a complex multiply: -inf + 0i becomes -inf + NaN i.
    z = torch.tensor([complex(-1.0, -2.0), complex(inf, 1), complex(0.5, -0.0)])
    same_as_cpu(lambda t: torch._foreach_add([t, t[:2]], [-inf, 2.5]), z)
    same_as_cpu(lambda t: torch._foreach_add([t], -inf), z)
    same_as_cpu(lambda t: torch._foreach_sub([t], inf), z)
    same_as_cpu(lambda t: torch._foreach_add([t], 1.5), z)


def test_indices_that_broadcast_to_nothing_are_not_range_checked_like_the_cpu():
    x = torch.empty(1, 0)
    idx = [torch.empty(1, 0, dtype=torch.int64), torch.tensor([0])]
    same_as_cpu(lambda t, i, j: t.index_put_([i, j], torch.tensor(0.14)), x, *idx)
    same_as_cpu(lambda t, i, j: t[i, j], x, *idx)
    with pytest.raises(IndexError):
        torch.zeros(2, 3, device="tpu")[torch.tensor([5], device="tpu"), torch.tensor([0], device="tpu")].cpu()


@pytest.mark.parametrize("op,state_lists,kwargs", [
    ("_fused_sgd", 1, dict(weight_decay=0.1, momentum=0.5, lr=0.1, dampening=0.2, nesterov=True,
                           maximize=False, is_first_step=False)),
    ("_fused_adamw", 3, dict(lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.1, eps=1e-8, amsgrad=True,
                             maximize=False)),
    ("_fused_adagrad", 1, dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, eps=1e-8, maximize=False)),
])
def test_fused_optimizer_out_and_functional_overloads_leave_their_inputs_alone(op, state_lists, kwargs):
    # The out= overload writes only `out` (its schema marks grads and state written, but the CPU's
    # kernel updates copies); the functional one returns new lists. Both once gave the grads the
    # new parameters (results routed to the written arguments in schema order) or ran on the CPU.
    torch.manual_seed(0)
    params, grads = [torch.randn(3, 2), torch.randn(5)], [torch.randn(3, 2), torch.randn(5)]
    states = [[torch.rand(3, 2), torch.rand(5)] for _ in range(state_lists)]
    steps = [[torch.tensor(3.0), torch.tensor(3.0)]] if op != "_fused_sgd" else []
    scale = torch.tensor(1.5)
    fn = getattr(aten, op)

    def run(dev, overload):
        ts = [[t.to(dev) for t in l] for l in [params, grads, *states, *steps]]
        outs = [torch.zeros_like(t) for t in ts[0]]
        if overload == "out":
            fn.out(*ts, **kwargs, grad_scale=scale.to(dev), out=outs)
            return ts, outs
        return ts, fn(*ts, **kwargs, grad_scale=scale.to(dev))

    before = fallbacks()
    for overload in ("out", "functional"):
        (want_in, want_out), (got_in, got_out) = run("cpu", overload), run("tpu", overload)
        for w, g in zip(want_in, got_in):
            torch.testing.assert_close([t.cpu() for t in g], w)
        for w, g in zip(want_out if overload == "functional" else [want_out], got_out if overload == "functional" else [got_out]):
            torch.testing.assert_close([t.cpu() for t in g], w)
    assert fallbacks() == before, fallbacks()


def test_integer_mse_loss_backward_truncates_the_mean_factor_like_the_cpu():
    # int64 operands: the CPU computes in int64 with 2/n truncated (0 for n = 4), then converts
    # to the float out=; we once computed 2/n * (x - y) * g in float.
    g = torch.arange(-8, 8).reshape(4, 4)
    x, y = torch.tensor([[3], [-1], [0], [5]]), torch.tensor([[1, -2, 4, 0]])
    for reduction in (0, 1, 2):
        same_as_cpu(lambda g, x, y: aten.mse_loss_backward.grad_input(g, x, y, reduction,
                                                                      grad_input=torch.empty(0, device=g.device)), g, x, y)
    same_as_cpu(lambda g, x, y: aten.mse_loss_backward(g, x, y, 1), g[:1, :1], x[:1], y[:, :1])


@pytest.mark.parametrize("scale", [None, 1.719, -math.inf])
def test_linear_upsampling_to_the_same_size_copies_whatever_the_scale(scale):
    # The CPU copies when output and input sizes agree (taps (o, o), weights (1, 0)), ignoring
    # scales_h; an inf becomes 1 * inf + 0 * inf = NaN there and nowhere else.
    x = torch.tensor([[1., 2., 3.], [inf, 5., nan], [7., 8., -inf]], dtype=torch.float64)[None, None]
    same_as_cpu(lambda x: aten.upsample_bilinear2d(x, [3, 3], False, scale, scale), x)
    same_as_cpu(lambda x: aten.upsample_bilinear2d(x, [3, 5], False, scale, None), x)
    same_as_cpu(lambda x: aten.upsample_linear1d(x[0], [3], True, scale), x)
    g = torch.randn(1, 1, 3, 3, dtype=torch.float64)
    same_as_cpu(lambda g: aten.upsample_bilinear2d_backward(g, [3, 3], [1, 1, 3, 3], False, scale, scale), g)


def test_foreach_of_mixed_dtypes_computes_each_element_in_its_promoted_type():
    # bfloat16 self, float16 tensor1, float64 tensor2: the CPU's per-tensor path divides in
    # float64 and rounds into self once (-6.7387 -> -6.75); rounding the operands to bfloat16
    # first gave -6.71875.
    self = torch.tensor([-1.6796875, 0.5], dtype=torch.bfloat16)
    t1, t2 = torch.tensor([1.896, -0.3], dtype=torch.float16), torch.tensor([0.3751, 3.0], dtype=torch.float64)

    def f(a, b, c):
        xs = [a.clone()]
        aten._foreach_addcdiv_.ScalarList(xs, [b], [c], [-1])
        return xs[0]
    same_as_cpu(f, self, t1, t2)
    same_as_cpu(lambda a, b: torch._foreach_add([a], [b])[0], self, t2)


def test_foreach_addcmul_multiplies_the_value_into_tensor1_first():
    # value * tensor1 * tensor2 as on the CPU: (2-2.078j) * (-2.411-inf j) then * 1.899 gave NaN.
    x = torch.zeros(2, dtype=torch.complex64)
    t1 = torch.tensor([2 - 2.078j, 0.926 + 0.214j], dtype=torch.complex64)
    t2 = torch.tensor([complex(-2.411, -inf), complex(-inf, -2.444)], dtype=torch.complex64)
    same_as_cpu(lambda a, b, c: torch._foreach_addcmul([a], [b], [c], [1.899])[0], x, t1, t2)
    same_as_cpu(lambda a, b, c: torch._foreach_addcdiv([a], [b], [c], 0.5)[0], x, t1, t1 + 1)


def test_masked_softmax_of_a_non_contiguous_input_follows_its_strides():
    # PyTorch's CPU kernel reads such an input in memory order (docs/limits.md); the reference is
    # the CPU's answer for the same values made contiguous.
    x = torch.randn(4, 6, dtype=torch.float64).t()
    m = torch.rand(6, 4) > 0.6
    got = aten._masked_softmax(x.to("tpu"), m.to("tpu"), -1).cpu()
    torch.testing.assert_close(got, aten._masked_softmax(x.contiguous(), m, -1), equal_nan=True)


def test_fft_out_of_a_real_dtype_keeps_the_real_parts_like_the_cpu():
    # PyTorch's meta kernel refuses the cast (so this ran on the CPU fallback, or raised); the CPU
    # kernel computes in the transform's type and copies into out=.
    x = torch.tensor([[-1e-30, -1.336], [2.53, -0.385], [1.029, 2.879], [0.963, 2.0]])
    same_as_cpu(lambda v: aten._fft_r2c.out(v, [1], 4, True, out=torch.empty(0, device=v.device)), x)
    same_as_cpu(lambda v: aten._fft_r2c.out(v, [0, 1], 0, False, out=torch.empty(4, 2, device=v.device)), x)
    z = torch.randn(2, 4, 3, dtype=torch.complex64).conj()
    same_as_cpu(lambda v: aten._fft_c2c.out(v, [0, 1, 2], 2, False, out=torch.empty(0, dtype=torch.float16, device=v.device)), z)
    # Transforms of complex64 computed in float32 and copied into a 64-bit out: compared at the
    # float32 tolerance (the CPU's FFT rounds differently per vector ISA, by an ulp).
    for f in (lambda v: aten._fft_c2c.out(v, [1], 0, True, out=torch.empty(0, dtype=torch.complex128, device=v.device)),
              lambda v: aten._fft_c2r.out(v, [1], 0, 6, out=torch.empty(0, dtype=torch.float64, device=v.device))):
        got, want = f(z.to("tpu")), f(z)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.cpu(), want, rtol=1.3e-6, atol=1e-5)


def test_weight_norm_of_an_empty_1d_v_returns_empty_results():
    # A 1-D v runs on the CPU kernel, which divides by v.size(0): SIGFPE for an empty one (the
    # CPU itself dies on this call, so the expected values are written out).
    e = torch.zeros(0, device="tpu")
    w, norms = aten._weight_norm_interface(e, e, 0)
    assert w.shape == (0,) and norms.shape == (1,)
    gv, gg = aten._weight_norm_interface_backward(e, e, e, e, 0)
    assert gv.shape == (0,) and gg.shape == (0,)


def test_fft_of_half_precision_raises_the_cpu_error_instead_of_reaching_its_kernel():
    # The CPU fallback's kernel segfaulted on an expanded bfloat16 input (fuzz seed 1, 1213).
    x = torch.tensor([1.0], dtype=torch.bfloat16, device="tpu").expand(4, 7)
    with pytest.raises(RuntimeError, match="MKL FFT doesn't support tensors of type: BFloat16"):
        aten._fft_r2c(x, [-2], -1, True)


def test_weight_norm_fallback_refuses_an_empty_v():
    # The CPU kernel divides by zero (SIGFPE) on an empty v: we refuse it. An out0 of a dtype the
    # CPU refuses gets the CPU's own dtype error first, before any kernel runs (cpu_dtype_checks).
    e = torch.zeros(0, 4, device="tpu")
    for dtype, error in [(torch.float32, r"weight norm: v of shape \[0, 4\] has no elements"),
                         (torch.bfloat16, r"Expected out tensor to have dtype float, but got c10::BFloat16")]:
        with pytest.raises(RuntimeError, match=error):
            aten._weight_norm_interface.out(e, e, 0, out0=torch.empty(0, 4, dtype=dtype, device="tpu"),
                                            out1=torch.empty(0, device="tpu"))


def _half_add_like_the_cpus_vector_loop(x, other, alpha, sign=1.0, reverse=False):
    """x + sign * alpha * other (reverse: other - alpha * x) as PyTorch's AVX2/AVX-512 vector loop
    computes it: alpha and a Python-number `other` rounded to x's dtype, the rest in float32,
    rounded once. Its scalar loop, and every loop of the generic `default` build, round
    alpha * other first (docs/limits.md): this reference is the same on every host."""
    a = torch.tensor(alpha, dtype=x.dtype).float()
    o = (other if isinstance(other, torch.Tensor) else torch.tensor(other, dtype=x.dtype)).float()
    return ((o - a * x.float()) if reverse else (x.float() + sign * a * o)).to(x.dtype)


def test_half_precision_add_sub_rsub_with_alpha_and_numbers_match_the_cpus_vectorized_path():
    # alpha is rounded to bfloat16 (1.088 -> 1.0859375), alpha * other is not, and a Python
    # number is rounded to bfloat16 (2.47 -> 2.46875) before the sum.
    torch.manual_seed(0)
    for dtype in (torch.bfloat16, torch.float16):
        a, b = (torch.randn(2048) * 3).to(dtype), (torch.randn(2048) * 3).to(dtype)
        d, e = a.to("tpu"), b.to("tpu")
        m = torch.tensor(-2.5, dtype=dtype)
        calls = [
            (torch.add(d, e, alpha=1.088), _half_add_like_the_cpus_vector_loop(a, b, 1.088)),
            (torch.sub(d, e, alpha=-1.395), _half_add_like_the_cpus_vector_loop(a, b, -1.395, -1.0)),
            (torch.rsub(d, e, alpha=-1.395), _half_add_like_the_cpus_vector_loop(a, b, -1.395, reverse=True)),
            (torch.sub(d, m.to("tpu"), alpha=-0.757), _half_add_like_the_cpus_vector_loop(a, m, -0.757, -1.0)),
            (torch.add(d, 2.47, alpha=1.088), _half_add_like_the_cpus_vector_loop(a, 2.47, 1.088)),
            (d - 0.333, _half_add_like_the_cpus_vector_loop(a, 0.333, 1.0, -1.0)),
            (0.333 - d, _half_add_like_the_cpus_vector_loop(a, 0.333, 1.0, reverse=True)),
        ]
        for got, want in calls:
            assert got.dtype == dtype
            torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
        same_as_cpu(lambda p: p - 0.333, a)  # no alpha: every CPU loop agrees
        same_as_cpu(lambda p: 0.333 - p, a)


def test_integer_pow_uses_every_bit_of_the_exponent():
    # XLA's integer power read the exponent's low 32 bits: 0 ** 2**40 was 1 (fuzz seed 1, 473).
    e = torch.tensor([-4, 0, 5, -1, 1099511627776, -4611686018427387904, 63, 64, 3])
    for base in (0, 1, -1, 2, 3, -3, 7):
        same_as_cpu(lambda t: torch.pow(base, t), e)
    same_as_cpu(lambda t: torch._foreach_pow(False, [t])[0], e)
    same_as_cpu(torch.pow, torch.arange(-5, 5), torch.arange(60, 70))
    same_as_cpu(torch.pow, torch.arange(250, 256, dtype=torch.uint8), torch.arange(6, dtype=torch.uint8) + 14)


def test_foreach_lerp_keeps_a_number_weight_unrounded_like_torch_lerp():
    # The weight -3.846 was rounded to bfloat16 (-3.84375) first: 0 -> 3 gave -11.5, not -11.5625.
    torch.manual_seed(0)
    x, e = (torch.randn(500) * 3).bfloat16(), (torch.randn(500) * 3).bfloat16()
    for w in (-3.846, 0.3, 1.098):
        same_as_cpu(lambda a, b: torch._foreach_lerp([a], [b], w)[0], x, e)
    same_as_cpu(lambda a, b: torch._foreach_lerp([a], [b], [1.098])[0], x, e)


def test_threshold_softplus_backward_and_zero_alpha_products_follow_the_cpu():
    # threshold computes in self's type: an int64 self with value -1.549 gives -1, also into a
    # bfloat16 out= (we gave -1.546875).
    x = torch.tensor([[-3, 0, 2], [5, -1, 0]])
    same_as_cpu(lambda v: torch.ops.aten.threshold.out(v, -0.0, -1.549, out=torch.empty(0, dtype=torch.bfloat16, device=v.device)), x)
    same_as_cpu(lambda v: torch.threshold(v, 0.1, 2.5), torch.tensor([0.1000976, 0.05, 0.2], dtype=torch.bfloat16))
    # softplus_backward is g * z / (z + 1) with z = exp(beta * x): inf / inf is NaN on the CPU.
    same_as_cpu(lambda g, v: aten.softplus_backward(g, v, -2.877, nan), torch.ones(4), torch.tensor([-400.0, -1.0, 0.0, 3.0]))
    # With alpha == 0 the CPU's BLAS (float32/float64 addmm, addmv) does not read the product;
    # bfloat16 addmm and baddbmm (its own kernels) multiply, so an inf gives NaN there.
    m = torch.tensor([[inf, 1.0], [1.0, 1.0]])
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        s, mm, v = torch.ones(2, 2, dtype=dtype), m.to(dtype), torch.ones(2, dtype=dtype)
        same_as_cpu(lambda a, b: torch.addmm(a, b, b, beta=2, alpha=0), s, mm)
        same_as_cpu(lambda a, b, c: torch.addmv(a, b, c, beta=2, alpha=0), v, mm, v)
        same_as_cpu(lambda a, b: torch.baddbmm(a[None], b[None], b[None], beta=2, alpha=0), s, mm)


def test_batch_norm_invstd_var_correction_and_one_element_norms_follow_the_cpu():
    # One value per channel with eps = 0: the CPU's InvStd is 0 (we gave inf, so NaN outputs).
    x = torch.tensor([[1.0], [1.0]]).T
    same_as_cpu(lambda v, w, bb: aten.native_batch_norm(v, w, bb, None, None, True, 0.1, 0.0), x, torch.tensor([2.0, 1.0]),
                torch.tensor([2.414, 0.5]))
    # A NaN correction divides by max(0, N - c) = 0 on the CPU: inf, not NaN.
    same_as_cpu(lambda v: torch.std_mean(v, correction=nan), torch.tensor([[-2.5], [2.0], [2.85], [2.827]]))
    # Norms over one element are |x| for every ord but 0 (NaN ord, overflowing x ** ord).
    for p in (0, 2, 3.5, nan, 40.0):
        same_as_cpu(lambda v: torch.linalg.vector_norm(v, p, [0]), torch.tensor([[3.716, -2.0], [1e30, 0.0]])[:1])
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)"):
        aten.native_batch_norm(torch.ones(3, device="tpu"), None, None, torch.zeros(3, device="tpu"),
                               torch.ones(3, device="tpu"), False, 0.1, 0.0)


def test_embedding_backward_fallback_checks_indices_before_the_cpu_kernel_counts_them():
    # An out= of another dtype takes the CPU fallback; with scale_grad_by_freq its kernel counted
    # index 6 in a 1-long buffer (heap corruption, a malloc abort cases later: fuzz seed 1, 15966).
    # An out= of a dtype the CPU refuses gets the CPU's dtype error before any kernel runs.
    grad = torch.ones(7, 7, dtype=torch.int32, device="tpu")
    idx = torch.tensor([2, 1, 5, 4, 6, 5, 0], device="tpu")
    with pytest.raises(IndexError, match="index 6 is out of range for num_weights 1"):
        aten.embedding_dense_backward.out(grad, idx, 1, 4, True, out=torch.empty(0, dtype=torch.int64, device="tpu"))
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype int, but got c10::Half"):
        aten.embedding_dense_backward.out(grad, idx, 1, 4, True, out=torch.empty(0, dtype=torch.float16, device="tpu"))


def test_ops_that_lacked_a_meta_kernel_run_on_the_tpu():
    # Fuzz seed 2: these had rules but no Meta kernel, so every call ran on the CPU.
    x = torch.randn(3, 4, 5)
    x[0, 0, 0], x[1, 2, 3] = nan, -inf
    same_as_cpu(lambda t: torch.logcumsumexp(t, -1), x)
    same_as_cpu(lambda t: aten._logcumsumexp.out(t, 1, out=torch.empty(0, device=t.device)), x)
    same_as_cpu(lambda t: aten._add_relu.Scalar(t, -0.5, alpha=2), x)
    same_as_cpu(lambda t: aten._add_relu.out(t, t.flip(0), out=torch.empty(3, 4, 5, device=t.device)), x)
    grad, y = torch.randn(2, 3, 2, 2, 2), torch.randn(2, 3, 4, 5, 3)
    same_as_cpu(lambda g, t: aten.adaptive_avg_pool3d_backward.grad_input(g, t, grad_input=torch.empty_like(t)),
                grad, y)


def test_batch_norm_out_overloads_run_on_the_tpu_and_update_running_stats():
    x = torch.randn(3, 4, 5)
    w, b = torch.rand(4) + 0.5, torch.randn(4)

    def legit_out(t, w, b):
        dev = t.device
        rm, rv = torch.full((4,), 0.5, device=dev), torch.full((4,), 2.0, device=dev)
        outs = (torch.empty(3, 4, 5, device=dev), torch.empty(4, device=dev), torch.empty(4, device=dev))
        aten._native_batch_norm_legit.out(t, w, b, rm, rv, True, 0.1, 1e-5, out=outs[0], save_mean=outs[1],
                                          save_invstd=outs[2])
        return (*outs, rm, rv)

    def no_stats_out(t, w, b):
        dev = t.device
        outs = (torch.empty(0, device=dev), torch.empty(0, device=dev), torch.empty(0, device=dev))
        aten._native_batch_norm_legit.no_stats_out(t, w, b, True, 0.1, 1e-5, out=outs[0], save_mean=outs[1],
                                                   save_invstd=outs[2])
        return outs

    same_as_cpu(legit_out, x, w, b)
    same_as_cpu(no_stats_out, x, w, b)


def test_batch_norm_without_running_stats_in_eval_mode_raises():
    # The CPU kernel reads the missing running statistics (a segfault, or garbage); before the
    # Meta kernel existed, the out= form fell back to it and crashed the process.
    x = torch.randn(3, 4, 5, device="tpu")
    with pytest.raises(Exception, match="running_mean and running_var must not be None in eval mode"):
        aten._native_batch_norm_legit.no_stats(x, None, None, False, 0.1, 1e-5)
    with pytest.raises(Exception, match="running_mean and running_var must not be None in eval mode"):
        aten._native_batch_norm_legit.no_stats_out(x, torch.ones(7, device="tpu"), None, False, 0.1, 0.5,
                                                   out=torch.empty(3, 4, 5, device="tpu"),
                                                   save_mean=torch.empty(0, device="tpu"),
                                                   save_invstd=torch.empty(0, device="tpu"))


def test_cummax_helper_checks_its_output_dtypes_like_the_cpu():
    # A complex (conjugate) values view the CPU rejects reached PyTorch's conjugate fallback,
    # which broke (an internal assert, then a crash in the garbage collector) on this op
    # returning nothing.
    import gc

    values = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64, device="tpu").conj()
    for self, indices in ((torch.tensor([1, 3], dtype=torch.uint8), torch.empty(2, dtype=torch.long)),
                          (torch.tensor([1.0, 3.0]), torch.empty(2, dtype=torch.long))):
        with pytest.raises(RuntimeError, match="expected scalar type (Byte|Float) but found ComplexFloat"):
            aten._cummax_helper(self.to("tpu"), values, indices.to("tpu"), 0)
        gc.collect()
    with pytest.raises(RuntimeError, match="expected scalar type Long but found Int"):
        aten._cummin_helper(torch.ones(3, device="tpu"), torch.empty(3, device="tpu"),
                            torch.empty(3, dtype=torch.int32, device="tpu"), 0)


def test_complex_sqrt_of_infinities_follows_c99():
    # Fuzz seed 2 (_foreach_sqrt_): XLA's formula gave NaN for these; the CPU's std::sqrt follows C99.
    vals = [complex(-inf, nan), complex(inf, nan), complex(nan, inf), complex(1.0, inf), complex(nan, -inf),
            complex(-inf, -inf), complex(-inf, 2.5), complex(inf, -1.0), complex(nan, -2.5), complex(-4.0, -0.0),
            complex(3.0, 4.0)]
    for dtype in (torch.complex64, torch.complex128):
        x = torch.tensor(vals, dtype=dtype)
        same_as_cpu(torch.sqrt, x)
        same_as_cpu(lambda t: torch._foreach_sqrt([t, t.flip(0)]), x)


def test_lu_of_a_rank_one_matrix_finds_the_exact_zero_pivot_like_lapack():
    # Fuzz seed 2: XLA:CPU fused the elimination's product and subtraction into one FMA, leaving a
    # 5.9e-10 residue where LAPACK's pivot is exactly 0, so `info` said 0 instead of 2. LAPACK
    # answers both ways by host: on an AVX-512 host (Xeon, MKL's kernels) its elimination fuses
    # too and leaves the residue with info 0. Ours is the unfused elimination on every host.
    a = torch.tensor([0.024, -3.966]).reshape(2, 1)
    for cols in (7, 2):
        lu, pivots, info = torch.linalg.lu_factor_ex(a.expand(2, cols).to("tpu"))
        ref_lu, ref_pivots, ref_info = torch.linalg.lu_factor_ex(a.expand(2, cols))
        assert info.item() == 2 and lu[1, 1].item() == 0
        assert ref_info.item() == 2 or abs(ref_lu[1, 1].item()) < 1e-8  # the CPU's residue, if any
        torch.testing.assert_close(lu.cpu(), ref_lu, atol=1e-8, rtol=1.3e-6)
        assert torch.equal(pivots.cpu(), ref_pivots)
    with pytest.raises(Exception, match="The diagonal element 2 is zero"):
        torch.linalg.inv(a.expand(2, 2).to("tpu"))


def test_foreach_inf_norms_of_a_tensor_holding_nan_are_nan():
    x = torch.tensor([[0.5, inf, 0.0, nan], [1.0, 2.0, -3.0, 0.25]])
    for order in (inf, -inf, 0, 1, 2, 3.5):
        same_as_cpu(lambda a, b: torch._foreach_norm([a, b], order), x, x[1].clone())


def test_native_dropout_backward_broadcasts_grad_and_mask_against_each_other():
    mask = torch.tensor([True, False]).expand(4, 2)
    same_as_cpu(lambda g, m: aten.native_dropout_backward(g, m, 1.5), torch.randn(3, 4, 1), mask)
    same_as_cpu(lambda g, m: aten.native_dropout_backward(g, m, -1.25), torch.randn(0, 3, 4, 1, dtype=torch.complex64),
                mask)


def test_ldexp_of_0d_integer_and_half_tensors_has_the_cpus_dtype():
    # PyTorch's meta path said float32; the CPU gives bfloat16 (values: docs/limits.md, opmath).
    got = torch.ldexp(torch.tensor(-3, device="tpu"), torch.tensor(0.204, dtype=torch.bfloat16, device="tpu"))
    assert got.dtype == torch.bfloat16 and got.shape == ()
    same_as_cpu(torch.ldexp, torch.tensor([1.5, -2.0], dtype=torch.bfloat16), torch.tensor(3))


def test_fused_optimizer_with_an_empty_grad_scale_and_empty_parameters_is_a_no_op():
    # The CPU kernels read grad_scale per element; with no elements they never do.
    def step(p, g, s, st, scale):
        aten._fused_adagrad_([p], [g], [s], [st], lr=0.001, lr_decay=0.1, weight_decay=0.9, eps=0.5,
                             maximize=False, grad_scale=scale)
        return p, s
    same_as_cpu(step, torch.empty(0, 5), torch.empty(0, 5), torch.empty(0, 5), torch.tensor(5.0), torch.empty(0, 5))


def test_max_pool2d_picks_the_last_nan_of_a_window_like_the_cpu():
    x = torch.tensor([[-2.98, nan, 1.0, 0.5], [nan, inf, nan, -nan]]).reshape(1, 1, 2, 4)
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        same_as_cpu(lambda t: aten.max_pool2d_with_indices(t, [2, 2], [2, 2]), x.to(dtype))


def test_variance_over_no_elements_is_nan_whatever_the_correction():
    for correction in (-2.795, -1, 0, 1):
        same_as_cpu(lambda t: aten.var.correction(t, None, correction=correction), torch.empty(0, dtype=torch.bfloat16))
        same_as_cpu(lambda t: aten.std_mean.correction(t, None, correction=correction, keepdim=True), torch.empty(0, 5))


def test_fused_optimizer_tensor_lr_of_one_element_and_any_rank():
    def step(p, g, s, lr):
        aten._fused_adagrad_.tensor_lr([p], [g], [s], [torch.tensor(5.0, device=p.device)], lr=lr, lr_decay=0.5,
                                       weight_decay=0.5, eps=0.001, maximize=False)
        return p, s
    same_as_cpu(step, torch.randn(2, 5, 1), torch.randn(2, 5, 1), torch.rand(2, 5, 1), torch.tensor([-0.898]))
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to Scalar"):
        step(*(t.to("tpu") for t in (torch.randn(3), torch.randn(3), torch.rand(3), torch.tensor([0.1, 0.2]))))


def test_linspace_with_a_complex_end_keeps_its_imaginary_part():
    for start, end, steps, dtype in [(-1, complex(0.5, -1.5), 2, torch.complex64),
                                     (complex(1, 2), complex(0.5, -1.5), 5, torch.complex128),
                                     (-1, 3, 6, torch.complex64)]:
        same_as_cpu(lambda o: torch.linspace(start, end, steps, out=o), torch.empty(0, dtype=dtype))


def test_cholesky_solve_helper_with_mismatched_sizes_raises_cholesky_solves_error():
    # The helper's CPU kernel returns b unchanged; we emitted a module the plugin rejected.
    b, factor = torch.randn(5, 1, device="tpu"), torch.tensor([[-0.561]], device="tpu")
    with pytest.raises(RuntimeError, match="each A matrix is 1 by 1 but each b matrix is 5 by 1"):
        aten._cholesky_solve_helper(b, factor, True)


def test_complex_ldexp_scales_each_part_so_overflow_stays_infinite():
    # Fuzz seed 3: 2^e as a complex number has a NaN part once it overflows.
    x = torch.tensor([complex(-0.108, 0.938), complex(3.0, -3.52), complex(0.0, 1.0)], dtype=torch.complex64)
    for e in (torch.tensor(3), torch.tensor([1.5, -2.0, 200.0]), torch.tensor(1099511627776)):
        same_as_cpu(torch.ldexp, x, e)


def test_embedding_bag_dense_backward_with_a_0d_bag_size_raises_instead_of_crashing():
    # Fuzz seed 3: the rule sliced a 0-d bag_size as 1-D, which read past its shape (a segfault).
    grad, indices = torch.randn(2, 7), torch.tensor([3, 5, 1, 2])
    with pytest.raises(RuntimeError, match="bag_size must be 1-D"):
        aten._embedding_bag_dense_backward(grad.to("tpu"), indices.to("tpu"), torch.zeros(4, dtype=torch.long, device="tpu"),
                                           torch.tensor(2, device="tpu"), torch.zeros(2, 7, dtype=torch.long, device="tpu"),
                                           9, False, 0, None, -1)


def test_logsumexp_into_a_complex_out_and_amin_of_empty_complex():
    x = torch.randn(5, 7, 1)
    x[0, 0, 0] = inf
    same_as_cpu(lambda t: torch.logsumexp(t, [-1], True, out=torch.empty(0, dtype=torch.complex64, device=t.device)), x)
    same_as_cpu(lambda t: torch.amin(t, [2]), torch.empty(7, 0, dtype=torch.complex64).unfold(0, 7, 2))
    with pytest.raises(NotImplementedError, match="min_values_cpu"):
        torch.amin(torch.randn(3, dtype=torch.complex64, device="tpu"), 0)


def test_lu_of_a_matrix_without_columns_has_an_identity_permutation():
    # Fuzz seed 3: P of an m x 0 matrix was all zeros.
    for shape in ((1, 0), (3, 0), (2, 3, 0), (0, 2)):
        same_as_cpu(torch.linalg.lu, torch.empty(shape, dtype=torch.float64))
