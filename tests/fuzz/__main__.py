"""CLI: python -m tests.fuzz [--cases N] [--seed S] [--start I] [--timeout T] [--json FILE]"""
import argparse
import json
import os
import sys
import time


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    p.add_argument("--cases", type=int, default=int(os.environ.get("FUZZ_CASES", 20000)))
    p.add_argument("--seed", type=int, default=int(os.environ.get("FUZZ_SEED", 0)))
    p.add_argument("--start", type=int, default=0, help="first case index")
    p.add_argument("--timeout", type=float, default=60.0, help="per-case timeout in seconds (hang)")
    p.add_argument("--json", help="also write the raw results here")
    p.add_argument("--no-repros", action="store_true")
    args = p.parse_args(argv)
    os.environ.setdefault("TORCH_TPU_QUIET", "1")
    from . import report, runner
    t0 = time.time()
    results = runner.run_cases(args.seed, range(args.start, args.start + args.cases), timeout=args.timeout,
                               progress=500)
    elapsed = time.time() - t0
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": args.seed, "results": results}, f)
    print(report.summary(args.seed, results, repros=not args.no_repros))
    print(f"\n{args.cases} cases in {elapsed:.0f} s")
    bad, _ = report.triage(args.seed, results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
