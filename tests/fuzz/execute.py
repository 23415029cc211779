"""Runs one case on CPU and on tpu (in this process) and classifies the outcome."""
import math
import re
import warnings

import torch

from . import classify, optable

NAMESPACE = {"torch": torch, "nan": math.nan, "inf": math.inf}


def _build(case, dev):
    ns = dict(NAMESPACE, dev=dev)
    for t in case.tensors:
        exec(t.line("dev"), ns)
    return ns


def _to_cpu(x):
    if isinstance(x, torch.Tensor):
        return x.cpu()
    if isinstance(x, (tuple, list)):
        return type(x)(_to_cpu(v) for v in x)
    return x


def _run(case, dev):
    """(result moved to the CPU, {name: base after the call}) or raises what the op raised.
    On tpu, the results are read back before returning, so errors the device reports at the next
    host sync (index checks) surface here."""
    ns = _build(case, dev)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = eval(case.call_code, ns)
        out = _to_cpu(out)
        bases = {t.name: ns[t.name + "_base"].cpu() for t in case.tensors}
        if dev != "cpu":
            torch.tpu.synchronize()
    return out, bases


def _error(e):
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"


def _fallbacks():
    import torch_tpu
    return dict(torch_tpu.metrics.counters()["fallbacks"])


def run_case(case, compare=classify.compare):
    """{'cls': class, 'detail': text}. `compare` is a parameter so tests can break it on purpose."""
    try:
        cpu, cpu_bases = _run(case, "cpu")
        cpu_err = None
    except Exception as e:  # noqa: BLE001 - any error is a result
        cpu_err = e
    before = _fallbacks()
    try:
        tpu, tpu_bases = _run(case, "tpu")
        tpu_err = None
    except Exception as e:  # noqa: BLE001
        tpu_err = e
        try:  # a deferred error may also be pending: clear it for the next case
            torch.tpu.synchronize()
        except Exception:  # noqa: BLE001
            pass
    after = _fallbacks()
    fell_back = sorted(op for op, n in after.items() if n != before.get(op, 0))
    if fell_back:
        return {"cls": classify.FALLBACK, "detail": "fell back: " + ", ".join(fell_back)}
    if cpu_err is not None and tpu_err is not None:
        if type(cpu_err) is type(tpu_err):
            return {"cls": classify.BOTH_RAISE, "detail": _error(cpu_err)}
        return {"cls": classify.RAISE_TYPE, "detail": f"CPU {_error(cpu_err)} | tpu {_error(tpu_err)}"}
    if cpu_err is not None:
        return {"cls": classify.CPU_RAISE, "detail": f"CPU {_error(cpu_err)}"}
    if tpu_err is not None:
        return {"cls": classify.TPU_RAISE, "detail": f"tpu {_error(tpu_err)}"}
    random_op = optable.is_random(case.op)
    loose = (1,) if optable.loose_indices(case.op, case.call) else ()
    tol = classify.tolerance({t.dtype for t in cpu_bases.values()})
    try:
        compare(cpu, tpu, "result", values=not random_op, loose=loose, tol=tol)
        for name in cpu_bases:
            compare(cpu_bases[name], tpu_bases[name], f"{name} after the call", values=not random_op,
                    loose=loose, tol=tol)
    except classify.Difference as d:
        return {"cls": d.cls, "detail": d.detail + _annotate(case, d)}
    return {"cls": classify.OK, "detail": ""}


HALF = (torch.float16, torch.bfloat16)
HALF_CLOSER = "[tpu at least as close to a float64 reference]"
UNDEFINED_CAST = "[float to integer conversion of NaN/inf/out-of-range values]"


def _pick(where, out, bases):
    """The tensor a Difference's `where` names, in a result/bases pair."""
    if where.startswith("result"):
        for i in map(int, re.findall(r"\[(\d+)\]", where)):
            out = out[i]
        return out
    return bases[where.split()[0]]


COPYING = {"slice_scatter", "select_scatter", "index_put", "_index_put_impl", "index_copy", "copy", "masked_scatter",
           "scatter", "scatter_add", "scatter_reduce", "_foreach_copy", "fill", "masked_fill", "index_add", "where",
           "cat", "stack", "clone", "lerp", "addcmul", "addcdiv"}
INDEX_RESULTS = {"max_pool2d_with_indices", "sort", "topk", "argmax", "argmin", "max", "min", "nonzero_static"}


def _converts_to_int(case, where):
    """Whether the differing integer tensor can hold float values converted to it: an integer
    tensor written in place or as out=, a `dtype=` argument, or an op copying values in."""
    name = optable.base_name(case.op)
    if name in INDEX_RESULTS:
        return False
    if not where.startswith("result") or "out=" in case.call or optable.split(case.op)[0].endswith("_"):
        return True
    if re.search(r"dtype=torch\.(u?int|bool)", case.call):
        return True
    return name in COPYING


def _annotate(case, d):
    """Marks value differences that known_limits.py may excuse (docs/limits.md)."""
    if d.cls != classify.MISMATCH or d.cpu is None:
        return ""
    cpu, tpu = d.cpu, d.tpu
    if cpu.dtype in HALF:
        # PyTorch's CPU rounds half-precision intermediates where we compute in float32 and
        # round once: excused when the tpu value is at least as close to a float64 reference.
        up = type(case)(case.seed, case.index, case.op,
                        [type(t)(t.name, f"({t.base_code}).to(torch.float64)"
                                 if re.search(r"dtype=torch\.(float16|bfloat16)\)", t.base_code) else t.base_code,
                                 t.view_code) for t in case.tensors], case.call)
        try:
            ref = _pick(d.where, *_run(up, "cpu")).to(torch.float64)
        except Exception:  # noqa: BLE001
            return ""
        c, t = cpu.to(torch.float64), tpu.to(torch.float64)
        if ref.shape == c.shape:
            inf = float("inf")
            err_c = torch.where(c == ref, 0.0, (c - ref).abs()).nan_to_num(nan=inf)
            err_t = torch.where(t == ref, 0.0, (t - ref).abs()).nan_to_num(nan=inf)
            same = (t == c) | (c.isnan() & t.isnan())
            ok = same | (ref.isnan() & t.isnan()) | (~ref.isnan() & ~t.isnan() & (err_t <= err_c))
            if bool(ok.all()):
                return " " + HALF_CLOSER
    if (not cpu.dtype.is_floating_point and not cpu.dtype.is_complex and cpu.dtype != torch.bool
            and _converts_to_int(case, d.where)):
        info = torch.iinfo(cpu.dtype)
        for t in case.tensors:
            if not re.search(r"dtype=torch\.(float|bfloat|complex)", t.base_code):
                continue
            x = eval(t.base_code, dict(NAMESPACE))
            x = x.real if x.is_complex() else x
            x = x.to(torch.float64)
            if bool((~x.isfinite() | (x < info.min) | (x > info.max)).any()):
                return " " + UNDEFINED_CAST
    return ""
