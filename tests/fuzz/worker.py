"""Worker subprocesses, one case at a time over a pipe (runner.py drives them).

`python -m tests.fuzz.worker cpu` reads `seed index` lines and answers each with the case's CPU
half (execute.cpu_half, encoded). `python -m tests.fuzz.worker tpu` reads JSON lines
{seed, index, cpu} (cpu: that encoded CPU half, or null when the CPU run died) and answers with
the classified result. The halves live in separate processes so that memory PyTorch's CPU kernels
corrupt on invalid inputs cannot crash, or change, the tpu half or a later case's CPU half.

The protocol uses a private copy of the original stdout; fd 1 goes to stderr, so whatever the
library prints cannot corrupt it. A segfault or abort kills only this process."""
import gc
import json
import os
import sys


_served = 0


def _test_hooks(index, prefix):
    """Test hooks (tests/python/test_fuzz_slice.py): die or hang on one case index; or die on it
    only after earlier cases, as after memory damage an earlier case left."""
    global _served
    _served += 1
    if os.environ.get(prefix + "CRASH_ON") == str(index):
        os.abort()
    if os.environ.get(prefix + "CRASH_AFTER_OTHERS_ON") == str(index) and _served > 1:
        os.abort()
    if os.environ.get(prefix + "HANG_ON") == str(index):
        import time
        time.sleep(3600)


def _answer_cpu(line):
    from . import execute
    from .cases import make_case
    seed, index = map(int, line.split())
    _test_hooks(index, "FUZZ_TEST_CPU_")
    try:
        return {"index": index, "cpu": execute.encode(execute.cpu_half(make_case(seed, index)))}
    except Exception as e:  # noqa: BLE001 - a harness bug is reported, not fatal
        return {"index": index, "error": f"{type(e).__name__}: {e}"[:300]}


def _answer_tpu(line):
    from . import classify, execute
    from .cases import make_case
    req = json.loads(line)
    index = req["index"]
    _test_hooks(index, "FUZZ_TEST_")
    try:
        case = make_case(req["seed"], index)
        if req.get("cpu") is None:  # the CPU half died: run ours, no reference to compare with
            execute.run_case(case, cpu={"error": ("cpu died", "")})
            res = {"cls": classify.CPU_CRASH, "detail": req.get("cpu_detail", "")}
        else:
            res = execute.run_case(case, cpu=execute.decode(req["cpu"]))
    except Exception as e:  # noqa: BLE001 - a harness bug is reported, not fatal
        res = {"cls": classify.GEN_ERROR, "detail": f"{type(e).__name__}: {e}"[:300]}
    res["index"] = index
    return res


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "tpu"
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    os.environ.setdefault("TORCH_TPU_QUIET", "1")
    import torch_tpu  # noqa: F401  (the op table; the tpu device)
    answer = _answer_cpu if mode == "cpu" else _answer_tpu
    proto.write(json.dumps({"ready": True}) + "\n")
    # A case that corrupts a Python object crashes whichever later case the garbage collector
    # runs in; collecting after every case pins the crash to its case (slower: debugging only).
    collect_each_case = os.environ.get("FUZZ_GC_EACH_CASE") == "1"
    for line in sys.stdin:
        res = answer(line)
        if collect_each_case:
            gc.collect()
        proto.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
