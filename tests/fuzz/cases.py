"""A fuzz case from (seed, index): an op from the table and arguments built from its schema.

A case is data (JSON-able): the op, the tensor specs (code lines) and the call's argument code.
Everything is drawn from `random.Random(f"{seed}:{index}")`, so a case is reproducible alone."""
import random

from . import optable
from .tensors import ALL_DTYPES, FLOAT_DTYPES, make_tensor, pick_dtype

SIZES = [1, 2, 3, 5, 7, 1, 2, 4]
INDEX_NAMES = {"index", "indices", "target", "offs"}
MASK_NAMES = {"mask"}
STR_CHOICES = {
    "rounding_mode": [None, "trunc", "floor"],
    "approximate": ["none", "tanh"],
    "reduce": ["sum", "prod", "mean", "amax", "amin", "add", "multiply"],
    "side": ["left", "right"],
    "interpolation": ["linear", "nearest"],
    "padding_mode": ["zeros"],
}


class Case:
    def __init__(self, seed, index, op, tensors, call, notes=""):
        self.seed, self.index, self.op, self.tensors, self.call, self.notes = seed, index, op, tensors, call, notes

    def to_json(self):
        return {"seed": self.seed, "index": self.index, "op": self.op,
                "tensors": [t.to_json() for t in self.tensors], "call": self.call}

    @property
    def call_code(self):
        name, overload = optable.split(self.op)
        return f"torch.ops.aten.{name}.{overload}({self.call})"


