"""Documented differences from PyTorch CPU that the fuzzer finds and must not count as failures.

Each entry: (op glob, failure class, regex the detail must match, reason). Every reason points to
docs/limits.md; an entry without a documented limit behind it is a defect and belongs in a fix,
not here. Keep this list short."""
import fnmatch
import re

from ..python import cpu_loops
from . import execute, optable

OVERLAPPING_WRITE = r"^(result|t\d+ after the call)"

KNOWN = [
    ("*", "silent mismatch", re.escape(execute.LOOPS_DISAGREE),
     "docs/limits.md 'PyTorch CPU's own scalar and vector loops disagree': the tpu result matches, element "
     "by element, the CPU's scalar or its vector loop (checked only for the ops tests/python/cpu_loops.py "
     "SELF_DISAGREEING lists, see `applies`)"),
    ("*", "silent mismatch", re.escape("[tpu at least as close to a float64 reference]"),
     "docs/limits.md 'bfloat16/float16 element-wise math and addmm-family ops compute in float32 and "
     "round once': the CPU rounds intermediates; ours is at least as close to a float64 reference"),
    ("*", "silent mismatch", re.escape("[float to integer conversion of NaN/inf/out-of-range values]"),
     "docs/limits.md 'Float to integer conversion': NaN, inf and out-of-range values have no defined "
     "integer value (C++ undefined behavior on the CPU)"),
    ("native_layer_norm*", "dtype mismatch", r"result\[[12]\]: dtype torch.float32 on CPU|"
     r"on CPU, torch.float32 on tpu",
     "docs/limits.md 'Result dtypes follow PyTorch's meta kernels': float32 mean/rstd for bfloat16"),
    (("*pow*", "ldexp*"), "silent mismatch", r".",
     "docs/limits.md 'Complex pow of non-finite values' (ldexp's 2^other too): XLA's complex power gives NaN where the "
     "CPU's vectorized exp(y*log(x)) gives signed zeros or infinities (checked only for complex "
     "inputs holding inf/NaN, or a zero base, see `applies`)"),
    ("log1p*", "silent mismatch", r".",
     "docs/limits.md 'Complex log1p of infinite values': XLA's log1p gives the limit (inf + i*pi/2) "
     "where the CPU's log(u) * z / (u - 1) divides inf by inf (checked only for complex inputs "
     "holding inf, see `applies`)"),
    (("_native_batch_norm_legit*", "native_batch_norm"), "dtype mismatch", r"result\[[12]\]: dtype torch\.(bfloat16|float16) on CPU, torch\.float32 on tpu",
     "docs/limits.md 'Result dtypes follow PyTorch's meta kernels': float32 save_mean/save_invstd for "
     "half-precision input"),
    ("_native_batch_norm_legit*", "tpu-only raise", r"Expected out tensor to have dtype float, but got c10::(Half|BFloat16)",
     "docs/limits.md 'Result dtypes follow PyTorch's meta kernels': the out= overloads want float32 "
     "save_mean/save_invstd outs for half-precision input"),
    ("_convolution*", "tpu-only raise", r"Expected out tensor to have dtype",
     "docs/limits.md '_convolution of an empty batch with weights of another dtype' (checked only for "
     "an empty input, see `applies`)"),
    (("adaptive_max_pool*_backward*", "max_pool*_with_indices_backward*"),
     "silent mismatch", r".",
     "docs/limits.md 'Max-pooling backwards with indices outside the plane': the CPU "
     "kernels write through them unchecked, into other channels or out of bounds; ours drop them "
     "(checked only when an integer input holds a negative or huge index, see `applies`)"),
    ("_adaptive_avg_pool*_backward*", "tpu-only raise", r"grad_output has shape .*, its leading dims must be self's",
     "docs/limits.md 'Adaptive average pooling backward with a grad_output of other batch or channel dims': "
     "we raise; the CPU kernels read it with self's dims, out of bounds"),
    (("native_batch_norm*", "_native_batch_norm_legit*"), "tpu-only raise", r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)",
     "docs/limits.md 'Batch norm of a 1-D input': PyTorch's CPU raises this for a contiguous 1-D input "
     "and skips the check for an expanded one"),
    ("_logcumsumexp*", "tpu-only raise", r"_logcumsumexp\.out: expected scalar_type \w+ but found",
     "docs/limits.md '_logcumsumexp.out with an out of another dtype': we raise; the CPU kernel "
     "writes the result's bytes into it unconverted"),
    ("_native_batch_norm_legit_functional*", "dtype mismatch", r"result\[[34]\]: dtype torch\.\w+ on CPU, torch\.float32 on tpu",
     "docs/limits.md 'Result dtypes follow PyTorch's meta kernels': the updated running statistics "
     "have the input's statistics type, not the running tensors' own"),
    ("*native_batch_norm*", "shape mismatch", r"result\[[12]\]: shape \(0,\) on CPU",
     "docs/limits.md 'Result dtypes follow PyTorch's meta kernels': save_mean/save_invstd of "
     "batch norm without training statistics are (C,) as the meta kernel says; the CPU returns (0,)"),
    ("*_pad*d_backward*", "tpu-only raise", r"grad_output has shape .*, expected|padding backward expects a",
     "docs/limits.md 'Padding backward with a grad_output not shaped like the padded input': the "
     "CPU checks only the padded widths and reads the other dims unchecked"),
    ("_masked_softmax_backward*", "shape mismatch", r"result: shape \(1,\) on CPU, \(\) on tpu",
     "docs/limits.md 'Result dtypes follow PyTorch's meta kernels': a 0-d gradient for 0-d inputs"),
    ("_fused_*", "tpu-only raise", r"ValueError: .*has shape .*, its parameter",
     "docs/limits.md 'Fused optimizers with mis-shaped lists': we raise; the CPU kernel reads and "
     "writes out of bounds"),
    (("*mm*", "*mv*"), "silent mismatch", r".",
     "docs/limits.md 'Complex matrix products of non-finite values': XLA's complex dot and the CPU's "
     "complex GEMM disagree on inf vs NaN (checked only for complex inputs holding inf/NaN, see `applies`)"),
    (("*_copy*", "*_scatter*", "copy"), "silent mismatch", r".",
     "docs/limits.md 'Copies of a self with internal overlap': the CPU's result aliases itself "
     "(checked only when an input is an unfold/expand view, see `applies`)"),
    ("_cum*_helper*", "silent mismatch", r".",
     "docs/limits.md '_cummax_helper / _cummin_helper called directly with a negative dim': the CPU "
     "kernel does not wrap the dim and reads out of bounds (checked only for a negative dim, see `applies`)"),
    ("*batch_norm*", "tpu-only raise", r"should contain \d+ elements not \d+",
     "docs/limits.md 'Batch norm kernels with per-channel tensors of the wrong size': torch.batch_norm's "
     "check; the CPU kernels read out of bounds"),
    ("_cum*_helper*", "tpu-only raise", r"values and indices must have self's shape|"
     r"more than one element of the written-to tensor",
     "docs/limits.md '_cummax_helper / _cummin_helper called directly ...': mis-shaped values/indices "
     "are rejected; the CPU kernel writes through them out of bounds"),
    ("isin*", "silent mismatch", r".",
     "docs/limits.md 'isin(..., assume_unique=True) of inputs that are not unique': the CPU's answer "
     "relies on the promise (checked only with assume_unique=True, see `applies`)"),
    ("_weight_norm_interface*", "tpu-only raise", r"weight norm: g has \d+ elements, expected",
     "docs/limits.md '_weight_norm_interface with a g whose size is not v.size(dim)': we raise; the "
     "CPU kernel reads g out of bounds"),
    ("*softmax_backward*", "tpu-only raise", r"output shape \[[\d, ]*\] must match grad_output shape",
     "docs/limits.md 'Softmax backward kernels with an output shaped unlike grad_output': we raise; "
     "the CPU kernels read output out of bounds"),
    ("_pdist_*", "tpu-only raise", r"pdist only supports 2D tensors|_pdist_backward: (grad|pdist) has shape",
     "docs/limits.md '_pdist_forward / _pdist_backward called directly with mis-shaped tensors': torch.pdist's "
     "checks and the shapes autograd passes; the CPU kernels skip them and read out of bounds"),
    ("_cholesky_solve_helper*", "tpu-only raise", r"cholesky_solve: A must be batches of square matrices",
     "docs/limits.md '_cholesky_solve_helper called directly with a non-square A': torch.cholesky_solve's "
     "check; the CPU kernel reads A as n x n out of bounds"),
    ("unfold_backward*", "tpu-only raise", r"unfold_backward: grad has shape",
     "docs/limits.md 'unfold_backward with a grad not shaped like the unfold's result': autograd always "
     "passes that shape; the CPU kernel reads it unchecked"),
    ("*", "silent mismatch", OVERLAPPING_WRITE,
     "docs/limits.md 'Writes into a tensor whose elements overlap': which of two writes to one memory "
     "location wins is the kernel's loop order on the CPU and unspecified here (checked only when the "
     "differing tensor overlaps itself, see `applies`)"),
    ("_fused_*", "silent mismatch", r".",
     "docs/limits.md 'Fused optimizers with non-contiguous tensors': PyTorch's CPU kernels read every "
     "list's memory in contiguous order (checked only when a tensor is not contiguous, see `applies`)"),
    ("*", "silent mismatch", r"^result",
     "docs/limits.md 'Integer inputs of math functions with a float64 out=': computed in float64; the "
     "CPU computes in float32 and casts (checked only for an integer input and a float64 out=, see `applies`)"),
    (("add*", "sub*", "rsub*", "_foreach_add*", "_foreach_sub*"), "silent mismatch", r".",
     "docs/limits.md 'bfloat16/float16 add/sub with alpha': the CPU's scalar loop (strided tensors, "
     "tails after its vector blocks) rounds alpha * other first, its vector loop does not, and ours "
     "never does (checked only for half-precision inputs and an alpha, see `applies`)"),
    ("_masked_softmax*", "silent mismatch", r".",
     "docs/limits.md '_masked_softmax of a non-contiguous input': the CPU kernel reads the input's "
     "memory in contiguous order (checked only for such an input, see `applies`)"),
    (("index_put*", "_index_put_impl*"), "silent mismatch", r".",
     "docs/limits.md 'index_put_ with repeated indices and accumulate=False': which value lands is "
     "undefined in PyTorch (checked only when an index repeats a position, see `applies`)"),
    ("put*", "silent mismatch", r".",
     "docs/limits.md 'put / put_ with duplicate indices and accumulate=False': PyTorch leaves which "
     "write wins undefined (checked only when the index has duplicates, see `applies`)"),
    ("cum*", "tpu-only raise", r"Dimension out of range",
     "docs/limits.md 'Checks on empty inputs': the CPU skips the dim check for an empty input "
     "(checked only for empty inputs, see `applies`)"),
    (("_adaptive_avg_pool*", "_softmax*", "_log_softmax*"), "tpu-only raise", r"not implemented for",
     "docs/limits.md 'Checks on empty inputs': the CPU skips the dtype check for an empty input "
     "(checked only for empty inputs, see `applies`)"),
    ("native_dropout*", "dtype mismatch", r"result\[1\]: dtype torch\.\w+ on CPU, torch\.bool on tpu",
     "docs/limits.md 'native_dropout of an empty tensor': a bool mask as the meta kernel says "
     "(checked only for empty inputs, see `applies`)"),
    ("_fft_*", "silent mismatch", r".",
     "docs/limits.md 'FFTs of NaN/inf inputs': which outputs become NaN differs from the CPU's FFT "
     "(checked only when an input has non-finite values, see `applies`)"),
    ("*", "tpu-only raise", r"dtype ComplexHalf is not supported on the tpu device",
     "docs/limits.md 'complex32 (ComplexHalf)': not a tpu dtype; an op whose result would be one "
     "raises TypeError"),
    (("*div*", "*rsqrt*", "*reciprocal*"), "silent mismatch", r".",
     "docs/limits.md 'Complex division of non-finite values': XLA's complex divide follows C99 "
     "Annex G (an infinite part with a NaN beside it is an infinity); the CPU gives NaN (checked "
     "only for complex inputs holding inf/NaN, see `applies`)"),
    (("*std*", "*var*", "native_*_norm*"), "silent mismatch", r".",
     "docs/limits.md 'var / std of float32 accumulate in float32', also the statistics of layer, "
     "group and batch norm (checked only for float32 inputs holding values beyond 1e19, see `applies`)"),
    (("_log_softmax*", "gelu*", "log_sigmoid_forward*", "_softmax*"), "silent mismatch", r".",
     "docs/limits.md 'CPU kernels that skip a non-contiguous out=': PyTorch's CPU gelu.out, "
     "_(log_)softmax.out and log_sigmoid_forward.output leave such an out (partly) unwritten, the "
     "softmax backwards' outs get the result in contiguous order "
     "(checked only for those ops with a non-contiguous out, see `applies`)"),
    ("linalg_inv*", "silent mismatch", r"result\[0\]",
     "docs/limits.md 'Inverses of singular or non-finite matrices' (checked only when an input "
     "has non-finite values, see `applies`)"),
    (("*_mean*", "native_layer_norm*"), "silent mismatch", r"result\[1\]",
     "docs/limits.md 'The mean of var_mean / std_mean over an infinity', also layer norm's saved mean (checked only for inputs "
     "holding inf, see `applies`)"),
    ("*convolution*", "silent mismatch", r".",
     "docs/limits.md 'Transposed convolutions with non-finite weights': the zeros between and "
     "around the input multiply every weight, so a NaN or inf weight reaches every output "
     "(checked only for transposed or backward convolutions with such a weight, see `applies`)"),
    ("_cdist_backward*", "tpu-only raise", r"_cdist_backward: (grad|cdist) has shape",
     "docs/limits.md '_cdist_backward with grad or cdist not shaped (batch, r1, r2)': we raise; "
     "the CPU kernel reads them out of bounds"),
    (("linalg_solve_triangular*", "_cholesky_solve_helper*", "linalg_householder_product*", "linalg_lstsq*",
      "linalg_cholesky_ex*", "geqrf*"), "silent mismatch", r".",
     "docs/limits.md 'torch.linalg.solve_triangular' and 'Linear algebra of non-finite inputs': below "
     "a ±inf the blocked solve gives NaN, cholesky_solve is two such solves, and blocked reflectors "
     "and factorizations place NaN where LAPACK's do not (checked only when an input has non-finite "
     "values, or values whose squares overflow, see `applies`)"),
    ("_weight_norm_interface*", "silent mismatch", r".",
     "docs/limits.md '_weight_norm_interface of a non-contiguous v or g': the CPU kernel reads them as "
     "if contiguous (checked only when one of them is not, see `applies`)"),
    (("*cos*", "*sin*", "*tan*", "*exp*"), "silent mismatch", r".",
     "docs/limits.md 'Complex trigonometric and hyperbolic functions of infinities': XLA's formulas "
     "give NaN parts where C99 (the CPU) gives signed zeros (checked only for complex inputs holding "
     "inf/NaN, see `applies`)"),
    ("embedding_dense_backward*", "tpu-only raise", r"is out of range for num_weights",
     "docs/limits.md 'embedding_dense_backward through the CPU fallback': we check the indices the "
     "CPU kernel counts unchecked (it corrupts the heap)"),
    ("_native_batch_norm_legit*", "tpu-only raise", r"running_mean and running_var must not be None in eval mode",
     "docs/limits.md 'Batch norm without running statistics in evaluation mode': the CPU kernel reads "
     "the missing statistics (a segfault or garbage); we raise PyTorch's own error"),
    ("_cholesky_solve_helper*", "tpu-only raise", r"Incompatible matrix sizes for cholesky_solve",
     "docs/limits.md '_cholesky_solve_helper with mismatched sizes': we raise cholesky_solve's own "
     "error; the helper's CPU kernel checks nothing and returns b"),
    (("log2*", "log10*", "_foreach_log2*", "_foreach_log10*"), "silent mismatch", r".",
     "docs/limits.md 'Complex log2 / log10 of non-finite values on PyTorch's generic CPU build': with "
     "ATEN_CPU_CAPABILITY=default the CPU divides log(z) by a complex ln 2, turning an infinite part's "
     "partner into NaN (checked only on that build, for complex inputs holding inf/NaN, see `applies`)"),
    ("_linalg_svd*", "silent mismatch", r"result\[[02]\]",
     "docs/limits.md 'Singular vectors of repeated singular values': any orthonormal basis of their "
     "subspace is an SVD (checked only for an input made of one repeated value, see `applies`)"),
]


