"""Whether a graph traced at a true size and at its bucket's capacity is exact over the
capacity (bucketed_graphs.py): the two AOTAutograd traces compared node by node.

A dim that is L + k in one trace and C + k in the other holds padding past its L + k true rows;
every op that touches such a dim must stay exact whatever the spare rows hold (XLA's dynamic
padder masks them in reductions and contractions once the dim carries its runtime size), or be
one of the forms rewritten for the bucket (an append after the true rows, rows read from the
true end, a fold into a matrix product's rows). Anything else raises NotBucketable with the
node and the reason.
"""
import operator

import torch
import torch.fx

from .. import _C
from . import graph_spec as _spec


class NotBucketable(Exception):
    """Why a graph runs per shape instead of per bucket."""


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
        operands = [self.dims_of(a) for a in _spec.flat_values(list(c.args) + list(c.kwargs.values()))
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
