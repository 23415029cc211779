"""Dynamic-shape graphs compiled once per bucket, not once per size (docs/bucketing.md).

A graph whose inputs vary in one size (torch.compile(dynamic=True), torch._dynamo.mark_dynamic,
or Dynamo's automatic dynamic after a shape change) is traced by AOTAutograd twice: at a size L
below the bucket's capacity C and at C itself. Where the two ATen graphs differ only in dims
that are L in one and C in the other (and in size arguments that say so), and every op that
touches such a dim stays exact when the rows past L are padding (the ops the eager engine
buckets, pointwise ops, views and factories), the capacity's graph is compiled once for the
bucket with each such dim holding L rows at run time (GraphSpec.runtime_dims, XLA's dynamic
padder: csrc/hlo/runtime_size.h). Its inputs are padded prefixes' whole storages (token ids
copied from the host already are one) and its outputs become padded prefixes again.

Anything else (a second varying size, a slice from the end, a mean over the dim, a scan, RNG,
gradients) is refused with its reason and keeps the per-shape path (dynamic_shapes.py), so a
result never changes, only the number of compiles.
"""
import operator

import torch
import torch.fx

from .. import _C
from . import graph_spec as _spec
from . import stats as _stats


class NotBucketable(Exception):
    """Why a graph runs per shape instead of per bucket."""


# Returned by BucketedGraph.call when the call keeps the per-shape path.
NOT_TAKEN = object()


# Where an op's integer arguments are sizes, by argument position: a size that is L + k in the
# true trace may be C + k in the capacity's (a view to [1, L, 8, 64], arange(L), a slice's end).
# Starts, indices and steps must be equal in both traces.
_SIZE_ARGUMENTS = {"view": 1, "_unsafe_view": 1, "reshape": 1, "expand": 1, "slice": 3, "narrow": 3,
                   "arange": 0, "arange.start": 1, "arange.start_step": 1, "full": 0, "zeros": 0, "ones": 0,
                   "empty": 0, "empty.memory_format": 0, "new_zeros": 1, "new_ones": 1, "new_empty": 1,
                   "new_full": 1}

# Ops that move or make values without reading across rows: a padded dim passes through them
# (the two traces' shapes say where it goes).
_LAYOUT_OPS = {"view", "_unsafe_view", "reshape", "expand", "permute", "transpose", "t", "unsqueeze", "squeeze",
               "alias", "detach", "clone", "_to_copy", "lift_fresh_copy", "slice", "select", "arange", "full",
               "zeros", "ones", "empty", "new_zeros", "new_ones", "new_empty", "new_full", "scalar_tensor",
               "zeros_like", "ones_like", "full_like", "empty_like", "copy", "copy_"}


def _base_and_full_name(target):
    base = target._schema.name.split("::", 1)[1]
    overload = target._overloadname
    return base, base if overload == "default" else f"{base}.{overload}"


def _flat(value):
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from _flat(v)
    else:
        yield value


def _arange_of(node):
    """The arange(n) node `node` is, seen through layout ops and additions of 0 (a mask
    function's kv_idx: arange(kv_length) + kv_offset), or None."""
    while isinstance(node, torch.fx.Node) and node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
        base, full = _base_and_full_name(node.target)
        if full == "arange":
            return node
        if full in ("arange.start", "arange.start_step"):
            step = node.args[2] if len(node.args) > 2 else 1
            return node if node.args[0] == 0 and step == 1 else None
        if base == "add" and len(node.args) == 2 and node.args[1] == 0 and not isinstance(node.args[1], bool):
            node = node.args[0]
            continue
        if base not in ("view", "_unsafe_view", "reshape", "expand", "unsqueeze", "alias", "clone", "_to_copy",
                        "permute", "squeeze"):
            return None
        node = node.args[0]
    return None


