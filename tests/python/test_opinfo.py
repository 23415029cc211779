"""Device-vs-CPU tests driven by PyTorch's OpInfo database, for every OpInfo (variants included)
whose ATen op is in our registration table: float32, bfloat16, complex64 (OpInfo's complex
samples have non-zero imaginary parts) and the integer/bool dtypes the op supports.

Integer and bool results must be exact; float results within PyTorch's default tolerances per
dtype (torch.testing.assert_close) unless TOLERANCES says why not. Every case must run without a
CPU fallback, except the documented FALLBACKS. Random ops are excluded here (their values differ
from CPU by design; tests/python/test_ops_random.py checks their statistics and determinism).
"""
import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

import torch_tpu

DTYPES = [torch.float32, torch.bfloat16, torch.complex64, torch.int64, torch.int32, torch.uint8, torch.bool]
# Documented exceptions to PyTorch's default tolerances, by OpInfo name ("name.variant").
TOLERANCES = {
    # The CPU rounds beta*self and alpha*(a@b) to bf16 separately; we add in float32 and round
    # once. Where the two terms cancel, one bf16 ulp of a term (|term| ~ 8: 0.03) is the
    # difference (2 of 250 elements).
    "baddbmm": {torch.bfloat16: dict(rtol=2 ** -7, atol=0.05),
                # complex products accumulate in another order than MKL's (a few float32 ulps)
                torch.complex64: dict(rtol=1e-5, atol=5e-5)},
    # XLA's complex power (exp(y log x)) and the CPU's vectorized one differ by a few ulps.
    "pow": {torch.complex64: dict(rtol=1e-5, atol=1e-5)},
}
# Ops whose extra outputs follow PyTorch's meta kernel (as on CUDA), where the CPU returns empty
# tensors: native_batch_norm's save_mean/save_invstd in eval mode (docs/limits.md).
EMPTY_ON_CPU_OUTPUTS = {"native_batch_norm", "_native_batch_norm_legit"}
# OpInfos whose samples still reach the CPU fallback on tpu, for which dtypes, and why
# (docs/limits.md). Every other case asserts zero fallbacks.
C64 = {torch.complex64}
FALLBACKS = {
    "atan": (C64, "complex atan is not lowered (the real rule's half-angle form needs atan2)"),
    "logsumexp": (C64, "complex logsumexp is not lowered"),
    "masked.logsumexp": (C64, "complex logsumexp is not lowered"),
    "linalg.solve_triangular": (C64, "complex triangular solves are not lowered"),
    "scatter_reduce.mean": ({torch.int64, torch.int32, torch.uint8}, "integer scatter_reduce mean (floor division of sums) is not lowered"),
    "logcumsumexp": (C64, "complex logcumsumexp is not lowered"),
    "norm.nuc": (None, "the nuclear norm needs an SVD (_linalg_svd), which is not lowered"),
    "linalg.lu_factor_ex": (C64, "LU-based linear algebra is lowered for real dtypes only"),
    "linalg.lu": (C64, "LU-based linear algebra is lowered for real dtypes only"),
    "linalg.lu_solve": (C64, "LU-based linear algebra is lowered for real dtypes only"),
    "linalg.inv_ex": (C64, "LU-based linear algebra is lowered for real dtypes only"),
    "geqrf": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "linalg.qr": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "linalg.householder_product": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "ormqr": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "linalg.lstsq": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "linalg.lstsq.grad_oriented": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "qr": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "pinverse": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "norm.nuc": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "linalg.cond": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "linalg.eigvalsh": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "linalg.matrix_norm": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "linalg.matrix_rank": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "linalg.matrix_rank.hermitian": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "linalg.pinv": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "linalg.pinv.singular": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "linalg.pinv.hermitian": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "linalg.svdvals": (C64, "QR/SVD/eigh/lstsq are lowered for float32/float64 only"),
    "cholesky_inverse": (C64, "Cholesky is lowered for float32/float64 only"),
    "linalg.cholesky_ex": (C64, "Cholesky is lowered for float32/float64 only"),
    "_upsample_bilinear2d_aa": ({torch.uint8}, "the CPU's uint8 antialiased resize is not lowered (float only)"),
    "nn.functional.interpolate": ({torch.uint8}, "interpolating (bilinear/bicubic) resizes of uint8 are not lowered"),
}
MAX_SAMPLES = 8
# Ops whose result dtypes follow PyTorch's meta kernels (as on CUDA) where the CPU kernel differs:
# native_layer_norm returns float32 mean/rstd for bfloat16 input.
DTYPE_FOLLOWS_META = {"native_layer_norm"}
# Ops returning (values, indices) where the index of tied values is implementation-defined:
# values must match; indices must select those values from the input.
TIED_INDICES = {"sort", "topk", "argsort", "msort"}
RANDOM = {"normal", "uniform", "bernoulli", "multinomial", "randn", "rand", "randint", "randperm",
          "nn.functional.dropout", "exponential", "random_", "nn.functional.feature_alpha_dropout",
          "nn.functional.alpha_dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
          "cauchy", "geometric", "log_normal", "empty", "empty_like", "new_empty", "empty_strided",
          "new_empty_strided", "empty_permuted", "bernoulli"}