def _built(*specs):
    """The case's tensors named by `specs`, built on the CPU: {name: tensor}."""
    import math
    import torch
    ns = {"torch": torch, "nan": math.nan, "inf": math.inf, "dev": "cpu"}
    exec("; ".join(spec.line("dev") for spec in specs), ns)
    return {spec.name: ns[spec.name] for spec in specs}


def _has_duplicate_flat_indices(case) -> bool:
    """Whether put's index (argument 1) names one element of self (argument 0) twice."""
    import torch
    self_spec, index_spec = case.tensors[0], case.tensors[1]
    built = _built(self_spec, index_spec)
    n = built[self_spec.name].numel()
    index = built[index_spec.name].flatten()
    if n == 0 or index.numel() == 0:
        return False
    return torch.remainder(index, n).unique().numel() < index.numel()


def _index_put_writes_twice(case) -> bool:
    """Whether an index tensor of index_put (accumulate=False) repeats a position of some dim of
    self, negative indices wrapped: the destination then gets two values."""
    import torch
    if not re.search(r"False\s*$", case.call.strip().rstrip(")")):
        return False
    built = _built(*case.tensors)
    sizes = [n for n in built[case.tensors[0].name].shape if n > 0]
    for spec in case.tensors[1:]:
        t = built[spec.name]
        if t.dtype != torch.int64 or t.numel() < 2:
            continue
        if any(torch.remainder(t.flatten(), n).unique().numel() < t.numel() for n in sizes):
            return True
    return False


