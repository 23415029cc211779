"""PyTorch CPU references for point-wise ops that do not depend on the host's vector ISA.

PyTorch's CPU element-wise kernels run two loops: a vectorized one over blocks of twice the
vector width (AVX-512, AVX2 or the generic `default` build: `ATEN_CPU_CAPABILITY`), and a scalar
one for the tail after the last block and for strided inputs. At NaN, -0.0 and the infinities
some kernels' two loops disagree (elu_backward(NaN) is NaN in the vector loop and the gradient in
the scalar one), so which answer an element gets depends on its position in the tensor and on
the machine: element 0 of a 30-element float32 tensor is in a vector block on an AVX2 host and
in the tail on an AVX-512 host. A reference computed the ordinary way is therefore one machine's
answer, not PyTorch's.

`scalar_loop` and `vector_loop` evaluate a point-wise function both ways on every element
(each element alone, which is all tail; each element repeated in a contiguous block wider than
any vector block), and `either` picks, per element, the one the tpu result is nearer to. Ops whose two loops may
disagree are listed in SELF_DISAGREEING, and docs/limits.md names each with its inputs; a
disagreement of an op not listed fails the test, so the list cannot silently grow."""
import itertools

import torch

# Wider than the widest vector loop block (AVX-512 uint8: 2 x 64 elements), so a tiled element's
# copies all lie in vector blocks.
BLOCK = 128

# Point-wise CPU kernels whose scalar and vector loops give different values, and for which
# inputs. docs/limits.md ("PyTorch CPU's own scalar and vector loops disagree") lists every key.
SELF_DISAGREEING = {
    "elu_backward": "a NaN input (the backward of elu, selu, celu and their in-place forms; float32, "
                    "float64, bfloat16): the scalar loop gives the gradient, the vector loop NaN",
    "hardswish_backward": "a NaN input (float32, float64): the scalar loop gives a gradient, the vector loop NaN",
    "logit_backward": "a NaN input with eps (eps=0.0 too): the scalar loop gives NaN, the vector loop 0; "
                      "-0.0 without eps: the scalar loop gives -inf for a negative grad, the vector loop +inf",
    "hardtanh_backward": "a NaN input: the scalar loop passes the gradient, the vector loop gives 0",
    "_add_relu": "a NaN sum: the scalar loop gives 0, the vector loop NaN",
    "gelu": "+inf (float32, seen on AVX-512 hosts): the scalar loop gives inf, the vector loop NaN",
}


def _map_tensors(args, fn):
    return [fn(a) if isinstance(a, torch.Tensor) else a for a in args]


def _shape_of(xs):
    """The broadcast shape of the tensors of rank > 0 (0-d tensors stay as they are: they take
    part in type promotion as numbers do)."""
    return tuple(torch.broadcast_shapes(*[x.shape for x in xs if isinstance(x, torch.Tensor) and x.dim() > 0]))


def _outputs(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _as_given(outs, like):
    return type(like)(outs) if isinstance(like, (tuple, list)) else outs[0]


def tiled(x):
    """x with each element repeated BLOCK times along a new last dim, contiguous."""
    return x.unsqueeze(-1).expand(x.shape + (BLOCK,)).contiguous()


def strided_copy(x):
    """x's values in storage with a gap after each element. A single kernel reading it runs
    TensorIterator's scalar loop (it has no vector path for strided operands); the fuzzer's
    scalar-loop reference of one aten call (tests/fuzz/execute.py)."""
    out = torch.empty(x.shape + (2,), dtype=x.dtype)[..., 0]
    out.copy_(x)
    return out


def scalar_loop(f, *xs):
    """f evaluated on each element alone (a one-element tensor is all tail: the scalar loop, or a
    kernel's own partial-vector tail), the results put back in place. Intermediates inside f are
    one-element tensors too, so in-place forms and results read by a backward count as well."""
    shape = _shape_of(xs)
    per_element = []
    for index in itertools.product(*map(range, shape)):
        window = tuple(slice(i, i + 1) for i in index)
        alone = _map_tensors(xs, lambda x: x.expand(shape)[window].clone() if x.dim() > 0 else x)
        per_element.append(_outputs(f(*alone)))
    if not per_element:  # an empty input: nothing can disagree
        return f(*xs)
    first = f(*xs)
    stitched = [torch.cat([e[k].reshape(-1) for e in per_element]).reshape(shape) if isinstance(v, torch.Tensor) else v
                for k, v in enumerate(_outputs(first))]
    return _as_given(stitched, first)


def vector_loop(f, *xs):
    """f evaluated on the inputs tiled (each element BLOCK times in a row): every element lies
    in full vector blocks, on any ISA."""
    _shape_of(xs)
    out = f(*_map_tensors(xs, lambda x: tiled(x) if x.dim() > 0 else x))
    return _as_given([o[..., 0] if isinstance(o, torch.Tensor) else o for o in _outputs(out)], out)


# torch.testing.assert_close's default (rtol, atol) per dtype: the loops' rounding differs by
# an ulp or so (the vector loop's exp is not the scalar one's); only larger differences count.
TOLERANCES = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5), torch.float32: (1.3e-6, 1e-5),
              torch.float64: (1e-7, 1e-7)}


def disagree(a, b):
    """Element-wise: a and b differ beyond the dtype's default tolerance, or in NaN-ness."""
    rtol, atol = TOLERANCES[a.dtype]
    return ~torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)


def _distance(a, b):
    """|a - b| in float64: 0 for equal values or two NaNs, inf where only one is NaN."""
    d = (a.to(torch.float64) - b.to(torch.float64)).abs()
    both = (a == b) | (a.isnan() & b.isnan())
    return torch.where(both, 0.0, d.nan_to_num(nan=float("inf")))


def nearer(got, scalar, vector):
    """Per element, `scalar` unless `vector` is strictly nearer to `got` (a tpu result)."""
    g = got.detach().cpu().to(scalar.dtype)
    return torch.where(_distance(g, vector) < _distance(g, scalar), vector, scalar)


def either(got, scalar, vector, op):
    """The reference `got` is compared with: nearer(), after checking that where the two loops
    differ, `op` is in SELF_DISAGREEING."""
    if isinstance(scalar, (tuple, list)):
        return type(scalar)(either(g, s, v, op) for g, s, v in zip(got, scalar, vector))
    if not isinstance(scalar, torch.Tensor) or scalar.dtype not in TOLERANCES:
        return scalar
    differ = disagree(scalar, vector)
    if not bool(differ.any()):
        return scalar
    assert op in SELF_DISAGREEING, (
        f"PyTorch CPU's scalar and vector loops disagree for {op!r}, which tests/python/cpu_loops.py "
        f"SELF_DISAGREEING (and docs/limits.md) do not list: scalar {scalar[differ].tolist()[:4]}, "
        f"vector {vector[differ].tolist()[:4]}")
    return nearer(got, scalar, vector)
