"""Counters of the eager engine: ops run, compiles, cache hits, CPU fallbacks, and (with
TORCH_TPU_AOT_CHECK) libtpu's verdicts and estimated TPU time for the ops run."""
from __future__ import annotations

import sys

from . import _C


def counters() -> dict:
    stats = dict(_C._cache_stats())
    stats["fallbacks"] = dict(_C._fallback_counts())
    stats["ops"] = dict(_C._op_counts())
    stats["recompiles"] = dict(_C._recompile_reasons())
    stats["aot"] = dict(_C._aot_check_stats())
    stats["fused"] = dict(_C._fused_stats())
    stats["eager_mode"] = _C._eager_mode()
    return stats


def recompile_reasons() -> dict:
    """{"op: argument i (name): what changed": count} for every compile of an op that already
    had an executable (e.g. "add.Tensor: argument 0 (self): shape [2, 8] -> [2, 9] (dim 1)")."""
    return dict(_C._recompile_reasons())


def fallback_count() -> int:
    return sum(_C._fallback_counts().values())


def compiles() -> dict:
    """Executables the plugin compiled so far: `waited` (a call waited for them) and `background`
    (fused eager's programs compiled on its worker thread while their streams ran op by op,
    docs/eager_modes.md)."""
    background = _C._fused_stats()["background_compiled"]
    return {"waited": _C._cache_stats()["compiles"] - background, "background": background}


def compiles_line(before: dict, after: dict, where: str = "") -> str:
    """"3 executables compiled" or "0 executables compiled (2 fused programs in the background)",
    between two compiles() readings; `where` goes after "compiled"."""
    waited, background = after["waited"] - before["waited"], after["background"] - before["background"]
    note = f" ({background} fused program{'s' if background != 1 else ''} in the background)" if background else ""
    return f"{waited} executables compiled{where}{note}"


def reset() -> None:
    _C._reset_metrics()
    compile_stats = sys.modules.get("torch_tpu.compile.stats")
    if compile_stats is not None:
        compile_stats.reset()


def report() -> str:
    s = counters()
    lines = [
        "torch-tpu metrics",
        f"  lowered ops run        {s['ops_run']} ({s['launches']} executable launches; eager mode "
        f"{s['eager_mode']})",
        f"  distinct signatures    {s['signatures']} loaded (limit {s['signature_limit']}, "
        f"{s['signature_evictions']} evicted)",
        f"  compiles               {s['compiles']} ({s['compile_time_s']:.2f} s)",
        f"  executable cache hits  memory {s['memory_hits']}, disk {s['disk_hits']} "
        f"(disk writes {s['disk_writes']}, damaged entries recompiled {s['disk_corrupt']}, "
        f"dir {s['cache_dir'] or 'disabled'})",
        f"  host->device bytes     {s['host_to_device_bytes']}",
        f"  device->host bytes     {s['device_to_host_bytes']}",
        f"  CPU fallbacks          {sum(s['fallbacks'].values())}",
    ]
    for op, n in sorted(s["fallbacks"].items(), key=lambda kv: -kv[1]):
        lines.append(f"    {op:<40} {n}")
    recompiles = s["recompiles"]
    if recompiles:
        lines.append(f"  recompiles             {sum(recompiles.values())} (an op compiled again; top reasons)")
        for reason, n in sorted(recompiles.items(), key=lambda kv: -kv[1])[:10]:
            lines.append(f"    {n:>5}  {reason}")
    lines += fused_lines(s["fused"])
    lines += bucket_lines(_C._bucket_stats(), _C._bucket_decisions())
    compile_stats = sys.modules.get("torch_tpu.compile.stats")  # loaded only once torch.compile ran
    if compile_stats is not None:
        lines += compile_stats.report_lines()
    lines += aot_lines(s["aot"])
    top = sorted(s["ops"].items(), key=lambda kv: -kv[1])[:15]
    if top:
        lines.append("  most run ops")
        for op, n in top:
            lines.append(f"    {op:<40} {n}")
    return "\n".join(lines)


