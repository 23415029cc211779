"""The ops the fuzzer draws from: our registration table, with schemas and a few shape hints."""
import functools

import torch

# Ops whose results are random: run, but only shapes and dtypes are compared.
RANDOM_OPS = {"bernoulli", "bernoulli_", "exponential", "exponential_", "multinomial", "native_dropout",
              "normal", "normal_", "random", "random_", "randperm", "uniform", "uniform_"}

# Ops not fuzzed at all (none today; e.g. ops returning uninitialised memory would go here).
SKIP_OPS = set()



def loose_indices(op: str, call: str) -> bool:
    """topk and an unstable sort may order ties differently: their index output is compared by
    shape and dtype only (max/min.dim document the first index and are compared exactly)."""
    name = base_name(op)
    return name == "topk" or (name == "sort" and "stable=True" not in call)

def unordered_values(op: str, call: str) -> bool:
    """topk with sorted=False returns its k values in no specified order: they are compared as
    a multiset (sorted, flattened)."""
    if base_name(op) != "topk":
        return False
    return "sorted=False" in call or (call.count(",") >= 4 and call.replace(" ", "").endswith(",False"))

# Symbolic shapes for ops whose inputs must agree in shape; letters are drawn per case.
SHAPE_HINTS = {
    "mm": {"self": "nk", "mat2": "km"},
    "bmm": {"self": "bnk", "mat2": "bkm"},
    "addmm": {"self": "nm", "mat1": "nk", "mat2": "km"},
    "baddbmm": {"self": "bnm", "batch1": "bnk", "batch2": "bkm"},
    "mv": {"self": "nk", "vec": "k"},
    "addmv": {"self": "n", "mat": "nk", "vec": "k"},
    "addr": {"self": "nm", "vec1": "n", "vec2": "m"},
    "dot": {"self": "n", "tensor": "n"},
    "vdot": {"self": "n", "other": "n"},
    "convolution": {"input": "bchw", "weight": "ocpq", "bias": "o"},
    "_convolution": {"input": "bchw", "weight": "ocpq", "bias": "o"},
    "avg_pool2d": {"self": "bchw"},
    "max_pool2d_with_indices": {"self": "bchw"},
    "_adaptive_avg_pool2d": {"self": "bchw"},
    "upsample_nearest2d": {"self": "bchw"},
    "upsample_bilinear2d": {"self": "bchw"},
    "_upsample_nearest_exact2d": {"self": "bchw"},
    "native_group_norm": {"input": "bchw", "weight": "c", "bias": "c"},
    "native_layer_norm": {"input": "bnk", "weight": "k", "bias": "k"},
    "_native_batch_norm_legit_no_training": {"input": "bchw", "weight": "c", "bias": "c",
                                             "running_mean": "c", "running_var": "c"},
    "_native_batch_norm_legit": {"input": "bchw", "weight": "c", "bias": "c"},
    "_native_batch_norm_legit_functional": {"input": "bchw", "weight": "c", "bias": "c",
                                            "running_mean": "c", "running_var": "c"},
    "nll_loss_forward": {"self": "bc", "target": "b", "weight": "c"},
    "embedding": {"weight": "nk", "indices": "bm"},
    "linalg_solve_triangular": {"self": "nn", "B": "nk"},
    "_grouped_mm": {"self": "nk", "mat2": "gkm", "offs": "g"},
}


def split(op: str):
    name, _, overload = op.partition(".")
    return name, overload or "default"


def packet(op: str):
    name, overload = split(op)
    return getattr(getattr(torch.ops.aten, name), overload)


def base_name(op: str) -> str:
    """`add_.Tensor` -> `add`, `sum.IntList_out` -> `sum` (the functional family name)."""
    name = split(op)[0]
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


@functools.lru_cache(maxsize=None)
def fuzzable_ops():
    from torch_tpu import _C
    ops = []
    for op in sorted(_C._register_kernels()):
        if base_name(op) in SKIP_OPS:
            continue
        try:
            packet(op)._schema
        except (AttributeError, RuntimeError):
            continue
        ops.append(op)
    return ops


@functools.lru_cache(maxsize=None)
def families(ops: tuple):
    """{family name: [ops]} for `base_name` families."""
    out = {}
    for op in ops:
        out.setdefault(base_name(op), []).append(op)
    return out


# Point-wise kernels PyTorch does not tag `pointwise` (their backwards, fused forms).
UNTAGGED_POINTWISE = {"elu_backward", "hardtanh_backward", "hardswish_backward", "hardsigmoid_backward",
                      "_add_relu", "threshold_backward", "gelu_backward", "silu_backward", "softplus_backward",
                      "leaky_relu_backward", "log_sigmoid_backward", "sigmoid_backward", "tanh_backward",
                      "mish_backward", "softshrink_backward", "hardshrink_backward"}


@functools.lru_cache(maxsize=None)
def is_pointwise(op: str) -> bool:
    """Whether each result element depends only on the same element of every input (after
    broadcasting): PyTorch's `pointwise` tag on any overload of the family, or the list above."""
    name = base_name(op)
    if name in UNTAGGED_POINTWISE or split(op)[0] in UNTAGGED_POINTWISE:
        return True
    family = getattr(torch.ops.aten, split(op)[0], None)
    if family is None:
        return False
    return any(torch.Tag.pointwise in getattr(family, o).tags for o in family.overloads())


def schema(op: str):
    return packet(op)._schema


def is_random(op: str) -> bool:
    return base_name(op) in RANDOM_OPS or split(op)[0] in RANDOM_OPS


# Decompositions whose vectors are unique only up to the sign of each column (docs/limits.md
# 'QR, SVD, symmetric eigendecomposition'): op -> (index of the column-vector output, index of
# the row-vector output or None, index of the values).
SIGN_FREE = {"_linalg_svd": (0, 2, 1), "linalg_svd": (0, 2, 1),
             "_linalg_eigh": (1, None, 0), "linalg_eigh": (1, None, 0)}


def canonical_signs(op: str, out):
    """`out` with each singular/eigen vector's sign fixed (its largest-magnitude entry positive);
    a row-vector output (Vh) takes its column's sign, so U diag(S) Vh is unchanged. Columns past
    the number of values (full_matrices=True) span a complement whose basis is arbitrary when it
    has more than one column: those are zeroed on both sides."""
    spec = SIGN_FREE.get(base_name(op))
    if spec is None or not isinstance(out, (tuple, list)):
        return out
    cols, rows, vals = spec
    out = list(out)
    u = out[cols]
    if not isinstance(u, torch.Tensor) or u.numel() == 0 or u.is_complex() or not u.dtype.is_floating_point:
        return tuple(out)
    u = u.detach().cpu().clone()
    pick = u.abs().nan_to_num(nan=-1.0).argmax(dim=-2, keepdim=True)
    sign = torch.where(u.gather(-2, pick) < 0, -1.0, 1.0).to(u.dtype)  # [..., 1, n]
    u = u * sign
    k = out[vals].shape[-1] if isinstance(out[vals], torch.Tensor) else u.shape[-1]
    if u.shape[-1] - k > 1:
        u[..., k:] = 0
    out[cols] = u
    if rows is not None and isinstance(out[rows], torch.Tensor) and out[rows].numel():
        vh = out[rows].detach().cpu().clone()
        n = min(vh.shape[-2], sign.shape[-1])
        vh[..., :n, :] *= sign[..., 0, :n].unsqueeze(-1)
        if vh.shape[-2] - k > 1:
            vh[..., k:, :] = 0
        out[rows] = vh
    return tuple(out)