# Composite OpInfos over the lowered SVD / eigh / QR whose results are unique (no sign or basis
# freedom, unlike U/V of linalg.svd and the eigenvectors of linalg.eigh, which
# test_ops_linalg_qr_svd.py compares up to sign): selected although their ATen op is composite.
COMPOSITE_OVER_LOWERED = {"linalg.svdvals", "linalg.eigvalsh", "linalg.matrix_rank", "linalg.pinv", "pinverse",
                          "linalg.matrix_norm", "linalg.norm", "norm", "linalg.cond", "qr"}
# OpInfos that test another layout or a GPU kernel, not an op we lower for dense tensors.
NOT_DENSE = {"sparse.mm", "bmm.triton_optimized"}
# OpInfos whose public op reaches our rules or tpu kernels under other ATen names (cdist ->
# _cdist_forward, ctc_loss -> _ctc_loss, rms_norm -> _fused_rms_norm's pieces, fold -> col2im)
# or through a tpu kernel that is not a lowering rule (host_read_ops.cc: bincount, equal;
# unique_consecutive), so the name match below misses them.
REACHED_UNDER_OTHER_NAMES = {"cdist", "nn.functional.pdist", "nn.functional.ctc_loss", "nn.functional.rms_norm",
                             "unique_consecutive", "bincount", "equal", "nn.functional.fold",
                             "nn.functional.grid_sample"}


def _registered_bases():
    bases = set()
    for name in torch_tpu._C._register_kernels():
        base = name.split(".")[0].rstrip("_")
        bases.add(base)
    return bases


def _selected_ops():
    bases = _registered_bases()
    ops = []
    for op in op_db:
        if op.name in RANDOM or op.name in NOT_DENSE or f"{op.name}.{op.variant_test_name}" in NOT_DENSE:
            continue
        aten = (op.aten_name or op.name).split(".")[-1]
        if aten in bases or op.name in bases or op.name in REACHED_UNDER_OTHER_NAMES | COMPOSITE_OVER_LOWERED:
            ops.append(op)
    return ops


OPS = _selected_ops()


def _cases():
    for op in OPS:
        supported = op.supported_dtypes("cpu")
        for dtype in DTYPES:
            if dtype in supported:
                yield pytest.param(op, dtype, id=f"{_full_name(op)}-{str(dtype).split('.')[-1]}")


def _full_name(op):
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def _to(x, device):
    if isinstance(x, torch.Tensor):
        return x.detach().to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(_to(v, device) for v in x)
    if isinstance(x, dict):
        return {k: _to(v, device) for k, v in x.items()}
    return x


def _compare(actual, expected, dtype, what, check_dtype=True, tol=None):
    tol = tol or {}
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), what
        actual = actual.cpu()
        if not check_dtype:
            actual = actual.to(expected.dtype)
        if expected.dtype.is_floating_point or expected.dtype.is_complex:
            torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{what}\n{m}", **tol)
        else:
            assert torch.equal(actual, expected), f"{what}: {actual} != {expected}"
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), what
        for a, e in zip(actual, expected):
            _compare(a, e, dtype, what, check_dtype, tol)
    else:
        assert actual == expected or (actual != actual and expected != expected), what


