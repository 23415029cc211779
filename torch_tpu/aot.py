"""Ahead-of-time TPU executables, compiled on any x86 host with libtpu (docs/tpu_aot.md).

    python -m torch_tpu.aot --topology v6e:1x1 --out DIR script.py [args]

runs script.py here (on XLA:CPU). Every module it compiles is also compiled by libtpu for the
topology and, when libtpu accepts it, written to DIR in the engine's disk-cache format under
the key a TPU VM with the same libtpu wheel looks up for device 0. On the TPU VM:

    TORCH_TPU_CACHE_DIR=DIR python script.py [args]

starts warm. The same machinery without --out is the AOT check (TORCH_TPU_AOT_CHECK).
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys

from . import _C, _discovery


def configure(topology: str, cache_dir: str = "") -> None:
    """Turns the AOT check on for `topology` ("" turns it off); drops earlier results."""
    _C._aot_configure(topology, _discovery.libtpu_path() or "", cache_dir)


def stats() -> dict:
    """Accepted/rejected modules, rejections, cost analysis, estimated time of the ops run."""
    return dict(_C._aot_check_stats())


def between(before: dict, after: dict) -> dict:
    """libtpu's figures for the ops run between two stats() readings: "seconds" sums its
    estimates, with the roofline bound standing in for modules it does not model (e.g. a compiled
    decode graph; leaving them out would understate the step); "roofline_seconds" sums the
    roofline bounds of all; "ops" and "unmodelled" count the launches; "by_op" maps each op that
    ran to (launches, seconds), the same figures split by op."""
    def delta(key):
        return after[key] - before[key]
    by_op = {}
    for op, (launches, seconds) in after.get("by_op", {}).items():
        was = before.get("by_op", {}).get(op, (0, 0.0))
        if launches > was[0]:
            by_op[op] = (launches - was[0], seconds - was[1])
    return {"seconds": delta("estimated_seconds") + delta("roofline_only_seconds"),
            "roofline_seconds": delta("roofline_seconds") + delta("roofline_only_seconds"),
            "ops": delta("ops_run"), "unmodelled": delta("ops_roofline_only"), "by_op": by_op}


def compile_workload(fn, topology: str = "v6e:1x1", cache_dir: str = "") -> dict:
    """Runs fn() with every module also compiled for `topology` (written to cache_dir if given).

    Forgets the engine's compiled plans first so that every module fn needs is seen; the AOT
    check stays on afterwards (configure("") turns it off).
    """
    import torch

    configure(topology, cache_dir)
    _C._clear_executable_caches()
    fn()
    torch.tpu.synchronize()
    result = stats()
    if result["error"]:
        raise RuntimeError(result["error"])
    return result


def summary(s: dict) -> str:
    return (f"libtpu {s['topology']}: accepted {s['accepted']}, rejected {s['rejected']} "
            f"modules, {s['cache_writes']} executables written to {s['cache_dir'] or '(none)'} "
            f"({s['compile_seconds']:.1f} s compiling)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_tpu.aot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topology", default="v6e:1x1")
    parser.add_argument("--out", required=True, help="cache directory for the TPU VM")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    a = parser.parse_args(argv)
    out = os.path.abspath(a.out)
    configure(a.topology, out)
    sys.argv = [a.script] + a.args
    try:
        runpy.run_path(a.script, run_name="__main__")
    finally:
        import torch

        torch.tpu.synchronize()
        s = stats()
        print(summary(s), file=sys.stderr)
        for label, message in sorted(s["rejections"].items()):
            print(f"  rejected {label}: {message}", file=sys.stderr)
    return 1 if s["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
