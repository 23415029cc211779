"""Runs one case's CPU half (cpu_half) and tpu half (run_case) and classifies the outcome."""
import base64
import io
import math
import re
import warnings

import torch

from ..python import cpu_loops
from . import classify, optable

NAMESPACE = {"torch": torch, "nan": math.nan, "inf": math.inf}


def _build(case, dev):
    ns = dict(NAMESPACE, dev=dev)
    for t in case.tensors:
        exec(t.line("dev"), ns)
    return ns


def _tree_map(x, fn):
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, (tuple, list)):
        return type(x)(_tree_map(v, fn) for v in x)
    return x


def _to_cpu(x):
    return _tree_map(x, lambda t: t.cpu())


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


def _type_name(e):
    return f"{type(e).__module__}.{type(e).__qualname__}"


def _tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (tuple, list)):
        for v in x:
            yield from _tensors(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _tensors(v)


def cpu_half(case):
    """The CPU reference of a case, picklable: {'error': (type name, text)} if the op raised, else
    {'out', 'bases'}; for a point-wise op, 'loops': the call's result through PyTorch's scalar and
    through its vector loop (_both_loops); and, when a result or input is half precision, 'ref64':
    the same call on float64 upcasts (for _annotate), or None if that raised. The fuzzer runs it in a process of its
    own (runner.py): PyTorch's CPU kernels corrupt memory on some invalid inputs."""
    try:
        out, bases = _run(case, "cpu")
    except Exception as e:  # noqa: BLE001 - any error is a result
        return {"error": (_type_name(e), _error(e))}
    half = {"out": out, "bases": bases}
    if optable.is_pointwise(case.op):
        half["loops"] = _both_loops(case)
    if any(t.dtype in HALF for t in _tensors((out, bases))):
        try:
            half["ref64"] = _run(_upcast(case), "cpu")
        except Exception:  # noqa: BLE001
            half["ref64"] = None
    return half


def _run_laid_out(case, lay_out, lay_back):
    """The CPU call with each input tensor of rank > 0 replaced by `lay_out(tensor)` (its values
    in another memory layout; 0-d tensors stay, they promote types differently), as (result,
    {name: base after the call}), every tensor mapped back by `lay_back`."""
    ns = _build(case, "cpu")
    for t in case.tensors:
        if ns[t.name].dim() > 0:
            ns[t.name] = lay_out(ns[t.name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = eval(case.call_code, ns)
    out = _tree_map(out, lay_back)
    fresh = _build(case, "cpu")
    for t in case.tensors:
        try:
            fresh[t.name].copy_(lay_back(ns[t.name]))
        except RuntimeError:  # a view whose elements overlap: keep the base as built
            pass
    return out, {t.name: fresh[t.name + "_base"] for t in case.tensors}


def _both_loops(case):
    """(scalar-loop run, vector-loop run) of a point-wise call, or None where either raised: the
    inputs as strided copies (TensorIterator's scalar loop), and each element repeated along a
    new last dim (vector blocks only, on any ISA). See tests/python/cpu_loops.py."""
    untile = lambda y: y[..., 0] if y.dim() > 0 and y.shape[-1] == cpu_loops.BLOCK else y  # noqa: E731
    try:
        return (_run_laid_out(case, cpu_loops.strided_copy, lambda y: y),
                _run_laid_out(case, cpu_loops.tiled, untile))
    except Exception:  # noqa: BLE001 - a layout the call rejects: no second reference
        return None


def _nearer_tree(orig, scalar, vector, got):
    """Per float tensor, the loop's value nearer to the tpu's (cpu_loops.nearer)."""
    if isinstance(orig, torch.Tensor):
        if (isinstance(got, torch.Tensor) and orig.dtype in cpu_loops.TOLERANCES
                and scalar.shape == orig.shape == vector.shape == got.shape and scalar.dtype == orig.dtype == vector.dtype):
            return cpu_loops.nearer(got, scalar, vector)
        return orig
    if isinstance(orig, (tuple, list)) and isinstance(got, (tuple, list)) and len(got) == len(orig):
        return type(orig)(_nearer_tree(*parts) for parts in zip(orig, scalar, vector, got))
    return orig


def encode(half) -> str:
    """cpu_half's result as one line of text (the runner passes it from the CPU worker on)."""
    buf = io.BytesIO()
    torch.save(half, buf)
    return base64.b64encode(buf.getvalue()).decode()


def decode(text):
    return torch.load(io.BytesIO(base64.b64decode(text)), weights_only=False)


def run_case(case, compare=classify.compare, cpu=None):
    """{'cls': class, 'detail': text}. `cpu` is the case's cpu_half (computed here when None);
    `compare` is a parameter so tests can break it on purpose."""
    if cpu is None:
        cpu = cpu_half(case)
    cpu_err = cpu.get("error")
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
        if cpu_err[0] == _type_name(tpu_err):
            return {"cls": classify.BOTH_RAISE, "detail": cpu_err[1]}
        return {"cls": classify.RAISE_TYPE, "detail": f"CPU {cpu_err[1]} | tpu {_error(tpu_err)}"}
    if cpu_err is not None:
        return {"cls": classify.CPU_RAISE, "detail": f"CPU {cpu_err[1]}"}
    if tpu_err is not None:
        return {"cls": classify.TPU_RAISE, "detail": f"tpu {_error(tpu_err)}"}
    try:
        _compare_all(case, cpu["out"], cpu["bases"], tpu, tpu_bases, compare)
    except classify.Difference as d:
        if d.cls == classify.MISMATCH and cpu.get("loops"):
            (s_out, s_bases), (v_out, v_bases) = cpu["loops"]
            out = _nearer_tree(cpu["out"], s_out, v_out, tpu)
            bases = {n: _nearer_tree(b, s_bases[n], v_bases[n], tpu_bases[n]) for n, b in cpu["bases"].items()}
            try:
                _compare_all(case, out, bases, tpu, tpu_bases, compare)
                return {"cls": d.cls, "detail": d.detail + " " + LOOPS_DISAGREE}
            except classify.Difference:
                pass
        return {"cls": d.cls, "detail": d.detail + _annotate(case, d, cpu.get("ref64"))}
    return {"cls": classify.OK, "detail": ""}


def _compare_all(case, cpu_out, cpu_bases, tpu, tpu_bases, compare):
    """Raises classify.Difference for the first difference of the result or an input after the
    call."""
    unordered = optable.unordered_values(case.op, case.call)
    if unordered:
        cpu_out, tpu = _values_as_multiset(cpu_out), _values_as_multiset(tpu)
    sign_free = optable.base_name(case.op) in optable.SIGN_FREE
    if sign_free:
        cpu_out, tpu = optable.canonical_signs(case.op, cpu_out), optable.canonical_signs(case.op, tpu)
    random_op = optable.is_random(case.op)
    loose = (1,) if optable.loose_indices(case.op, case.call) else ()
    tol = classify.tolerance({t.dtype for t in cpu_bases.values()})
    compare(cpu_out, tpu, "result", values=not random_op, loose=loose, tol=tol)
    for name in cpu_bases:
        if (sign_free or loose or unordered) and f"={name}" in case.call.replace(" ", ""):
            continue  # an out= tensor: compared above as the result (signs fixed, ties loose)
        compare(cpu_bases[name], tpu_bases[name], f"{name} after the call", values=not random_op,
                loose=loose, tol=tol)


def _values_as_multiset(out):
    """(values, indices) with the values sorted and flattened (NaNs last)."""
    values = out[0].cpu().flatten()
    return (values.sort(stable=True).values,) + tuple(out[1:])


HALF = (torch.float16, torch.bfloat16)
HALF_CLOSER = "[tpu at least as close to a float64 reference]"
UNDEFINED_CAST = "[float to integer conversion of NaN/inf/out-of-range values]"
# The tpu result matches, element by element, what PyTorch CPU's scalar or its vector loop gives.
LOOPS_DISAGREE = "[PyTorch CPU's scalar and vector loops disagree]"


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


def _upcast(case):
    """The case with its float16/bfloat16 inputs made float64: a reference for half precision."""
    return type(case)(case.seed, case.index, case.op,
                      [type(t)(t.name, f"({t.base_code}).to(torch.float64)"
                               if re.search(r"dtype=torch\.(float16|bfloat16)\)", t.base_code) else t.base_code,
                               t.view_code) for t in case.tensors], case.call)


def _annotate(case, d, ref64):
    """Marks value differences that known_limits.py may excuse (docs/limits.md)."""
    if d.cls != classify.MISMATCH or d.cpu is None:
        return ""
    cpu, tpu = d.cpu, d.tpu
    if cpu.dtype in HALF:
        # PyTorch's CPU rounds half-precision intermediates where we compute in float32 and
        # round once: excused when the tpu value is at least as close to a float64 reference.
        try:
            ref = _pick(d.where, *ref64).to(torch.float64)
        except Exception:  # noqa: BLE001 - no reference (it raised) or none of that shape
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