def _compare_tied(inp, actual, expected, dtype, what):
    values, indices = actual[0].cpu(), actual[1].cpu()
    _compare(values, expected[0], dtype, what)
    if inp.dim() == 0:
        return
    for d in range(inp.dim()):
        try:
            if torch.equal(torch.gather(inp, d, indices), expected[0]):
                return
        except RuntimeError:
            continue
    raise AssertionError(f"{what}: indices do not select the sorted values")


def _upcast(x):
    if isinstance(x, torch.Tensor) and x.dtype in (torch.bfloat16, torch.float16):
        return x.float()
    if isinstance(x, (list, tuple)):
        return type(x)(_upcast(v) for v in x)
    if isinstance(x, dict):
        return {k: _upcast(v) for k, v in x.items()}
    return x


def _at_least_as_accurate(actual, expected, reference):
    """bfloat16: CPU rounds some intermediates where we keep float32 (or vice versa); accept a
    result whose error against a float32 reference is no larger than CPU's own plus one bf16
    rounding of the reference (2**-8 relative), per element."""
    if isinstance(expected, (tuple, list)):
        return isinstance(actual, (tuple, list)) and len(actual) == len(expected) and all(
            _at_least_as_accurate(a, e, r) for a, e, r in zip(actual, expected, reference))
    if not isinstance(expected, torch.Tensor) or not expected.dtype.is_floating_point:
        return False
    a, e, r = actual.cpu().float(), expected.float(), reference.float()
    tol = 2.0 ** -8 * r.abs() + 1e-5
    ok = ((a - r).abs() <= (e - r).abs() + tol) | (torch.isnan(a) & torch.isnan(e)) | (a == r)
    return bool(ok.all())


def _fallbacks():
    return dict(torch_tpu._C._fallback_counts_since_start())


@pytest.mark.parametrize("op,dtype", list(_cases()))
def test_matches_cpu(op, dtype):
    name = _full_name(op)
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:MAX_SAMPLES]
    checked = 0
    for i, sample in enumerate(samples):
        try:
            expected = op(sample.input, *sample.args, **sample.kwargs)
        except Exception:
            continue  # the CPU reference itself rejects this sample
        tpu_sample = _to(sample.input, "tpu"), _to(sample.args, "tpu"), _to(sample.kwargs, "tpu")
        before = _fallbacks()
        actual = op(tpu_sample[0], *tpu_sample[1], **tpu_sample[2])
        fell_back = {k: v - before.get(k, 0) for k, v in _fallbacks().items() if v != before.get(k, 0)}
        allowed = name in FALLBACKS and (FALLBACKS[name][0] is None or dtype in FALLBACKS[name][0])
        assert not fell_back or allowed, f"{name} sample {i}: CPU fallback {fell_back}"
        if op.name in TIED_INDICES and isinstance(expected, tuple):
            _compare_tied(sample.input, actual, expected, dtype, f"{name} sample {i}")
            checked += 1
            continue
        if name in EMPTY_ON_CPU_OUTPUTS and isinstance(expected, tuple):
            keep = [k for k, e in enumerate(expected) if not (isinstance(e, torch.Tensor) and e.numel() == 0)]
            actual, expected = tuple(actual[k] for k in keep), tuple(expected[k] for k in keep)
        try:
            _compare(actual, expected, dtype, f"{name} sample {i}: {sample}",
                     check_dtype=op.name not in DTYPE_FOLLOWS_META, tol=TOLERANCES.get(name, {}).get(dtype))
        except AssertionError:
            if dtype != torch.bfloat16:
                raise
            reference = op(*_upcast((sample.input, *sample.args)), **_upcast(sample.kwargs))
            if not _at_least_as_accurate(actual, expected, reference):
                raise
        checked += 1
    assert checked > 0 or not samples
