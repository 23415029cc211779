"""libtpu's v6e estimate for forms of an interleaved rotary embedding (Qwen-Image's
`apply_rotary_emb_qwen`, pairs (x[2i], x[2i+1]) rotated as complex numbers), compiled with
torch.compile(backend="tpu") and the AOT check, on one q tensor of Qwen-Image 1024x1024
([1, 4096, 24, 128] bfloat16). docs/diffusers.md ("Where the time goes") cites the table.

    .venv/bin/python tools/rotary_forms.py [FORM ...]

Each row: libtpu's estimate, its bytes accessed, the bytes that cross HBM in its optimized
module (tools/hbm_traffic.py), and whether the form gives PyTorch's complex product on the CPU
(bfloat16's default tolerance, infinities and NaN in the same places; checked before each row). The pair swap is what costs: a TPU tiles the
two minor dims by (8, 128), so a [..., 64, 2] array is laid out transposed, through HBM.
"""
import os
import sys
import tempfile

os.environ.setdefault("TORCH_TPU_QUIET", "1")
os.environ.setdefault("TORCH_TPU_CACHE_DIR", tempfile.mkdtemp(prefix="rotary_forms_"))
os.environ.setdefault("TORCH_TPU_AOT_CHECK", "v6e:1x1")
DUMP = tempfile.mkdtemp(prefix="rotary_forms_dump_")
os.environ["XLA_FLAGS"] = f"--xla_dump_to={DUMP} --xla_dump_hlo_as_text"

import torch  # noqa: E402
import torch._dynamo  # noqa: E402

import torch_tpu  # noqa: E402,F401
from torch_tpu.compile import stats  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hbm_traffic import hbm_traffic, libtpu_dumps  # noqa: E402

S, H, D = 4096, 24, 128


def inputs():
    torch.manual_seed(0)
    x = torch.randn(1, S, H, D, dtype=torch.bfloat16)
    angle = torch.randn(S, D // 2)
    lane = torch.arange(D)
    cos = angle.cos().repeat_interleave(2, -1)  # [S, D]: each pair's cosine twice
    sin_signed = angle.sin().repeat_interleave(2, -1) * torch.where(lane % 2 == 0, -1.0, 1.0)
    swap = torch.zeros(D, D)  # the pair swap as a permutation matrix
    swap[lane ^ 1, lane] = 1
    return dict(x=x, freqs=torch.polar(torch.ones_like(angle), angle), cos=cos, sin_signed=sin_signed,
                even=lane % 2 == 0, swap=swap)


def complex_form(a):  # diffusers' own (use_real=False)
    z = torch.view_as_complex(a["x"].float().reshape(1, S, H, D // 2, 2))
    return torch.view_as_real(z * a["freqs"].unsqueeze(1)).flatten(3).type_as(a["x"])


def rotate(a, swapped):
    return (a["x"].float() * a["cos"][:, None] + swapped * a["sin_signed"][:, None]).to(a["x"].dtype)


FORMS = {
    "complex": ("diffusers' complex product (what the pipeline runs)", True, complex_form),
    "flip": ("pairs as [..., 64, 2], flipped", True,
             lambda a: rotate(a, a["x"].float().unflatten(-1, (-1, 2)).flip(-1).flatten(-2))),
    "roll": ("lane rolls by +-1, picked per lane", True,
             lambda a: rotate(a, torch.where(a["even"], a["x"].float().roll(-1, -1), a["x"].float().roll(1, -1)))),
    "strided": ("strided lane slices, then stacked", True,
                lambda a: rotate(a, torch.stack([a["x"].float()[..., 1::2], a["x"].float()[..., 0::2]], -1).flatten(-2))),
    "product": ("the swap as a product with a permutation matrix", False,
                lambda a: rotate(a, a["x"].float() @ a["swap"])),
    "no swap": ("no swap at all (not a rotation: the floor of an elementwise pass)", False,
                lambda a: rotate(a, a["x"].float())),
}


def estimate(fn, a):
    before = libtpu_dumps(DUMP)
    torch._dynamo.reset()
    stats.executables.clear()
    compiled = torch.compile(lambda d: fn(d), backend="tpu", fullgraph=True, dynamic=False)
    compiled({k: v.to("tpu") for k, v in a.items()}).cpu()
    found = [e.last_aot() for e in stats.executables if e.last_aot() and e.runs]
    if not found or not all(f["accepted"] for f in found):
        raise RuntimeError(f"libtpu did not accept the graph: {found}")
    hbm = sum(hbm_traffic(open(p).read())["hbm"] for p in libtpu_dumps(DUMP) - before)
    return sum(f["optimal_seconds"] for f in found), sum(f["bytes_accessed"] for f in found), hbm


def exact_on_cpu(fn, a):
    """Whether `fn` gives the complex product on PyTorch CPU within bfloat16's default tolerance
    (PyTorch's own complex product rounds differently from `a c - b d` in 58 of 12.6M elements),
    with infinities and NaN where it has them."""
    special = dict(a)
    x = a["x"].clone()
    x[0, :4, 0, :8] = torch.tensor([float("inf"), 1.0, -0.0, float("nan"), 2.0, -float("inf"), 0.0, -0.0])
    special["x"] = x
    want, got = complex_form(special), fn(special)
    try:
        torch.testing.assert_close(got, want, equal_nan=True)
    except AssertionError:
        return False
    return torch.equal(want.isnan(), got.isnan()) and torch.equal(want.isinf(), got.isinf())


def main(names):
    a = inputs()
    print(f"Rotary embedding of one [1, {S}, {H}, {D}] bfloat16 tensor on v6e:1x1 (libtpu's estimate)\n")
    print("| form | exact | v6e estimate | bytes accessed | HBM traffic |")
    print("|---|---|---|---|---|")
    for name in names or FORMS:
        what, exact, fn = FORMS[name]
        if exact != exact_on_cpu(fn, a):
            raise AssertionError(f"{name}: exactness on PyTorch CPU is not {exact}")
        seconds, accessed, hbm = estimate(fn, a)
        print(f"| {name}: {what} | {'yes' if exact else 'no'} | {seconds * 1e6:.1f} us | "
              f"{accessed / 1e6:.0f} MB | {hbm / 1e6:.0f} MB |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