def fused_lines(f: dict) -> list:
    """The fused eager section of report(); empty when nothing ran fused."""
    if not f["programs_run"] and not f["op_by_op_runs"]:
        return []
    per = f["ops_recorded"] / max(f["programs_run"], 1)
    lines = [
        f"  fused eager programs   {f['programs_run']} run, {f['ops_recorded']} ops ({per:.1f} per program), "
        f"{f['assembled']} assembled, {f['compiles']} of them compiled ({f['compile_time_s']:.2f} s, "
        f"{f['background_compiles']} in the background), {f['cache_hits']} cache hits, "
        f"{f['dropped_results']} dead intermediates not written",
    ]
    if f["op_by_op_runs"]:
        lines.append(f"    run op by op while not compiled: {f['op_by_op_runs']} streams, {f['op_by_op_ops']} ops, "
                     f"{f['op_by_op_compiles']} strict plans built")
    if f["background_failures"]:
        lines.append(f"    programs the plugin rejected (their streams run op by op): {f['background_failures']}")
    reasons = ", ".join(f"{r} {n}" for r, n in sorted(f["flush_reasons"].items(), key=lambda kv: -kv[1]))
    lines.append(f"    flushed at: {reasons}")
    if f["ran_strict"]:
        top = sorted(f["ran_strict"].items(), key=lambda kv: -kv[1])[:5]
        lines.append("    calls run strict (not recorded; each cuts the stream): "
                     + ", ".join(f"{what} {n}" for what, n in top))
    return lines


def buckets() -> dict:
    """Per bucket capacity: ops run over it, the compiles they caused, and the padding's share of
    the rows they computed (docs/bucketing.md)."""
    return {c: dict(b, padding=1 - b["rows"] / b["capacity_rows"]) for c, b in _C._bucket_stats().items()}


def bucket_lines(stats: dict, decisions: dict) -> list:
    if not stats:
        return []
    lines = ["  bucketed ops (run over a capacity, the length a runtime size)"]
    for capacity, b in sorted(stats.items()):
        padding = 1 - b["rows"] / b["capacity_rows"]
        lines.append(f"    capacity {capacity:<6} {b['calls']} calls, {b['compiles']} compiles, "
                     f"padding {padding:.0%} of the rows computed")
    lines.append(f"    result shapes decided by meta kernels {decisions['decided']} times, "
                 f"reused {decisions['reused']} times (the same call at another length)")
    return lines


def aot_lines(a: dict) -> list:
    """The AOT check section of report(); empty when TORCH_TPU_AOT_CHECK is off."""
    if not a["topology"]:
        return []
    chip = a["topology"].split(":")[0]
    if a["error"]:
        return [f"  AOT check              unavailable: {a['error']}"]
    lines = [
        f"  AOT check {a['topology']:<12} libtpu accepted {a['accepted']}, rejected "
        f"{a['rejected']} modules ({a['compile_seconds']:.2f} s compiling)",
    ]
    for label, message in sorted(a["rejections"].items()):
        lines.append(f"    rejected {label:<31} {message[:160]}")
    if a["ops_run"]:
        peak = ""
        if a["peak_flops"] > 0:
            peak = (f"; roofline bound {a['roofline_seconds'] * 1e3:.4f} ms at "
                    f"{a['peak_flops'] / 1e12:.0f} TFLOP/s bf16 and "
                    f"{a['peak_bytes_per_second'] / 1e9:.0f} GB/s")
        lines.append(
            f"  estimated {chip} time for the ops run: {a['estimated_seconds'] * 1e3:.4f} ms "
            f"(flops {a['flops']:.3g}, bytes {a['bytes']:.3g}{peak})")
        top = sorted(a["by_op"].items(), key=lambda kv: -kv[1][1])[:10]
        if top:
            lines.append(f"    where the {chip} time goes (launches, estimate or roofline bound)")
            for op, (launches, seconds) in top:
                lines.append(f"      {op:<40} {launches:>7} {seconds * 1e3:10.4f} ms")
        missing = a["ops_run"] - a["ops_estimated"]
        if missing:
            lines.append(f"    {missing} of {a['ops_run']} ops have no libtpu estimate "
                         "(rejected, or optimal_seconds < 0)")
    return lines