class _Builder:
    """Per-case state: the main shape and dtype, the tensors made so far, the symbol sizes."""

    def __init__(self, rng, op, plain=False):
        self.rng, self.op, self.plain = rng, op, plain
        self.dtype = "float32" if plain else pick_dtype(rng)
        nd = rng.choices([0, 1, 2, 3, 4], weights=[1, 3, 4, 3, 1])[0]
        self.shape = [self.size() for _ in range(nd)]
        self.tensors = []
        self.symbols = {}
        self.hints = optable.SHAPE_HINTS.get(optable.base_name(op), {})
        self.first = None  # shape of the first tensor argument

    def size(self):
        return 0 if self.rng.random() < 0.04 else self.rng.choice(SIZES)

    def sym(self, letter):
        if letter not in self.symbols:
            self.symbols[letter] = self.rng.choice([1, 2, 3, 4, 5, 8]) if letter in "hwpq" else self.size()
        return self.symbols[letter]

    def new_name(self):
        return f"t{len(self.tensors)}"

    def shape_for(self, argname):
        rng = self.rng
        if argname in self.hints and rng.random() < 0.9:
            return [self.sym(c) for c in self.hints[argname]]
        if self.first is None or rng.random() < 0.6:
            return list(self.shape)
        # Broadcasting: drop leading dims and/or set dims to 1; sometimes incompatible.
        s = list(self.shape)
        if s and rng.random() < 0.4:
            s = s[rng.randint(1, len(s)):]
        s = [1 if rng.random() < 0.3 else d for d in s]
        if s and rng.random() < 0.05:
            s[rng.randrange(len(s))] += 1
        return s

    def tensor(self, argname, write=False):
        rng = self.rng
        name = self.new_name()
        shape = self.shape_for(argname)
        if argname in INDEX_NAMES:
            dtype = "int64" if rng.random() < 0.9 else "int32"
            bound = max(self.shape) if self.shape else 1
            if argname in ("target",):
                bound = self.symbols.get("c", bound)
            if argname == "indices" and "n" in self.symbols:
                bound = self.symbols["n"]
            t = make_tensor(rng, name, shape, dtype, index_bound=bound, allow_overlap=True)
        else:
            if argname in MASK_NAMES:
                dtype = "bool"
            elif rng.random() < 0.85 or write or self.plain:
                dtype = self.dtype
            else:
                dtype = rng.choice(ALL_DTYPES)
            t = make_tensor(rng, name, shape, dtype, allow_overlap=not write, plain=self.plain)
        self.tensors.append(t)
        if self.first is None:
            self.first = shape
        return name

    def out_tensor(self, argname):
        """An out= tensor: empty (PyTorch resizes it), or the first input's shape as a view."""
        rng = self.rng
        name = self.new_name()
        if argname in ("indices", "max_values", "min_indices") or argname.endswith("indices"):
            dtype = "int64"
        else:
            dtype = self.dtype if rng.random() < 0.8 or self.plain else rng.choice(ALL_DTYPES)
        if rng.random() < 0.5 or self.first is None:
            t = make_tensor(rng, name, [0], dtype, contiguous=True)
        else:
            t = make_tensor(rng, name, list(self.first), dtype, allow_overlap=False, plain=self.plain)
        self.tensors.append(t)
        return name

    @property
    def ndim(self):
        return len(self.first) if self.first is not None else len(self.shape)

    def dim(self):
        nd = max(self.ndim, 1)
        if self.rng.random() < 0.04:
            return nd
        return self.rng.randint(-nd, nd - 1)

    def dims(self):
        nd = self.ndim
        ds = [d for d in range(nd) if self.rng.random() < 0.5]
        return [d - nd if self.rng.random() < 0.4 else d for d in ds]

    def scalar(self, finite=False):
        rng = self.rng
        r = rng.random() * (0.9 if finite else 1.0)
        if r < 0.4:
            return str(rng.randint(-3, 4))
        if r < 0.85:
            return repr(round(rng.gauss(0, 2), 3))
        if r < 0.9:
            return rng.choice(["True", "False"])
        if r < 0.95 and self.dtype == "complex64":
            return "complex(0.5, -1.5)"
        return rng.choice(["nan", "inf", "-inf", "-0.0"])

    def value(self, arg, t: str):
        """Code for one argument of schema type string `t`."""
        rng, name = self.rng, arg.name
        write = arg.alias_info is not None and arg.alias_info.is_write
        if t.startswith("Optional["):
            inner = t[len("Optional["):-1]
            if rng.random() < (0.5 if arg.has_default_value() else 0.3):
                return "None"
            return self.value(arg, inner)
        # ScalarType, MemoryFormat and Layout arguments have schema type `int`.
        if name == "dtype" and t == "int":
            return f"torch.{rng.choice(ALL_DTYPES)}"
        if name.endswith("_dtype") and t == "int":  # _softmax_backward_data's input_dtype
            return f"torch.{rng.choice(FLOAT_DTYPES)}"
        if name == "memory_format" and t == "int":
            return rng.choice(["torch.contiguous_format", "torch.preserve_format", "torch.channels_last"])
        if name == "layout" and t == "int":
            return "torch.strided"
        if t == "Tensor":
            if write and arg.kwarg_only:
                return self.out_tensor(name)
            return self.tensor(name, write=write)
        if t in ("List[Tensor]", "List[Optional[Tensor]]"):
            n = rng.randint(1, 3)
            if t == "List[Optional[Tensor]]":  # index / index_put indices
                return "[" + ", ".join("None" if rng.random() < 0.2 else self.tensor("index") for _ in range(n)) + "]"
            if name == "state_steps":
                return "[" + ", ".join(self._step() for _ in range(self._list_len(n))) + "]"
            return "[" + ", ".join(self.tensor(name, write=write) for _ in range(self._list_len(n))) + "]"
        if t in ("int", "SymInt"):
            return str(self.int_value(name))
        if t in ("List[int]", "List[SymInt]"):
            return str(self.int_list(name))
        if t == "bool":
            return rng.choice(["True", "False"])
        if t == "float":
            return self.float_value(name)
        if t == "number":
            # alpha/beta scale a BLAS product: CPU folds a non-finite factor into the GEMM, where
            # inf * 0 gives NaN in places an unfused product does not; not a difference to chase.
            return self.scalar(finite=name in ("alpha", "beta"))
        if t == "List[number]" or t == "List[float]":
            return "[" + ", ".join(self.scalar() for _ in range(self._list_len(2))) + "]"
        if t == "str":
            choices = STR_CHOICES.get(name)
            if not choices:
                raise Unsupported(f"str argument {name}")
            return repr(rng.choice([c for c in choices if c is not None] or choices))
        if t == "ScalarType":
            return f"torch.{rng.choice(ALL_DTYPES)}"
        if t == "Device" and self.plain:
            return "dev"  # factories build on the device under test (execute.py defines dev)
        if t in ("Layout", "Device", "MemoryFormat", "Generator"):
            if arg.has_default_value():
                return "None"
            raise Unsupported(t)
        raise Unsupported(t)

    def _list_len(self, n):
        # Lists of tensors (foreach ops, fused optimizers) use one length per case.
        if "list_len" not in self.symbols:
            self.symbols["list_len"] = n
        return self.symbols["list_len"]

    def _step(self):
        name = self.new_name()
        from .tensors import TensorSpec
        self.tensors.append(TensorSpec(name, f"torch.tensor({self.rng.randint(1, 5)}.0)", ""))
        return name

    def int_value(self, name):
        rng = self.rng
        if name in ("dim", "dim0", "dim1", "dim2"):
            return self.dim()
        if name == "k":
            return rng.randint(0, max(self.first or [1]) if self.first else 1)
        if name in ("diagonal", "offset"):
            return rng.randint(-2, 2)
        if name == "groups":
            return rng.choice([1, 1, 1, 2])
        if name in ("steps", "n", "m", "num_samples", "size"):
            return rng.choice([0, 1, 2, 5])
        if name in ("start", "end", "step"):
            return rng.randint(-2, 4) if name != "step" else rng.choice([1, 2, 3, -1])
        if name == "reduction":
            return rng.choice([0, 1, 2])
        if name == "ignore_index":
            return rng.choice([-100, 0, 1])
        if name in ("num_groups", "group"):
            return rng.choice([1, 2, 3])
        if name in ("N", "C", "HxW"):
            return rng.choice([1, 2, 4])
        return rng.randint(-2, 4)

    def int_list(self, name):
        rng = self.rng
        if name in ("dim", "dims"):
            return self.dims()
        if name == "kernel_size":
            return rng.choice([[1, 1], [2, 2], [3, 3], [2, 1]])
        if name in ("stride", "dilation"):
            return rng.choice([[1, 1], [2, 2], [1, 2], []]) if name == "stride" else rng.choice([[1, 1], [2, 1]])
        if name in ("padding", "output_padding"):
            return rng.choice([[0, 0], [1, 1], [0, 1]])
        if name == "pad":
            return [rng.randint(-1, 2) for _ in range(2 * rng.randint(1, max(self.ndim, 1)))]
        if name in ("output_size", "input_size", "size"):
            return [rng.choice([1, 2, 3, 4, 6]) for _ in range(2 if "output" in name else self.ndim)]
        if name in ("normalized_shape",):
            return [self.symbols.get("k", 1)]
        if name in ("shifts",):
            return [rng.randint(-3, 3) for _ in range(rng.randint(1, 2))]
        if name == "repeats":
            return [rng.randint(0, 3) for _ in range(self.ndim + rng.randint(0, 1))]
        return [rng.randint(0, 3) for _ in range(rng.randint(0, 3))]

    def float_value(self, name):
        rng = self.rng
        if name in ("p", "eps", "momentum", "lr", "beta1", "beta2", "weight_decay", "negative_slope"):
            return repr(rng.choice([0.0, 0.001, 0.1, 0.5, 0.9]))
        return repr(round(rng.gauss(0, 2), 3)) if rng.random() < 0.9 else rng.choice(["nan", "inf", "-inf"])


