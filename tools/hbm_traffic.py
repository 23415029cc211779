"""HBM bytes a libtpu-compiled module moves, read from libtpu's optimized HLO dump.

    XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_text" TORCH_TPU_AOT_CHECK=v6e:1x1 python script.py
    python tools/hbm_traffic.py [--top N] DIR/module_NNNN.*.after_optimizations.txt

(--top N: the N instructions with the largest roofline time of their own HBM bytes and matmul
flops.)

libtpu's cost analysis (`bytes_accessed`, the AOT check's roofline) sums every instruction's
operands and results in every memory space. After memory-space assignment a weight is moved
from HBM into VMEM by DMAs (`copy-start`, async `slice-start` of pieces) and the pieces are put
side by side (`ConcatBitcast`, no data moves): the analysis counts the DMA's whole source once
per piece, the ConcatBitcast as a copy and the product's read from VMEM again, so a decode step
reads its weights 3-4 times in that figure. This tool counts what crosses HBM instead: operands
and results in the default memory space (layouts without `S(n)`), each DMA at the bytes it
moves, a ConcatBitcast at nothing, and a table that is only indexed (an operand whose one use is
the source of a `dynamic-slice` or `gather`, an embedding lookup) at the bytes the lookup reads.
"""
import glob
import os
import re
import sys
from collections import Counter

PEAK_FLOPS, PEAK_BYTES = 918e12, 1.638e12  # v6e: bf16 matmul, HBM (benchmarks/roofline.py)
ELEMENT_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4,
                 "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
# Instructions that move no data of their own (the matching *-done of a DMA included).
NO_TRAFFIC = {"parameter", "bitcast", "get-tuple-element", "tuple", "constant", "copy-done", "async-done",
              "after-all", "partition-id", "replica-id"}
INSTRUCTION = re.compile(r"\s+(?:ROOT )?%([\w.\-]+) = (\(.*?\)|\S+) ([\w\-]+)\((.*?)\)(?:, |$)")
ARRAY = re.compile(r"(\w+)\[([^\]]*)\](\{[^}]*\})?")


def _arrays(shape):
    """(bytes, in HBM) of each array in a shape string such as "f32[2,3]{1,0:T(8,128)S(1)}"."""
    out = []
    for dtype, dims, layout in ARRAY.findall(shape):
        if dtype not in ELEMENT_BYTES:
            continue
        n = ELEMENT_BYTES[dtype]
        for d in dims.split(","):
            if d.strip():
                n *= int(d)
        out.append((n, "S(" not in (layout or "")))
    return out


def _hbm_bytes(shape):
    return sum(n for n, in_hbm in _arrays(shape) if in_hbm)


COMPUTATION = re.compile(r"^%([\w.\-]+) \(.*\) -> .* \{$")
PARAMETERS = re.compile(r"([\w.\-]+): (\w+\[[^\]]*\](?:\{[^}]*\})?)")  # "name: shape" in a computation's header
LOOKUPS = ("dynamic-slice", "gather")


def _indexed_parameters(bodies):
    """{computation: {parameter number: bytes read}} for the parameters of fused computations
    whose one use is the source (operand 0) of a dynamic-slice or gather: an embedding lookup
    reads its rows, not the table."""
    found = {}
    for name, body in bodies.items():
        params = {p: int(operands) for p, _, op, operands, _ in body if op == "parameter"}
        for _, shape, op, operands, _ in body:
            source = re.findall(r"%([\w.\-]+)", operands)[:1] if op in LOOKUPS else []
            if source and source[0] in params and sum(f"%{source[0]}" in line for *_, line in body) == 2:
                found.setdefault(name, {})[params[source[0]]] = sum(n for n, _ in _arrays(shape))
    return found


def _dims(shape):
    m = re.match(r"\w+\[([^\]]*)\]", shape)
    return [int(d) for d in m.group(1).split(",") if d.strip()] if m else []