class _Comparison:
    """The true-size and capacity traces walked side by side: which dims of which values hold
    the padding, or NotBucketable naming the first node where the traces disagree otherwise.
    A padded dim is (dim, offset, multiple): L + offset true rows of C + offset, or with a
    multiple m > 1 a folded dim (see `varies`). A folded value gets no runtime size (XLA's padder
    would compact a reshape of a dynamic dim, which moves rows): it is made from a static
    operand and only row-wise ops (pointwise, a matrix product's rows, views) may read it."""

    def __init__(self, true_graph, capacity_graph, length, capacity):
        self.length, self.capacity = length, capacity
        self.true_nodes = list(true_graph.graph.nodes)
        self.capacity_nodes = list(capacity_graph.graph.nodes)
        self.partner = {}     # true node -> capacity node
        self.padded = {}      # capacity node -> [padded (dim, offset, multiple)] per result
        self.static_operands = set()  # capacity nodes whose operands enter static (scans)
        self.appends = {}     # capacity cat node -> offset of its padded first operand
        self.from_end = {}    # capacity slice/select node -> (dim, offset, rows)

    def varies(self, a, b):
        """(k, m) when a = m * L + k and b = m * C + k, else None. m > 1 is a dim the varying one
        is folded into (a view of [B, L, D] as [B * L, D] for a matrix product): its true rows
        are m runs of L + k among the capacity's rows, not a prefix."""
        m, rest = divmod(b - a, self.capacity - self.length)
        if rest or m < 1 or a <= 0:
            return None
        return a - m * self.length, m

    def padded_dims_of(self, true_val, cap_val, where):
        if not isinstance(true_val, torch.Tensor):
            if true_val != cap_val and not (true_val is None or cap_val is None):
                raise NotBucketable(f"{where}: result {true_val!r} at the true size, {cap_val!r} at the capacity")
            return []
        if true_val.dim() != cap_val.dim():
            raise NotBucketable(f"{where}: rank {true_val.dim()} vs {cap_val.dim()}")
        dims = []
        for d, (a, b) in enumerate(zip(true_val.shape, cap_val.shape)):
            if a == b:
                continue
            km = self.varies(a, b)
            if km is None:
                raise NotBucketable(f"{where}: dim {d} is {a} at the true size and {b} at the capacity "
                                    "(the varying size is mixed into another dim)")
            dims.append((d, *km))
        return dims

    def same_argument(self, a, b, sizes_allowed, where):
        if isinstance(a, torch.fx.Node) or isinstance(b, torch.fx.Node):
            if self.partner.get(a) is not b:
                raise NotBucketable(f"{where}: the traces' dataflow differs")
            return
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            if len(a) != len(b):
                raise NotBucketable(f"{where}: argument lists of different lengths")
            for x, y in zip(a, b):
                self.same_argument(x, y, sizes_allowed, where)
            return
        if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
            for key in a:
                self.same_argument(a[key], b[key], False, where)
            return
        if type(a) is type(b) and (a == b or repr(a) == repr(b)):  # repr: NaN constants
            return
        if sizes_allowed and type(a) is int and type(b) is int and a > 0 and self.varies(a, b) is not None:
            return
        raise NotBucketable(f"{where}: argument {a!r} at the true size is {b!r} at the capacity "
                            "(a value computed from the size, not a size)")

    def run(self):
        if len(self.true_nodes) != len(self.capacity_nodes):
            raise NotBucketable("the traces at the true size and at the capacity differ in length")
        for t, c in zip(self.true_nodes, self.capacity_nodes):
            if t.op != c.op or t.target != c.target:
                raise NotBucketable(f"the traces differ at {t.name} ({t.target} vs {c.target})")
            self.partner[t] = c
            if t.op == "placeholder":
                self.padded[c] = [self.padded_dims_of(t.meta.get("val"), c.meta.get("val"), f"input {t.name}")]
            elif t.op == "call_function":
                self.check_node(t, c)
            elif t.op == "output":
                self.same_argument(t.args, c.args, False, "graph outputs")
            elif t.op != "get_attr":
                raise NotBucketable(f"FX node kind {t.op}")
        return self.padded

    def dims_of(self, arg):
        """Padded (dim, offset)s of a single-result operand."""
        if isinstance(arg, torch.fx.Node) and arg in self.padded and len(self.padded[arg]) == 1:
            return self.padded[arg][0]
        return []

    def check_node(self, t, c):
        where = f"{c.name} ({c.target})"
        if c.target is operator.getitem:
            source, index = c.args
            self.padded[c] = [self.padded[source][index] if index < len(self.padded[source]) else []]
            return
        true_vals, cap_vals = t.meta.get("val"), c.meta.get("val")
        if isinstance(true_vals, (list, tuple)) and len(true_vals) != len(cap_vals):
            raise NotBucketable(f"{where}: {len(true_vals)} results at the true size, {len(cap_vals)} at the capacity")
        pairs = zip(true_vals, cap_vals) if isinstance(true_vals, (list, tuple)) else [(true_vals, cap_vals)]
        results = [self.padded_dims_of(a, b, where) for a, b in pairs]
        self.padded[c] = results
        if not isinstance(c.target, torch._ops.OpOverload):
            self.same_argument((t.args, t.kwargs), (c.args, c.kwargs), False, where)
            if any(results):
                raise NotBucketable(f"{where}: not an ATen op")
            return
        base, full = _base_and_full_name(c.target)
        sizes_at = _SIZE_ARGUMENTS.get(full, None if base == "arange" else _SIZE_ARGUMENTS.get(base))
        if len(t.args) != len(c.args):
            raise NotBucketable(f"{where}: argument counts differ")
        for i, (a, b) in enumerate(zip(t.args, c.args)):
            self.same_argument(a, b, i == sizes_at, where)
        self.same_argument(t.kwargs, c.kwargs, False, where)
        operands = [self.dims_of(a) for a in _flat(list(c.args) + list(c.kwargs.values()))
                    if isinstance(a, torch.fx.Node)]
        if not any(results) and not any(operands):
            return  # nothing padded flows through this node
        if any(m > 1 for dims in results + operands for _, _, m in dims):
            self.check_folded(c, base, results, where)
            return
        self.check_op(c, base, full, results, where)

    def rows_from_end(self, node, base, dim, first, k, where):
        """(dim, offset from the true length, rows) of x[..., -n:] or x[..., -n] along a padded
        dim: read at a runtime start (slice_at_length). Only where every true size in the bucket
        (at least 2 + k rows) has the rows, so PyTorch never clamps the start."""
        if base == "select":
            rows = 1
        else:
            end = node.args[3] if len(node.args) > 3 else None
            if end is None or end >= 2 ** 62:
                rows = -first
            elif first < end < 0:
                rows = end - first
            else:
                raise NotBucketable(f"{where}: a slice from the varying dim's end to {end}")
        if -first > 2 + k:
            raise NotBucketable(f"{where}: indexes the varying dim {-first} rows from its end, more than "
                                "its smallest true size")
        return dim, k + first, rows

    def check_folded(self, node, base, results, where):
        """Ops on values whose varying dim is folded into another: row-wise only."""
        if base in ("view", "_unsafe_view", "reshape"):
            if any(m > 1 for dims in results for _, _, m in dims):
                self.static_operands.add(node)  # fold a static value: the rows keep their places
            return
        if base in ("t", "transpose", "permute", "unsqueeze", "alias", "clone", "_to_copy", "detach", "expand"):
            return
        if torch.Tag.pointwise in node.target.tags and not _spec._is_random(node.target):
            return
        if base in ("mm", "addmm"):
            a, b = node.args[-2], node.args[-1]
            if any(m > 1 and d == 1 for d, _, m in self.dims_of(a)) or any(m > 1 and d == 0 for d, _, m in self.dims_of(b)):
                raise NotBucketable(f"{where}: contracts a dim the varying size is folded into")
            return
        raise NotBucketable(f"{where}: reads across a dim the varying size is folded into")

    def check_op(self, node, base, full, results, where):
        target = node.target
        source = self.dims_of(node.args[0]) if node.args else []
        source_dims = {d for d, *_ in source}
        if _spec._is_random(target):
            raise NotBucketable(f"{where}: draws random numbers (the CPU's stream depends on the true size)")
        if base in ("slice", "select"):
            rank = node.args[0].meta["val"].dim()
            dim = (node.args[1] if len(node.args) > 1 else 0) % rank
            if dim in source_dims:
                if base == "slice" and len(node.args) > 4 and node.args[4] != 1:
                    raise NotBucketable(f"{where}: a strided slice of the varying dim")
                first = node.args[2] if len(node.args) > 2 else 0
                if first is not None and first < 0:
                    self.from_end[node] = self.rows_from_end(node, base, dim, first, dict(
                        (d, k) for d, k, _ in source)[dim], where)
            return
        if base in ("split", "split_with_sizes", "unbind", "chunk"):
            rank = node.args[0].meta["val"].dim()
            dim = (node.args[2 if base in ("split", "split_with_sizes", "chunk") else 1]
                   if len(node.args) > (2 if base != "unbind" else 1) else 0) % rank
            if dim in source_dims:
                raise NotBucketable(f"{where}: splits the varying dim")
            return
        if base in _LAYOUT_OPS:
            if base == "copy_" and source != self.dims_of(node.args[1]):
                raise NotBucketable(f"{where}: copies between values padded differently")
            return
        if base.endswith("_"):
            raise NotBucketable(f"{where}: writes in place")
        if base == "cat":
            # Along the varying dim only the last operand may be padded: its spare rows then
            # come last, after every true row. An append to a padded prefix (a KV cache's cat
            # in a decode step) is written after the true rows instead (cat_at_length).
            tensors = node.args[0]
            rank = max(x.meta["val"].dim() for x in tensors)
            dim = (node.args[1] if len(node.args) > 1 else 0) % rank
            along = [[k for d, k, m in self.dims_of(x) if d == dim and m == 1] for x in tensors]
            if not any(along[:-1]):
                return
            if len(tensors) == 2 and along[0] and not self.dims_of(tensors[1]):
                self.appends[node] = along[0][0]
                return
            raise NotBucketable(f"{where}: concatenates after a padded operand along the varying dim")
        if base == "index" and full == "index.Tensor":
            # Exact where the index along a padded dim counts 0, 1, ... over at most the source's
            # true rows (a mask function's kv_idx): then no true row reads a spare one, and an
            # out-of-range index cannot be missed.
            indices = node.args[1]
            for d, k, _ in source:
                if d >= len(indices) or indices[d] is None:
                    continue
                arange = _arange_of(indices[d])
                counts = self.dims_of(arange) if arange is not None else []
                if len(counts) != 1 or counts[0][1] > k:
                    raise NotBucketable(f"{where}: gathers from the varying dim at indices other than "
                                        "0, 1, ... up to its true size")
            return
        if torch.Tag.pointwise in target.tags:
            return
        kind = _C._bucketing_kind(full)
        if kind in ("exact", "contiguous"):
            return
        if kind == "prefix":  # a scan: exact over the capacity, run on static operands
            self.static_operands.add(node)
            return
        if kind == "keeps_dim" and all(len(r) == len(source) for r in results):
            return
        if kind in ("indices_only", "scatter") and not source:
            return  # a gather of padded indices from rows that are not padded, or a write into them
        raise NotBucketable(f"{where}: not exact over padding along the varying dim"
                            + (" (it reduces a count over it)" if kind == "keeps_dim" else ""))


