"""Summary tables (by class, by op) and one repro snippet per failing case."""
import collections

from . import classify, known_limits
from .cases import make_case


def repro(case, result) -> str:
    lines = [f"# seed={case.seed} index={case.index} {case.op}: {result['cls']}: {result['detail'][:300]}",
             "import math, torch, torch_tpu",
             "nan, inf = math.nan, math.inf",
             "def run(dev):"]
    lines += [f"    {t.line('dev')}" for t in case.tensors]
    lines += [f"    out = {case.call_code}",
              f"    torch.tpu.synchronize() if dev == 'tpu' else None",
              f"    return out, [{', '.join(t.name + '_base' for t in case.tensors)}]",
              "for dev in ('cpu', 'tpu'):",
              "    try:",
              "        print(dev, run(dev))",
              "    except Exception as e:",
              "        print(dev, 'raised', type(e).__name__, e)"]
    return "\n".join(lines)


def triage(seed, results):
    """(failures not known, known failures): lists of (case, result) for FAILING classes."""
    bad, known = [], []
    for index in sorted(results):
        res = results[index]
        if res["cls"] not in classify.FAILING:
            continue
        case = make_case(seed, index)
        (known if known_limits.known(case, res) else bad).append((case, res))
    return bad, known


def summary(seed, results, *, repros=True, max_repros_per_op_class=2) -> str:
    by_cls = collections.Counter(r["cls"] for r in results.values())
    by_op = collections.defaultdict(collections.Counter)
    cases = {}
    for index in sorted(results):
        res = results[index]
        if res["cls"] in (classify.OK, classify.BOTH_RAISE):
            continue
        case = cases[index] = make_case(seed, index)
        by_op[case.op][res["cls"]] += 1
    out = [f"fuzz: seed {seed}, {len(results)} cases", "", "| class | cases |", "|---|---|"]
    out += [f"| {c} | {by_cls[c]} |" for c in classify.ALL if by_cls[c]]
    out += ["", "| op | " + " | ".join(c for c in classify.ALL[:-2]) + " |",
            "|---|" + "---|" * (len(classify.ALL) - 2)]
    for op in sorted(by_op):
        out.append(f"| {op} | " + " | ".join(str(by_op[op][c] or "") for c in classify.ALL[:-2]) + " |")
    bad, known = triage(seed, results)
    out += ["", f"failing (crash/hang/mismatch/dtype/shape/tpu-only raise): {len(bad)} new, {len(known)} known limits"]
    if repros:
        shown = collections.Counter()
        out += ["", "## repros (failing classes first, at most "
                f"{max_repros_per_op_class} per op and class)"]
        order = {c: i for i, c in enumerate(classify.ALL)}
        for index in sorted(cases, key=lambda i: (order[results[i]["cls"]], cases[i].op, i)):
            res, case = results[index], cases[index]
            if res["cls"] == classify.FALLBACK:
                continue
            key = (case.op, res["cls"])
            shown[key] += 1
            if shown[key] > max_repros_per_op_class:
                continue
            out += ["", "```python", repro(case, res), "```"]
    return "\n".join(out)
