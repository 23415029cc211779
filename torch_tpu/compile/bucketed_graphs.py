"""Dynamic-shape graphs compiled once per bucket, not once per size (docs/bucketing.md).

A graph whose inputs vary in a size (torch.compile(dynamic=True), torch._dynamo.mark_dynamic,
or Dynamo's automatic dynamic after a shape change) is traced by AOTAutograd twice: at a size L
below the bucket's capacity C and at C itself. Where trace_comparison.py finds the capacity's
graph exact over the padding, it is compiled once for the bucket with each padded dim holding
its true rows at run time (GraphSpec.runtime_dims, XLA's dynamic padder: csrc/hlo/runtime_size.h).
Its inputs are padded prefixes' storages (token ids copied from the host already are one, a KV
cache grown by cat is one) and its outputs become padded prefixes again.

Anything else (independent varying sizes, a mean over the dim, the size used as a value, RNG,
gradients) is refused with its reason and keeps the per-shape path (dynamic_shapes.py), so a
result never changes, only the number of compiles.
"""
import torch
import torch.fx

from .. import _C
from . import stats as _stats
from .graph_spec import flat_values
from .trace_comparison import NotBucketable

# Returned by BucketedGraph.call when the call keeps the per-shape path.
NOT_TAKEN = object()


def input_key(args):
    """What an executable of a graph depends on in its arguments (the per-shape path's key too)."""
    return tuple((tuple(a.shape), tuple(a.stride()), a.dtype, a.device.type, a.requires_grad)
                 if isinstance(a, torch.Tensor) else (type(a).__name__, a) for a in args)


def _free_symbols(size):
    return set(size.node.expr.free_symbols) if isinstance(size, torch.SymInt) else set()


def _offset_from(size, symbol):
    """k when `size` is symbol + k (k an integer), else None."""
    if not isinstance(size, torch.SymInt) or symbol not in size.node.expr.free_symbols:
        return None
    rest = size.node.expr - symbol
    return int(rest) if rest.is_Integer else None


# A graph refused this often keeps the per-shape path without tracing twice more: its refusals
# are structural (an op, a form), and each try costs two traces.
_MAX_REFUSALS = 3

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
                         for out in flat_values(next(n for n in gm.graph.nodes if n.op == "output").args[0])]
        varying = {}
        for symbol in symbols - compound:
            tensor_dims = [(i, d, _offset_from(s, symbol)) for i, v in enumerate(values) if isinstance(v, torch.Tensor)
                           for d, s in enumerate(v.shape) if _offset_from(s, symbol) is not None]
            int_inputs = [(i, _offset_from(v, symbol)) for i, v in enumerate(values)
                          if isinstance(v, torch.SymInt) and _offset_from(v, symbol) is not None]
            # A symbol only ints carry is not a size here (an input's stride is one: it is the
            # bucket's capacity), so it stays specialised per value.
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
        key = (tuple(v.tensor_dims), tuple(v.int_inputs), numbers) + input_key(capacity_args)
        entry = self.compiled.get(key)
        if entry is None:
            if key in self.refused or len(self.refused) >= _MAX_REFUSALS:
                return NOT_TAKEN
            try:
                entry = self._compile(graph(), v, length, capacity, capacity_args)
            except NotBucketable as e:
                self.refused[key] = str(e)
                _stats.note_bucket_refusal(self.label, str(e))
                return NOT_TAKEN
            fn, bucketing = entry
            bucketing.length[0] = length
            try:
                outs = fn(*capacity_args)  # its modules compile on this first run
            except RuntimeError as e:
                # Sizes that only agree at the true size (a size Dynamo kept static next to the
                # bucketed one: a StaticCache's mask bucketed while the ids it is compared with
                # stay exact) fail in a rule's shape check: the per-shape path is exact.
                self.refused[key] = f"the bucket's graph failed: {e}".splitlines()[0]
                _stats.note_bucket_refusal(self.label, self.refused[key])
                return NOT_TAKEN
            self.compiled[key] = entry
            return self._true_outputs(v, outs, length, capacity)
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