class Bucketing:
    """What a capacity graph's compile needs (backend.compile_graph): the padded dims
    per node, the nodes whose operands enter static, and a cell holding the call's true length."""

    def __init__(self, padded, static_operands, appends, from_end):
        self.padded = padded
        self.static_operands = static_operands
        self.appends = appends  # cat node -> offset: lowered as cat_at_length
        self.from_end = from_end  # slice/select node -> (dim, offset, rows): slice_at_length
        self.length = [0]


def compare_traces(true_graph, capacity_graph, length, capacity):
    """The Bucketing of the capacity trace; raises NotBucketable."""
    comparison = _Comparison(true_graph, capacity_graph, length, capacity)
    padded = comparison.run()
    return Bucketing(padded, comparison.static_operands, comparison.appends, comparison.from_end)


def _free_symbols(size):
    return set(size.node.expr.free_symbols) if isinstance(size, torch.SymInt) else set()


def _offset_from(size, symbol):
    """k when `size` is symbol + k (k an integer), else None."""
    if not isinstance(size, torch.SymInt) or symbol not in size.node.expr.free_symbols:
        return None
    rest = size.node.expr - symbol
    return int(rest) if rest.is_Integer else None


# Sizes bucketed together may differ by at most this much (a KV cache of T rows and an attention
# mask of T + 1 in a decode step).
_MAX_SPREAD = 16


