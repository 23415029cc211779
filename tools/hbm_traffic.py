"""HBM bytes a libtpu-compiled module moves, read from libtpu's optimized HLO dump.

    XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_text" TORCH_TPU_AOT_CHECK=v6e:1x1 python script.py
    python tools/hbm_traffic.py DIR/module_NNNN.*.after_optimizations.txt

libtpu's cost analysis (`bytes_accessed`, the AOT check's roofline) sums every instruction's
operands and results in every memory space. After memory-space assignment a weight is moved
from HBM into VMEM by DMAs (`copy-start`, async `slice-start` of pieces) and the pieces are put
side by side (`ConcatBitcast`, no data moves): the analysis counts the DMA's whole source once
per piece, the ConcatBitcast as a copy and the product's read from VMEM again, so a decode step
reads its weights 3-4 times in that figure. This tool counts what crosses HBM instead: operands
and results in the default memory space (layouts without `S(n)`), each DMA at the bytes it
moves, a ConcatBitcast at nothing. It over-counts gathers (the whole table, not the rows read).
"""
import re
import sys
from collections import Counter

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


def hbm_traffic(module_text):
    """{"parameters": bytes of @main's parameters, "hbm": bytes that cross HBM, "by_kind": {...}}
    for the ENTRY computation of an optimized module."""
    lines = module_text.split("\n")
    entry = next(i for i, line in enumerate(lines) if line.startswith("ENTRY"))
    shapes = {}
    for name, shape in re.findall(r"([\w.\-]+): (\w+\[[^\]]*\](?:\{[^}]*\})?)", lines[entry]):
        shapes[name] = shape
    parameters = sum(n for s in shapes.values() for n, _ in _arrays(s))
    by_kind = Counter()
    for line in lines[entry + 1:]:
        m = INSTRUCTION.match(line)
        if not m:
            continue
        name, shape, op, operands = m.groups()
        shapes[name] = shape
        if op in NO_TRAFFIC or 'custom_call_target="ConcatBitcast"' in line:
            continue
        if op in ("copy-start", "async-start"):
            # Result tuple: (source, destination, context); the destination's bytes move.
            arrays = _arrays(shape)
            if len(arrays) >= 2:
                by_kind["dma"] += arrays[1][0]
            continue
        names = re.findall(r"%([\w.\-]+)", operands)
        by_kind[op] += sum(_hbm_bytes(shapes.get(o, "")) for o in names) + _hbm_bytes(shape)
    return {"parameters": parameters, "hbm": sum(by_kind.values()), "by_kind": dict(by_kind)}


def main(paths):
    for path in paths:
        t = hbm_traffic(open(path).read())
        kinds = ", ".join(f"{k} {v / 1e6:.1f}" for k, v in sorted(t["by_kind"].items(), key=lambda kv: -kv[1])[:5])
        print(f"{path}: parameters {t['parameters'] / 1e6:.1f} MB, HBM traffic {t['hbm'] / 1e6:.1f} MB ({kinds})")


if __name__ == "__main__":
    main(sys.argv[1:])
