"""Random tensor inputs, each described as code: a CPU base tensor built from a literal, moved to
the device, then a chain of view ops. The same code makes the CPU and the tpu input, so both have
the same values and the same view structure, and it doubles as the repro snippet."""
import math

import torch

FLOAT_DTYPES = ["float32", "bfloat16", "float64", "float16"]
INT_DTYPES = ["int64", "int32", "uint8"]
ALL_DTYPES = FLOAT_DTYPES + INT_DTYPES + ["bool", "complex64"]
# The main dtype of a case: float32 most often.
DTYPE_WEIGHTS = {"float32": 8, "bfloat16": 3, "float64": 2, "float16": 2, "int64": 3, "int32": 2,
                 "uint8": 1, "bool": 1, "complex64": 2}

SPECIALS = ["nan", "-nan", "inf", "-inf", "-0.0", "0.0", "1e30", "-1e-30"]


def pick_dtype(rng):
    names = list(DTYPE_WEIGHTS)
    return rng.choices(names, weights=[DTYPE_WEIGHTS[n] for n in names])[0]


def _float_lit(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(x)


def _value(rng, dtype: str, special_p: float) -> str:
    if dtype == "bool":
        return rng.choice(["True", "False"])
    if dtype == "uint8":
        return str(rng.choice([0, 1, 2, 3, 7, 200, 255]) if rng.random() < 0.2 else rng.randint(0, 9))
    if dtype in INT_DTYPES:
        return str(rng.choice([0, -1, 2**31 - 1, -(2**31)] if dtype == "int32" else [0, -1, 2**40, -(2**62)])
                   if rng.random() < 0.05 else rng.randint(-6, 6))
    if dtype == "complex64":
        re_, im = _value(rng, "float32", special_p), _value(rng, "float32", special_p / 2)
        return f"complex({re_}, {im})"
    if rng.random() < special_p:
        return rng.choice(SPECIALS)
    x = rng.gauss(0, 2) if rng.random() < 0.8 else rng.choice([0.5, -1.0, 1.0, 2.0, 3.0, -2.5, 0.0])
    return _float_lit(round(x, 3))


def literal(rng, shape, dtype: str, special_p: float = 0.1) -> str:
    n = math.prod(shape)
    vals = ", ".join(_value(rng, dtype, special_p) for _ in range(n))
    if len(shape) == 0:
        return f"torch.tensor({vals}, dtype=torch.{dtype})"
    return f"torch.tensor([{vals}], dtype=torch.{dtype}).reshape({', '.join(map(str, shape))})"


def index_literal(rng, shape, dtype: str, bound: int) -> str:
    """Index values mostly in [-bound, bound), a few out of range."""
    n = math.prod(shape)
    lo = -bound if rng.random() < 0.5 else 0
    vals = []
    for _ in range(n):
        if rng.random() < 0.03:
            vals.append(str(rng.choice([bound, -bound - 1, 1000])))
        else:
            vals.append(str(rng.randint(lo, max(bound - 1, lo))))
    if len(shape) == 0:
        return f"torch.tensor({vals[0]}, dtype=torch.{dtype})"
    return f"torch.tensor([{', '.join(vals)}], dtype=torch.{dtype}).reshape({', '.join(map(str, shape))})"


def view_chain(rng, shape, dtype: str, allow_overlap: bool):
    """(base shape, view code) such that `base<code>` has `shape`. Kinds: contiguous, permute, step
    slice, expand, as_strided, unfold, diagonal, transpose; complex tensors may also be conj views."""
    nd = len(shape)
    kinds = ["contig"] * 4 + (["permute", "slice", "as_strided", "diagonal"] if nd >= 1 else [])
    if nd >= 2:
        kinds += ["transpose", "unfold" if allow_overlap else "slice"]
    if allow_overlap and any(s != 1 for s in shape):
        kinds.append("expand")
    kind = rng.choice(kinds)
    base, code = list(shape), ""
    if kind == "permute":
        perm = list(range(nd))
        rng.shuffle(perm)
        base = [0] * nd
        for i, p in enumerate(perm):
            base[p] = shape[i]
        code = f".permute({', '.join(map(str, perm))})"
    elif kind == "transpose":
        base = list(shape)
        base[-1], base[-2] = shape[-2], shape[-1]
        code = ".transpose(-1, -2)"
    elif kind == "slice":
        d = rng.randrange(nd)
        step, off = rng.choice([2, 3]), rng.randint(0, 1)
        base = list(shape)
        base[d] = shape[d] * step + off
        idx = ", ".join([":"] * d + [f"{off}::{step}"])
        code = f"[{idx}]"
    elif kind == "expand":
        base = [s if rng.random() < 0.5 else 1 for s in shape]
        if nd and base == list(shape):
            base[rng.randrange(nd)] = 1
        extra = rng.randint(0, 1) if nd < 4 else 0
        full = list(shape)
        if extra and nd:
            # Expand over a leading dim too: the base has fewer dims (broadcasting).
            base = base[1:]
        code = f".expand({', '.join(map(str, full))})"
    elif kind == "as_strided":
        # A non-overlapping layout with gaps: reversed-order strides times a factor, plus an offset.
        order = list(range(nd))
        rng.shuffle(order)
        strides, acc = [0] * nd, rng.choice([1, 2])
        for d in order:
            strides[d] = acc
            acc *= max(shape[d], 1) + rng.choice([0, 1])
        off = rng.randint(0, 2)
        size = off + (sum((s - 1) * st for s, st in zip(shape, strides)) + 1 if 0 not in shape else 0)
        base = [size]
        code = f".as_strided(({', '.join(map(str, shape))}{',' if nd == 1 else ''}), " \
               f"({', '.join(map(str, strides))}{',' if nd == 1 else ''}), {off})"
    elif kind == "unfold":
        size, step = shape[-1], rng.choice([1, 2])
        length = (shape[0] - 1) * step + size if shape[0] > 0 else 0
        if shape[0] == 0 or size == 0:
            kind, base, code = "contig", list(shape), ""
        else:
            base = [length] + list(shape[1:-1])
            code = f".unfold(0, {size}, {step})"
    elif kind == "diagonal":
        n = shape[-1]
        base = list(shape[:-1]) + [n, n]
        code = ".diagonal(0, -2, -1)"
    if dtype == "complex64" and rng.random() < 0.3:
        code += ".conj()"
    return base, code


class TensorSpec:
    """One tensor argument: `name = <base>.to(dev)<view>`."""

    def __init__(self, name, base_code, view_code):
        self.name, self.base_code, self.view_code = name, base_code, view_code

    def to_json(self):
        return [self.name, self.base_code, self.view_code]

    def line(self, dev="dev"):
        return f"{self.name}_base = {self.base_code}.to({dev}); {self.name} = {self.name}_base{self.view_code}"


def make_tensor(rng, name, shape, dtype, *, index_bound=None, allow_overlap=True, contiguous=False, plain=False):
    if contiguous or plain:
        base, view = list(shape), ""
    else:
        base, view = view_chain(rng, shape, dtype, allow_overlap)
    # A view's values are the base's: build the base's literal.
    if index_bound is not None:
        lit = index_literal(rng, base, dtype, index_bound)
    else:
        lit = literal(rng, base, dtype, special_p=0.0 if plain else rng.choice([0.0, 0.05, 0.2]))
    return TensorSpec(name, lit, view)
