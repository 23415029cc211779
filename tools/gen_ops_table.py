"""Prints docs/supported_ops.md from the lowering table and the kernels registered from it."""
import sys

import torch
import torch_tpu
from torch_tpu import _C


def table() -> str:
    rules = _C._lowering_rules()
    registered = _C._register_kernels()
    by_rule = {rule: [] for rule in rules}
    for op in registered:
        by_rule.setdefault(_C._rule_for(op), []).append(op)
    lines = [
        "# Supported ops",
        "",
        "Generated from the lowering table by `make docs` (tools/gen_ops_table.py); a test keeps",
        f"it current. {len(rules)} lowering rules serve {len(registered)} ATen operators",
        "(functional, in-place and out= variants), run by the generic eager kernel. Every other",
        "op runs on the CPU fallback, counted in `torch_tpu.metrics.report()`. Explicit kernels",
        "(allocation, views, copies, `nonzero`, `masked_select`, `_unique2`) are not listed.",
        "",
        "| lowering rule | ATen operators it serves |",
        "|---|---|",
    ]
    graph_only = [r for r in sorted(by_rule) if _C._is_graph_only_rule(r)]
    for rule in sorted(by_rule):
        if rule in graph_only:
            continue
        ops = ", ".join(f"`{op}`" for op in sorted(by_rule[rule])) or "(used by other rules)"
        lines.append(f"| `{rule}` | {ops} |")
    lines += [
        "",
        "## Graph-only rules",
        "",
        "Used by `torch.compile(backend=\"tpu\")` graphs only (docs/compile.md): view ops, which eager",
        "mode runs as storage views without a module, and factories, which eager mode runs as",
        "PyTorch's own kernels over the lowered `fill_`/`arange.out` rules.",
        "",
        ", ".join(f"`{r}`" for r in graph_only),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(table())