def _window_taps(line, labels, lhs, rhs, out):
    """The kernel taps per output element that land on input, averaged over the outputs and
    multiplied over the spatial dims (libtpu writes some matmuls as convolutions whose window
    walks padding, and batched products as base-dilated convolutions)."""
    window = re.search(r"window=\{([^}]*)\}", line)
    fields = dict(f.split("=") for f in window.group(1).split()) if window else {}

    def field(name, n, default):
        return [int(x) for x in re.split(r"[x_]", fields[name])] if name in fields else [default] * n

    lhs_labels, rhs_labels, out_labels = labels
    spatial = [c for c in rhs_labels if c.isdigit()]
    n = len(spatial)
    sizes, strides, dilations = field("size", n, 1), field("stride", n, 1), field("rhs_dilate", n, 1)
    holes, pads = field("lhs_dilate", n, 1), field("pad", 2 * n, 0)
    average = 1.0
    for i, d in enumerate(spatial):
        size_in, size_out = lhs[lhs_labels.index(d)], out[out_labels.index(d)]
        if not size_out:
            return 0.0
        extent = (size_in - 1) * holes[i] + 1  # the input with lhs_dilate's holes between elements
        pairs = 0
        for w in range(sizes[i]):
            # outputs o whose tap x = o * stride + w * dilation - pad_low is an input element
            offset = w * dilations[i] - pads[2 * i]
            if holes[i] == 1:
                first = max(0, -(-(-offset) // strides[i]))
                last = min(size_out, -(-(extent - offset) // strides[i]))
                pairs += max(0, last - first)
            else:  # libtpu's batched products: lhs_dilate = stride + 1, one tap per output
                pairs += sum(1 for o in range(size_out)
                             if 0 <= o * strides[i] + offset < extent and (o * strides[i] + offset) % holes[i] == 0)
        average *= pairs / size_out
    return average


def _product_flops(op, shape, operands, line, shapes):
    """2 * multiply-adds of a dot or convolution (libtpu emits a matmul as a convolution with
    dim_labels such as bf_oi->bf, sometimes with a window over padding only), else 0."""
    names = re.findall(r"%([\w.\-]+)", operands)
    if op not in ("dot", "convolution") or len(names) < 2:
        return 0
    lhs, rhs, out = _dims(shapes.get(names[0], "")), _dims(shapes.get(names[1], "")), _dims(shape)
    n = 1
    for d in out:
        n *= d
    if op == "dot":
        contracted = 1
        dims = re.search(r"lhs_contracting_dims=\{([^}]*)\}", line)
        for d in (dims.group(1).split(",") if dims else []):
            contracted *= lhs[int(d)]
        return 2 * n * contracted
    labels = re.search(r"dim_labels=(\w+)_(\w+)->(\w+)", line)
    if not labels or not lhs or "f" not in labels.group(1):
        return 0
    groups = re.search(r"feature_group_count=(\d+)", line)
    features = lhs[labels.group(1).index("f")] // (int(groups.group(1)) if groups else 1)
    return round(2 * n * features * _window_taps(line, labels.groups(), lhs, rhs, out))


def _computations(lines):
    """{computation: [(name, shape, op, operands, line)]} and every instruction's shape."""
    bodies, shapes, name = {}, {}, None
    for line in lines:
        header = COMPUTATION.match(line)
        if header or line.startswith("ENTRY"):
            name = header.group(1) if header else "ENTRY"
            bodies[name] = []
            shapes.update(PARAMETERS.findall(line))
            continue
        m = INSTRUCTION.match(line)
        if m and name:
            shapes[m.group(1)] = m.group(2)
            bodies[name].append((*m.groups(), line))
    return bodies, shapes


def instruction_traffic(module_text):
    """[(name, kind, bytes that cross HBM, matmul flops)] for each instruction of the ENTRY
    computation of an optimized module that moves data (see the module docstring for what is
    counted); a fusion's flops are those of the dots and convolutions it calls."""
    bodies, shapes = _computations(module_text.split("\n"))
    indexed = _indexed_parameters({name: body for name, body in bodies.items() if name != "ENTRY"})

    def flops_in(computation):
        total = 0
        for _, shape, op, operands, line in bodies.get(computation, []):
            total += _product_flops(op, shape, operands, line, shapes)
            if op in ("fusion", "call"):
                total += sum(flops_in(c) for c in re.findall(r"calls=%([\w.\-]+)", line))
        return total

    rows = []
    for name, shape, op, operands, line in bodies["ENTRY"]:
        if op in NO_TRAFFIC or 'custom_call_target="ConcatBitcast"' in line:
            continue
        target = re.search(r'custom_call_target="([^"]+)"', line)
        kind = f"{op}:{target.group(1)}" if target else op
        if op in ("copy-start", "async-start"):
            # Result tuple: (source, destination, context); the destination's bytes move.
            arrays = _arrays(shape)
            rows.append((name, "dma", arrays[1][0] if len(arrays) >= 2 else 0, 0))
            continue
        names = re.findall(r"%([\w.\-]+)", operands)
        called = re.search(r"calls=%([\w.\-]+)", line)
        lookups = indexed.get(called.group(1), {}) if called and op == "fusion" else {}
        if op in LOOKUPS:
            lookups = {0: sum(n for n, _ in _arrays(shape))}
        moved = sum(min(lookups[i], _hbm_bytes(shapes.get(o, ""))) if i in lookups else
                    _hbm_bytes(shapes.get(o, "")) for i, o in enumerate(names)) + _hbm_bytes(shape)
        flops = _product_flops(op, shape, operands, line, shapes) + (flops_in(called.group(1)) if called else 0)
        rows.append((name, kind, moved, flops))
    return rows


def hbm_traffic(module_text):
    """{"parameters": bytes of @main's parameters, "hbm": bytes that cross HBM, "by_kind": {...}}
    for the ENTRY computation of an optimized module."""
    entry_line = next(line for line in module_text.split("\n") if line.startswith("ENTRY"))
    parameters = sum(n for _, s in PARAMETERS.findall(entry_line) for n, _ in _arrays(s))
    by_kind = Counter()
    for _, kind, moved, _ in instruction_traffic(module_text):
        by_kind[kind.split(":")[0]] += moved
    return {"parameters": parameters, "hbm": sum(by_kind.values()), "by_kind": dict(by_kind)}


def libtpu_dumps(dump_dir):
    """Paths of libtpu's optimized modules in an XLA_FLAGS=--xla_dump_to directory (the CPU
    plugin's dumps, which have no tpu_comp_env file, left out)."""
    tpu = {os.path.basename(f).split(".")[0] for f in glob.glob(os.path.join(dump_dir, "*tpu_comp_env.txt"))}
    return {f for f in glob.glob(os.path.join(dump_dir, "*.after_optimizations.txt"))
            if os.path.basename(f).split(".")[0] in tpu}


def main(args):
    top = 0
    if args[:1] == ["--top"]:
        top, args = int(args[1]), args[2:]
    for path in args:
        text = open(path).read()
        t = hbm_traffic(text)
        kinds = ", ".join(f"{k} {v / 1e6:.1f}" for k, v in sorted(t["by_kind"].items(), key=lambda kv: -kv[1])[:5])
        print(f"{path}: parameters {t['parameters'] / 1e6:.1f} MB, HBM traffic {t['hbm'] / 1e6:.1f} MB ({kinds})")
        if top:
            # Each instruction at its own roofline: a ranking of where HBM bytes and matmul flops
            # go, not libtpu's estimate (which also charges on-chip traffic).
            rows = sorted(instruction_traffic(text), key=lambda r: -max(r[3] / PEAK_FLOPS, r[2] / PEAK_BYTES))
            total = sum(max(r[3] / PEAK_FLOPS, r[2] / PEAK_BYTES) for r in rows)
            print(f"  {len(rows)} instructions, {sum(r[3] for r in rows) / 1e9:.1f} GFLOP on the matrix unit, "
                  f"their bounds sum to {total * 1e6:.1f} us")
            print(f"  {'bound us':>9} {'HBM MB':>9} {'GFLOP':>8}  instruction")
            for name, kind, moved, flops in rows[:top]:
                bound = max(flops / PEAK_FLOPS, moved / PEAK_BYTES)
                print(f"  {bound * 1e6:>9.1f} {moved / 1e6:>9.1f} {flops / 1e9:>8.1f}  {name} ({kind})")


if __name__ == "__main__":
    main(sys.argv[1:])
