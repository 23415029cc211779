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


def schema(op: str):
    return packet(op)._schema


def is_random(op: str) -> bool:
    return base_name(op) in RANDOM_OPS or split(op)[0] in RANDOM_OPS
