"""Device-vs-CPU tests driven by PyTorch's OpInfo database, for every OpInfo whose ATen op is in
our registration table: float32, bfloat16 and the integer/bool dtypes the op supports.

Integer and bool results must be exact; float results within the tolerances below. Random ops
are excluded here (their values differ from CPU by design; tests/python/test_ops_random.py
checks their statistics and determinism).
"""
import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

import torch_tpu

DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.uint8, torch.bool]
TOLERANCES = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}
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
        if op.name in RANDOM or op.variant_test_name:
            continue
        aten = (op.aten_name or op.name).split(".")[-1]
        if aten in bases or op.name in bases:
            ops.append(op)
    return ops


OPS = _selected_ops()


def _cases():
    for op in OPS:
        supported = op.supported_dtypes("cpu")
        for dtype in DTYPES:
            if dtype in supported:
                yield pytest.param(op, dtype, id=f"{op.name}-{str(dtype).split('.')[-1]}")


def _to(x, device):
    if isinstance(x, torch.Tensor):
        return x.detach().to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(_to(v, device) for v in x)
    if isinstance(x, dict):
        return {k: _to(v, device) for k, v in x.items()}
    return x


def _compare(actual, expected, dtype, what, check_dtype=True):
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), what
        actual = actual.cpu()
        if not check_dtype:
            actual = actual.to(expected.dtype)
        if expected.dtype.is_floating_point or expected.dtype.is_complex:
            tol = TOLERANCES.get(expected.dtype, TOLERANCES.get(dtype, dict(rtol=1e-4, atol=1e-5)))
            torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{what}\n{m}", **tol)
        else:
            assert torch.equal(actual, expected), f"{what}: {actual} != {expected}"
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), what
        for a, e in zip(actual, expected):
            _compare(a, e, dtype, what, check_dtype)
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
    result whose error against a float32 reference is no larger than CPU's own, per element."""
    if not isinstance(expected, torch.Tensor) or not expected.dtype.is_floating_point:
        return False
    a, e, r = actual.cpu().float(), expected.float(), reference.float()
    tol = 2e-2 * r.abs() + 2e-2
    ok = ((a - r).abs() <= (e - r).abs() + tol) | (torch.isnan(a) & torch.isnan(e))
    return bool(ok.all())


@pytest.mark.parametrize("op,dtype", list(_cases()))
def test_matches_cpu(op, dtype):
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:MAX_SAMPLES]
    checked = 0
    for i, sample in enumerate(samples):
        try:
            expected = op(sample.input, *sample.args, **sample.kwargs)
        except Exception:
            continue  # the CPU reference itself rejects this sample
        tpu_sample = _to(sample.input, "tpu"), _to(sample.args, "tpu"), _to(sample.kwargs, "tpu")
        actual = op(tpu_sample[0], *tpu_sample[1], **tpu_sample[2])
        if op.name in TIED_INDICES and isinstance(expected, tuple):
            _compare_tied(sample.input, actual, expected, dtype, f"{op.name} sample {i}")
            checked += 1
            continue
        try:
            _compare(actual, expected, dtype, f"{op.name} sample {i}: {sample}",
                     check_dtype=op.name not in DTYPE_FOLLOWS_META)
        except AssertionError:
            if dtype != torch.bfloat16:
                raise
            reference = op(*_upcast((sample.input, *sample.args)), **_upcast(sample.kwargs))
            if not _at_least_as_accurate(actual, expected, reference):
                raise
        checked += 1
    assert checked > 0 or not samples
