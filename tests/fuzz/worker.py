"""The worker subprocess: reads `seed index` lines, runs each case, answers one JSON line each.

The protocol uses a private copy of the original stdout; fd 1 goes to stderr, so whatever the
library prints cannot corrupt it. A segfault or abort kills only this process (runner.py)."""
import json
import os
import sys


def main():
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    os.environ.setdefault("TORCH_TPU_QUIET", "1")
    import torch_tpu  # noqa: F401
    from . import classify, execute
    from .cases import make_case
    proto.write(json.dumps({"ready": True}) + "\n")
    # Test hooks (tests/python/test_fuzz_slice.py): die or hang on one case index.
    crash_on = os.environ.get("FUZZ_TEST_CRASH_ON")
    hang_on = os.environ.get("FUZZ_TEST_HANG_ON")
    for line in sys.stdin:
        seed, index = map(int, line.split())
        if crash_on is not None and index == int(crash_on):
            os.abort()
        if hang_on is not None and index == int(hang_on):
            import time
            time.sleep(3600)
        try:
            case = make_case(seed, index)
            res = execute.run_case(case)
        except Exception as e:  # noqa: BLE001 - a harness bug is reported, not fatal
            res = {"cls": classify.GEN_ERROR, "detail": f"{type(e).__name__}: {e}"[:300]}
        res["index"] = index
        proto.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
