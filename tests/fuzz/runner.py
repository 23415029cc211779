"""Drives worker subprocesses: one case at a time over a pipe, so a crash (the worker dies) or a
hang (no answer within the timeout) is pinned to exactly one case, recorded, and a fresh worker
continues with the next case."""
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import classify

ROOT = Path(__file__).resolve().parents[2]
# A worker above this resident size is killed and its case recorded as a crash (memory blowup):
# the machine running the fuzzer is shared.
MAX_RSS_GB = float(os.environ.get("FUZZ_MAX_RSS_GB", 3))


class Worker:
    def __init__(self, startup_timeout=120):
        self.errlog = tempfile.TemporaryFile()
        env = dict(os.environ, TORCH_TPU_QUIET="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        # The libtpu AOT pass of `make test` would compile each fuzz module twice, and its counts
        # live in the worker process where conftest.py cannot report them: off in workers.
        env.pop("TORCH_TPU_AOT_CHECK", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fuzz.worker"], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errlog,
                                     start_new_session=True)
        if self._read(startup_timeout) is None:
            raise RuntimeError("fuzz worker did not start: " + self.stderr_tail())

    def rss_gb(self):
        try:
            with open(f"/proc/{self.proc.pid}/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**30
        except (OSError, ValueError):
            return 0.0

    def _read(self, timeout):
        """One JSON line, or None on death/timeout/too much memory (self.dead, self.oom tell)."""
        self.dead = self.oom = False
        deadline = time.time() + timeout
        while True:
            ready, _, _ = select.select([self.proc.stdout], [], [], min(0.5, max(deadline - time.time(), 0)))
            if ready:
                break
            if self.rss_gb() > MAX_RSS_GB:
                self.oom = True
                return None
            if time.time() >= deadline:
                return None
        line = self.proc.stdout.readline()
        if not line:
            self.dead = True
            return None
        return json.loads(line)

    def run(self, seed, index, timeout):
        try:
            self.proc.stdin.write(f"{seed} {index}\n".encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.dead = True
            return None
        return self._read(timeout)

    def stderr_tail(self, n=400):
        self.errlog.seek(0)
        text = self.errlog.read().decode(errors="replace")
        lines = [l for l in text.splitlines()
                 if l.strip() and not any(s in l for s in ("Warning:", "absl", "pjrt_c_api_cpu"))]
        return " | ".join(lines[-3:])[-n:]

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        self.errlog.close()


def cpu_alone_crashes(seed, index, timeout):
    """Whether the case's CPU half, run alone in a fresh process, dies too. PyTorch's CPU kernels
    corrupt memory on some invalid inputs (mis-shaped out= or list arguments of _cummax_helper,
    _fused_adam_, adaptive pooling backward): such a crash is the reference's, not ours."""
    code = ("from tests.fuzz.cases import make_case\nfrom tests.fuzz import execute\n"
            f"try:\n    execute._run(make_case({seed}, {index}), 'cpu')\nexcept Exception:\n    pass\n")
    env = dict(os.environ, TORCH_TPU_QUIET="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TORCH_TPU_AOT_CHECK", None)
    try:
        p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    return p.returncode < 0


def run_cases(seed, indices, *, timeout=60.0, progress=None):
    """{index: result dict}. Results are deterministic for a given seed (timing aside)."""
    results = {}
    worker = None
    t0 = time.time()
    for n, index in enumerate(indices):
        if worker is None:
            worker = Worker()
        res = worker.run(seed, index, timeout)
        if res is None:
            worker.proc.poll()
            if worker.oom:
                res = {"cls": classify.CRASH, "detail": f"worker above {MAX_RSS_GB} GB resident memory (killed)"}
            elif worker.dead or worker.proc.poll() is not None:
                worker.proc.wait()
                code = worker.proc.returncode
                sig = f"signal {-code}" if code and code < 0 else f"exit code {code}"
                res = {"cls": classify.CRASH, "detail": f"worker died ({sig}): {worker.stderr_tail()}"}
                if cpu_alone_crashes(seed, index, timeout):
                    res = {"cls": classify.CPU_CRASH, "detail": f"the CPU run alone dies too ({sig})"}
            else:
                res = {"cls": classify.HANG, "detail": f"no result within {timeout:.0f} s"}
            res["index"] = index
            worker.kill()
            worker = None
        results[index] = res
        if progress and (n + 1) % progress == 0:
            print(f"  {n + 1}/{len(indices)} cases, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    if worker is not None:
        worker.proc.stdin.close()
        worker.kill()
    return results
