"""Counters of the eager engine: ops run, compiles, cache hits, CPU fallbacks."""
from __future__ import annotations

from . import _C


def counters() -> dict:
    stats = dict(_C._cache_stats())
    stats["fallbacks"] = dict(_C._fallback_counts())
    stats["ops"] = dict(_C._op_counts())
    return stats


def fallback_count() -> int:
    return sum(_C._fallback_counts().values())


def reset() -> None:
    _C._reset_metrics()


def report() -> str:
    s = counters()
    lines = [
        "torch-tpu metrics",
        f"  lowered ops run        {s['ops_run']}",
        f"  distinct signatures    {s['signatures']}",
        f"  compiles               {s['compiles']} ({s['compile_time_s']:.2f} s)",
        f"  executable cache hits  memory {s['memory_hits']}, disk {s['disk_hits']} "
        f"(disk writes {s['disk_writes']}, dir {s['cache_dir'] or 'disabled'})",
        f"  host->device bytes     {s['host_to_device_bytes']}",
        f"  device->host bytes     {s['device_to_host_bytes']}",
        f"  CPU fallbacks          {sum(s['fallbacks'].values())}",
    ]
    for op, n in sorted(s["fallbacks"].items(), key=lambda kv: -kv[1]):
        lines.append(f"    {op:<40} {n}")
    top = sorted(s["ops"].items(), key=lambda kv: -kv[1])[:15]
    if top:
        lines.append("  most run ops")
        for op, n in top:
            lines.append(f"    {op:<40} {n}")
    return "\n".join(lines)
