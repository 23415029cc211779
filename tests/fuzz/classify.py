"""Failure classes and the comparison of a CPU result with a tpu result."""
import torch

OK = "ok"                      # same results
BOTH_RAISE = "ok (both raise)"  # both raised the same exception type
CRASH = "crash"                # the worker process died (segfault, abort)
CPU_CRASH = "cpu reference crash"  # the CPU run alone dies too: PyTorch's own kernel on bad input
HANG = "hang"                  # no answer within the per-case timeout
MISMATCH = "silent mismatch"   # values differ
DTYPE = "dtype mismatch"
SHAPE = "shape mismatch"
TPU_RAISE = "tpu-only raise"
CPU_RAISE = "cpu-only raise"   # tpu silently accepted input the CPU rejects
RAISE_TYPE = "raise type mismatch"  # both raised, different exception types
FALLBACK = "fallback"          # the tpu run fell back to the CPU kernel
GEN_ERROR = "harness error"    # the case could not be built (a fuzzer bug)

# Classes that fail the test slice unless known (tests/fuzz/known_limits.py).
FAILING = (CRASH, HANG, MISMATCH, DTYPE, SHAPE, TPU_RAISE)
ALL = (CRASH, CPU_CRASH, HANG, MISMATCH, DTYPE, SHAPE, TPU_RAISE, CPU_RAISE, RAISE_TYPE, FALLBACK, GEN_ERROR, BOTH_RAISE, OK)


class Difference(Exception):
    def __init__(self, cls, detail, where="", cpu=None, tpu=None):
        super().__init__(detail)
        self.cls, self.detail, self.where, self.cpu, self.tpu = cls, detail, where, cpu, tpu


# torch.testing.assert_close's default (rtol, atol) per dtype.
TOLERANCES = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5), torch.float32: (1.3e-6, 1e-5),
              torch.complex64: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7), torch.complex128: (1e-7, 1e-7)}


def tolerance(dtypes):
    """The loosest default tolerance of the floating dtypes involved: an f16 input written to an
    f64 out= tensor is computed in f16 by PyTorch, and compared at f16 tolerance."""
    tols = [TOLERANCES[d] for d in dtypes if d in TOLERANCES]
    return max(tols) if tols else None


def _pairs_to_compare(c, t):
    """assert_close measures |inf+ai - (inf+bi)| as NaN even for a one-ulp difference of the
    imaginary parts: complex elements with an infinite part compare by parts (pairs of reals), the
    others as complex numbers (error relative to the modulus). A complex with a NaN part is NaN, as
    assert_close's equal_nan has it: two such elements are equal whatever their other parts."""
    if not c.is_complex() or c.shape != t.shape or bool((c.isfinite() & t.isfinite()).all()):
        return [(c, t)]
    both_nan = c.isnan() & t.isnan()
    apart = ~(c.isfinite() & t.isfinite()) & ~both_nan
    whole = ~apart & ~both_nan
    return [(torch.where(whole, c, 0), torch.where(whole, t, 0)),
            (torch.view_as_real(c[apart]), torch.view_as_real(t[apart]))]


def compare(cpu, tpu, where="result", *, values=True, loose=(), tol=None):
    """Raises Difference for the first difference of two results (tensors, sequences, scalars).
    `loose` lists top-level output positions compared by shape and dtype only; `tol` is an
    (rtol, atol) floor over the per-dtype defaults."""
    if isinstance(cpu, torch.Tensor):
        if not isinstance(tpu, torch.Tensor):
            raise Difference(SHAPE, f"{where}: CPU gives a tensor, tpu {type(tpu).__name__}")
        if tuple(cpu.shape) != tuple(tpu.shape):
            raise Difference(SHAPE, f"{where}: shape {tuple(cpu.shape)} on CPU, {tuple(tpu.shape)} on tpu")
        if cpu.dtype != tpu.dtype:
            raise Difference(DTYPE, f"{where}: dtype {cpu.dtype} on CPU, {tpu.dtype} on tpu")
        if values:
            t = tpu.cpu() if tpu.device.type != "cpu" else tpu
            c = cpu.resolve_conj().resolve_neg()
            t = t.resolve_conj().resolve_neg()
            kw = {}
            if tol is not None and c.dtype in TOLERANCES:
                rtol, atol = max(tol, TOLERANCES[c.dtype])
                kw = dict(rtol=rtol, atol=atol)
            try:
                for cc, tt in _pairs_to_compare(c, t):
                    torch.testing.assert_close(tt, cc, equal_nan=True, check_stride=False, check_device=False, **kw)
            except AssertionError as e:
                msg = [m.strip() for m in str(e).strip().splitlines() if m.strip()]
                raise Difference(MISMATCH, f"{where}: " + "; ".join(msg[:4]), where, c, t) from None
        return
    if isinstance(cpu, (tuple, list)):
        if not isinstance(tpu, (tuple, list)) or len(cpu) != len(tpu):
            raise Difference(SHAPE, f"{where}: {len(cpu)} outputs on CPU, tpu gives {type(tpu).__name__}")
        for i, (c, t) in enumerate(zip(cpu, tpu)):
            compare(c, t, f"{where}[{i}]", values=values and i not in loose, tol=tol)
        return
    if isinstance(cpu, (bool, int, float, complex)):
        if type(cpu) is not type(tpu):
            raise Difference(DTYPE, f"{where}: {type(cpu).__name__} on CPU, {type(tpu).__name__} on tpu")
        if values:
            try:
                torch.testing.assert_close(tpu, cpu, equal_nan=True)
            except AssertionError:
                raise Difference(MISMATCH, f"{where}: {cpu!r} on CPU, {tpu!r} on tpu") from None
        return
    if cpu is None and tpu is None:
        return
    if type(cpu) is not type(tpu):
        raise Difference(SHAPE, f"{where}: {type(cpu).__name__} on CPU, {type(tpu).__name__} on tpu")