class _Varying:
    """Where varying sizes appear: tensor input dims (input, dim, k), int inputs (input, k) and
    per output its dims (dim, k), each holding L + k for the call's bucketed size L."""

    def __init__(self, tensor_dims, int_inputs, outputs):
        self.tensor_dims = tensor_dims
        self.int_inputs = int_inputs
        self.outputs = outputs

    def shifted(self, k):
        return _Varying([(i, d, k + j) for i, d, j in self.tensor_dims], [(i, k + j) for i, j in self.int_inputs],
                        [[(d, k + j) for d, j in dims] for dims in self.outputs])


def _dims_by_input(v):
    by_input = {}
    for i, d, k in v.tensor_dims:
        by_input.setdefault(i, []).append((d, k))
    return by_input


class BucketedGraph:
    """The per-bucket path of one dynamic-shape Dynamo graph. dynamic=True makes every dim
    symbolic; the sizes bucketed in a call are the ones padded prefixes carry (token ids from the
    host, torch_tpu.mark_dynamic, a KV cache grown by cat), else the ones seen to change; the
    others are specialised per value as before. Sizes bucketed together (a cache's T and its
    mask's T + 1, which Dynamo keeps apart) are L + k for the largest of them, L. None from
    `for_graph` when no size can be bucketed."""

    @classmethod
    def for_graph(cls, gm, trace, compile_bucket, label):
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        values = [n.meta.get("example_value", n.meta.get("val")) for n in placeholders]
        symbols, compound = set(), set()
        for v in values:
            if isinstance(v, (torch.SymFloat, torch.SymBool)):
                return None
            sizes = list(v.shape) if isinstance(v, torch.Tensor) else [v] if isinstance(v, torch.SymInt) else []
            for s in sizes:
                free = _free_symbols(s)
                if len(free) == 1 and _offset_from(s, next(iter(free))) is not None:
                    symbols |= free  # L or L + k
                else:
                    compound |= free
        output_values = [out.meta.get("example_value", out.meta.get("val")) if isinstance(out, torch.fx.Node) else out
                         for out in _flat(next(n for n in gm.graph.nodes if n.op == "output").args[0])]
        varying = {}
        for symbol in symbols - compound:
            tensor_dims = [(i, d, _offset_from(s, symbol)) for i, v in enumerate(values) if isinstance(v, torch.Tensor)
                           for d, s in enumerate(v.shape) if _offset_from(s, symbol) is not None]
            int_inputs = [(i, _offset_from(v, symbol)) for i, v in enumerate(values)
                          if isinstance(v, torch.SymInt) and _offset_from(v, symbol) is not None]
            outputs, exact = [], bool(tensor_dims)
            for value in output_values:
                if not isinstance(value, torch.Tensor):
                    # A size the graph returns would read the capacity.
                    exact &= not (isinstance(value, torch.SymInt) and symbol in _free_symbols(value))
                    outputs.append([])
                    continue
                dims = [(d, _offset_from(s, symbol)) for d, s in enumerate(value.shape)]
                # A compound size (2 * L) cannot be narrowed back to the true one.
                exact &= all(k is not None for d, k in dims if symbol in _free_symbols(value.shape[d]))
                outputs.append([(d, k) for d, k in dims if k is not None])
            if exact:
                varying[symbol] = _Varying(tensor_dims, int_inputs, outputs)
        return cls(varying, trace, compile_bucket, label) if varying else None

    def __init__(self, varying, trace, compile_bucket, label):
        self.varying = varying
        self.trace = trace
        self.compile_bucket = compile_bucket
        self.label = label
        self.first_values = None
        self.changed = set()  # symbols seen with another value than at the first call
        self.together = {}    # (symbol, offset) pairs -> their merged _Varying
        self.compiled = {}    # key -> (callable, Bucketing)
        self.refused = {}     # key -> reason

    @staticmethod
    def _value(v, args):
        """The symbol's value in this call (its dims hold value + k), None if they disagree."""
        lengths = {args[i].shape[d] - k for i, d, k in v.tensor_dims} | {int(args[i]) - k for i, k in v.int_inputs}
        return lengths.pop() if len(lengths) == 1 else None

    def _choose(self, args):
        """The sizes bucketed in this call as one _Varying, and their largest value L, or
        (None, None)."""
        values = {sym: self._value(v, args) for sym, v in self.varying.items()}
        if self.first_values is None:
            self.first_values = values
        self.changed |= {sym for sym, n in values.items() if n != self.first_values.get(sym)}
        padded = {sym for sym, v in self.varying.items()
                  if any(isinstance(args[i], torch.Tensor) and args[i].device.type == "tpu"
                         and _C._padded_capacity(args[i], d) is not None for i, d, _ in v.tensor_dims)}
        chosen = padded if padded else self.changed
        if padded:  # sizes seen to change next to the padded ones join them (padded by a copy)
            near = [values[sym] for sym in padded if values[sym] is not None]
            chosen = padded | {sym for sym in self.changed if values[sym] is not None and near
                               and max(near) - _MAX_SPREAD <= values[sym] <= min(near) + _MAX_SPREAD}
        sizes = [values[sym] for sym in chosen]
        if not chosen or None in sizes or max(sizes) - min(sizes) > _MAX_SPREAD:
            return None, None
        length = max(sizes)
        shifts = tuple(sorted((str(sym), values[sym] - length) for sym in chosen))
        together = self.together.get(shifts)
        if together is None:
            parts = [self.varying[sym].shifted(values[sym] - length) for sym in sorted(chosen, key=str)]
            outputs = []
            for o in range(len(parts[0].outputs)):
                dims = {}
                for p in parts:
                    dims.update(dict(p.outputs[o]))
                outputs.append(sorted(dims.items()))
            together = self.together[shifts] = _Varying(
                sorted({td for p in parts for td in p.tensor_dims}), sorted({i for p in parts for i in p.int_inputs}),
                outputs)
        return together, length

    @staticmethod
    def _resized(v, args, size, capacity_of_storage):
        """args with each varying size set to `size` + k (at least theirs): tensors widened to
        the first rows of their padded storage, or padded by a copy."""
        out = list(args)
        for i, k in v.int_inputs:
            out[i] = size + k
        for i, dims in _dims_by_input(v).items():
            t = args[i]
            if all(t.shape[d] == size + k for d, k in dims):
                continue
            if len(dims) == 1:
                (d, k), = dims
                capacity = capacity_of_storage(t, d)
                if capacity is not None and capacity >= size + k:
                    out[i] = _C._whole_capacity(t, d, capacity).narrow(d, 0, size + k)
                    continue
            pad = [0] * (2 * t.dim())
            for d, k in dims:
                pad[2 * (t.dim() - 1 - d) + 1] = size + k - t.shape[d]
            out[i] = torch.constant_pad_nd(t, pad, 0)
        return out

    @staticmethod
    def _probe(v, capacity_args, size):
        """Stand-ins for tracing at `size`: fresh tensors (never written, so nothing runs) dense in
        the capacity arguments' memory order, so that both traces take the same paths (a strided
        view would make matmul copy where the capacity's dense input folds)."""
        out = list(capacity_args)
        for i, k in v.int_inputs:
            out[i] = size + k
        for i, dims in _dims_by_input(v).items():
            t = capacity_args[i]
            sizes = dict(dims)
            shape = [size + sizes[d] if d in sizes else n for d, n in enumerate(t.shape)]
            strides = [0] * t.dim()
            step = 1
            for d in sorted(range(t.dim()), key=lambda d: (t.stride(d), t.shape[d])):
                strides[d] = step
                step *= shape[d]
            out[i] = torch.empty_strided(shape, strides, dtype=t.dtype, device=t.device)
        return out

    def _key(self, args):
        return tuple((tuple(a.shape), tuple(a.stride()), a.dtype, a.device.type)
                     if isinstance(a, torch.Tensor) else (type(a).__name__, a) for a in args)

    def call(self, args, numbers=(), graph=None):
        """The outputs of the bucket's graph for `args`, or NOT_TAKEN. `numbers`: the values of
        the graph's .item() reads, `graph()` the Dynamo graph with them in place."""
        if not _C._bucketing_enabled():
            return NOT_TAKEN
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            return NOT_TAKEN  # training graphs keep the per-shape path
        v, length = self._choose(args)
        if v is None or length + min([k for _, _, k in v.tensor_dims] + [k for _, k in v.int_inputs]) < 2:
            return NOT_TAKEN
        capacity = _C._bucket_for(length)
        capacity_args = self._resized(v, args, capacity, lambda t, d: _C._padded_capacity(t, d))
        key = (tuple(v.tensor_dims), tuple(v.int_inputs), numbers) + self._key(capacity_args)
        entry = self.compiled.get(key)
        if entry is None:
            if key in self.refused:
                return NOT_TAKEN
            try:
                entry = self._compile(graph(), v, length, capacity, capacity_args)
            except NotBucketable as e:
                self.refused[key] = str(e)
                _stats.note_bucket_refusal(self.label, str(e))
                return NOT_TAKEN
            self.compiled[key] = entry
        fn, bucketing = entry
        bucketing.length[0] = length
        outs = fn(*capacity_args)
        return self._true_outputs(v, outs, length, capacity)

    def _compile(self, gm, v, length, capacity, capacity_args):
        # The true-size trace must differ from the capacity's: a length that is its bucket's own
        # is compared at the bucket's largest smaller size.
        probe = length if length < capacity else capacity - 1
        smallest = min([k for _, _, k in v.tensor_dims] + [k for _, k in v.int_inputs])
        if probe + smallest < 2 or _C._bucket_for(probe) != capacity:
            raise NotBucketable(f"no smaller size shares the bucket of {capacity}")
        true_graph = self.trace(gm, self._probe(v, capacity_args, probe))
        return self.compile_bucket(gm, capacity_args, true_graph, probe, capacity)

    @staticmethod
    def _true_outputs(v, outs, length, capacity):
        if length == capacity:
            return outs
        flat = list(outs)
        for i, dims in enumerate(v.outputs):
            t = flat[i] if i < len(flat) else None
            if not dims or not isinstance(t, torch.Tensor):
                continue
            whole = (len(dims) == 1 and t.storage_offset() == 0 and t.is_contiguous()
                     and t.untyped_storage().nbytes() == t.numel() * t.element_size())
            if whole and t.device.type == "tpu":
                (d, k), = dims
                flat[i] = _C._as_padded_prefix(t, d, length + k)
            else:
                for d, k in dims:
                    t = t.narrow(d, 0, length + k)
                flat[i] = t
        return type(outs)(flat) if isinstance(outs, tuple) else flat