class Unsupported(Exception):
    """The schema has an argument type the generator does not build."""


def build_call(b: _Builder, sch):
    pos, kw = [], []
    args = list(sch.arguments)
    # Trailing defaulted positional args may be left out.
    positional = [a for a in args if not a.kwarg_only]
    keep = len(positional)
    while keep > 0 and positional[keep - 1].has_default_value() and b.rng.random() < 0.4:
        keep -= 1
    for a in positional[:keep]:
        pos.append(b.value(a, str(a.type)))
    for a in args:
        if not a.kwarg_only:
            continue
        if a.has_default_value() and not (a.alias_info and a.alias_info.is_write) and b.rng.random() < 0.4:
            continue
        kw.append(f"{a.name}={b.value(a, str(a.type))}")
    return ", ".join(pos + kw)


def make_case(seed: int, index: int, ops=None, plain=False) -> Case:
    """`plain`: float32 contiguous inputs without special values (tools/gen_op_coverage.py)."""
    rng = random.Random(f"{seed}:{index}")
    families = optable.families(tuple(ops or optable.fuzzable_ops()))
    names = sorted(families)
    for _ in range(20):
        # A family (`add`: add.Tensor, add.out, add_.Tensor) first, then one of its overloads: the
        # ~45 _foreach families would otherwise be 40% of the cases.
        op = rng.choice(families[rng.choice(names)])
        b = _Builder(rng, op, plain)
        try:
            call = build_call(b, optable.schema(op))
        except Unsupported:
            continue
        return Case(seed, index, op, b.tensors, call)
    raise RuntimeError("no buildable op drawn")


def case_from_json(d) -> Case:
    from .tensors import TensorSpec
    return Case(d["seed"], d["index"], d["op"], [TensorSpec(*t) for t in d["tensors"]], d["call"])