def _is_contiguous(spec) -> bool:
    return _built(spec)[spec.name].is_contiguous()


def _overlaps_itself(spec) -> bool:
    """Whether two elements of the tensor share memory (an unfold with step < size, an expand)."""
    import torch
    t = _built(spec)[spec.name]
    if t.numel() == 0:
        return False
    where = torch.arange(t.untyped_storage().nbytes() // t.element_size()).as_strided(t.shape, t.stride(), t.storage_offset())
    return where.unique().numel() < t.numel()


def _written_tensor_overlaps(case, detail) -> bool:
    """The differing tensor (`tN after the call`, or an out= behind `result`) overlaps itself."""
    named = re.match(r"(t\d+) after the call", detail)
    names = {named.group(1)} if named else set(re.findall(r"\b(?:out\d?|output|values|indices|grad_input)=(t\d+)", case.call))
    return any(spec.name in names and _overlaps_itself(spec) for spec in case.tensors)


def _has_non_contiguous_out(case) -> bool:
    names = set(re.findall(r"\b(?:out\d?|output|buffer|grad_input)=(t\d+)", case.call))
    return any(spec.name in names and not _is_contiguous(spec) for spec in case.tensors)


def _first_tensor_is_empty(case) -> bool:
    return _built(case.tensors[0])[case.tensors[0].name].numel() == 0


def applies(entry, case, detail="") -> bool:
    """Extra conditions an entry needs beyond its op/class/regex."""
    op_glob = globs(entry)[0]  # a row's first glob names it here
    if op_glob == "_log_softmax*":  # the named ops with a non-contiguous out only
        names = ("_log_softmax", "_softmax", "gelu", "log_sigmoid_forward", "_log_softmax_backward_data",
                 "_softmax_backward_data")
        return optable.base_name(case.op) in names and _has_non_contiguous_out(case)
    if op_glob in ("cum*", "_adaptive_avg_pool*", "native_dropout*", "_convolution*"):
        return _first_tensor_is_empty(case)
    if entry[2] == r"^result" and op_glob == "*":
        ints = re.compile(r"dtype=torch\.(u?int\d+|bool)\)")
        f64_out = any(f"={t.name}" in case.call.replace(" ", "") and "torch.float64" in t.base_code for t in case.tensors)
        return f64_out and bool(case.tensors) and bool(ints.search(case.tensors[0].base_code)) and \
            all(not re.search(r"torch\.(float|bfloat|complex)", t.base_code) or f"={t.name}" in case.call.replace(" ", "")
                for t in case.tensors)
    if entry[2] == OVERLAPPING_WRITE:
        return _written_tensor_overlaps(case, detail)
    if op_glob == "adaptive_max_pool*_backward*":
        return any("torch.int64" in t.base_code and re.search(r"(\[|, )(-\d+|1000)(?=[,\]])", t.base_code)
                   for t in case.tensors)
    if op_glob == "_fused_*" and entry[1] == "silent mismatch":
        return not all(_is_contiguous(t) for t in case.tensors)
    if op_glob == "add*":
        return "alpha=" in case.call and any(re.search(r"dtype=torch\.(bfloat16|float16)\)", t.base_code) for t in case.tensors)
    if op_glob == "_masked_softmax*":
        return optable.base_name(case.op) == "_masked_softmax" and not _is_contiguous(case.tensors[0])
    if op_glob == "index_put*":
        return _index_put_writes_twice(case)
    if op_glob == "put*":
        return "True" not in case.call and _has_duplicate_flat_indices(case)
    if op_glob == "_weight_norm_interface*" and entry[1] == "silent mismatch":
        return optable.base_name(case.op) == "_weight_norm_interface" and not all(
            _is_contiguous(t) for t in case.tensors[:2])
    if op_glob == "*cos*":
        names = {f"{p}{f}" for p in ("", "_foreach_") for f in ("cos", "sin", "tan", "cosh", "sinh", "tanh", "exp")}
        return optable.base_name(case.op).rstrip("_") in names and any(
            "complex" in t.base_code and ("nan" in t.base_code or "inf" in t.base_code) for t in case.tensors)
    if entry[2] == re.escape(execute.LOOPS_DISAGREE):
        return optable.base_name(case.op) in cpu_loops.SELF_DISAGREEING
    if op_glob in ("_fft_*", "linalg_inv*"):
        return any(s in t.base_code for t in case.tensors for s in ("nan", "inf"))
    if op_glob == "linalg_solve_triangular*":
        return any(s in t.base_code for t in case.tensors for s in ("nan", "inf", "1e30"))
    if op_glob == "log2*":
        import torch
        return torch.backends.cpu.get_cpu_capability() == "DEFAULT" and any(
            "complex" in t.base_code and ("nan" in t.base_code or "inf" in t.base_code) for t in case.tensors)
    if op_glob == "_linalg_svd*":
        return ".expand(" in case.tensors[0].view_code and re.search(r"torch\.tensor\(\[[^,\]]*\]", case.tensors[0].base_code)
    if op_glob == "_cum*_helper*" and entry[1] == "silent mismatch":
        return bool(re.search(r",\s*-\d+\)$", case.call.strip() + ")"))
    if op_glob == "isin*":
        return "assume_unique=True" in case.call
    if op_glob == "*_copy*":
        if optable.base_name(case.op) not in ("_foreach_copy", "copy", "slice_scatter", "select_scatter", "diagonal_scatter"):
            return False
        return any(".unfold(" in t.view_code or ".expand(" in t.view_code for t in case.tensors)
    if op_glob == "*convolution*":
        backward = "backward" in case.op
        position = 2 if backward else 1  # convolution_backward(grad_output, input, weight, ...)
        weight = case.tensors[position] if len(case.tensors) > position else None
        transposed = backward or re.search(r"\],\s*True,\s*\[", case.call)
        return bool(weight and transposed and ("nan" in weight.base_code or "inf" in weight.base_code))
    if op_glob == "*_mean*":
        return optable.base_name(case.op) in ("std_mean", "var_mean", "native_layer_norm") and any(
            "inf" in t.base_code for t in case.tensors)
    if op_glob == "*std*":
        names = ("std", "var", "std_mean", "var_mean", "native_layer_norm", "native_group_norm", "native_batch_norm")
        return optable.base_name(case.op) in names and any(
            "float32" in t.base_code and re.search(r"\de(19|[2-9]\d)", t.base_code) for t in case.tensors)
    if op_glob == "*div*":  # a non-finite value may also be a scalar
        return (any("complex" in t.base_code for t in case.tensors)
                and any(s in text for text in [case.call] + [t.base_code for t in case.tensors] for s in ("nan", "inf")))
    if op_glob == "*pow*":  # a zero base is log(0) = -inf inside exp(y * log(x))
        complex_operand = any("complex" in t.base_code for t in case.tensors)
        zero_base = re.match(r"\s*(0|0\.0|-0\.0|0j|complex\(0\.0, 0\.0\))\s*,", case.call)  # pow.Scalar(self, exponent)
        return any("complex" in t.base_code and ("nan" in t.base_code or "inf" in t.base_code) for t in case.tensors) or (
            complex_operand and bool(zero_base))
    if op_glob == "*mm*":
        return any("complex" in t.base_code and ("nan" in t.base_code or "inf" in t.base_code) for t in case.tensors)
    if op_glob == "log1p*":
        return any("complex" in t.base_code and "inf" in t.base_code for t in case.tensors)
    return True


def globs(entry):
    """An entry's op globs: one string, or a tuple of them for one limit over several ops."""
    return (entry[0],) if isinstance(entry[0], str) else entry[0]


def known(case, result):
    for entry in KNOWN:
        _, cls, pattern, _reason = entry
        if (result["cls"] == cls and any(fnmatch.fnmatch(case.op, g) for g in globs(entry))
                and re.search(pattern, result["detail"]) and applies(entry, case, result["detail"])):
            return entry
    return None
