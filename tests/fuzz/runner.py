"""Drives the worker subprocesses: a CPU worker computes each case's CPU reference, a tpu worker
runs the tpu half and compares. One case at a time over pipes, so a crash (a worker dies) or a
hang (no answer within the timeout) is pinned to exactly one case and to the half that died,
recorded, and a fresh worker continues with the next case."""
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
# How much of a dead worker's stderr its crash detail keeps (raise both with PYTHONFAULTHANDLER=1).
STDERR_LINES = int(os.environ.get("FUZZ_STDERR_LINES", 3))
STDERR_CHARS = int(os.environ.get("FUZZ_STDERR_CHARS", 400))


class Worker:
    def __init__(self, mode, startup_timeout=120):
        self.mode, self.served = mode, 0
        self.errlog = tempfile.TemporaryFile()
        env = dict(os.environ, TORCH_TPU_QUIET="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        # The libtpu AOT pass of `make test` would compile each fuzz module twice, and its counts
        # live in the worker process where conftest.py cannot report them: off in workers.
        env.pop("TORCH_TPU_AOT_CHECK", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fuzz.worker", mode], cwd=ROOT, env=env,
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

    def run(self, line, timeout):
        self.served += 1
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.dead = True
            return None
        return self._read(timeout)

    def stderr_tail(self, n=STDERR_CHARS):
        self.errlog.seek(0)
        text = self.errlog.read().decode(errors="replace")
        lines = [l for l in text.splitlines()
                 if l.strip() and not any(s in l for s in ("Warning:", "absl", "pjrt_c_api_cpu"))]
        return " | ".join(lines[-STDERR_LINES:])[-n:]

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        self.errlog.close()


def _failure(worker, timeout):
    """Why a worker gave no answer (worker.run returned None)."""
    if worker.oom:
        return f"above {MAX_RSS_GB} GB resident memory (killed)"
    if worker.dead or worker.proc.poll() is not None:
        worker.proc.wait()
        code = worker.proc.returncode
        sig = f"signal {-code}" if code and code < 0 else f"exit code {code}"
        return f"died ({sig}): {worker.stderr_tail()}"
    return f"no result within {timeout:.0f} s"


class Pool:
    """The CPU worker and the tpu worker, restarted after a death or a hang."""

    def __init__(self, seed, timeout):
        self.seed, self.timeout = seed, timeout
        self.cpu = self.tpu = None

    def _ask(self, attr, line):
        """(answer, None) or (None, why there is none); a worker that gave none is replaced."""
        if getattr(self, attr) is None:
            setattr(self, attr, Worker(attr))
        worker = getattr(self, attr)
        res = worker.run(line, self.timeout)
        if res is not None:
            return res, None
        why = _failure(worker, self.timeout)
        worker.kill()
        setattr(self, attr, None)
        return None, why

    def fresh_cpu(self):
        """Restart the CPU worker: the next case's reference comes from a clean process."""
        if self.cpu is not None:
            self.cpu.kill()
            self.cpu = None

    def reference(self, index):
        """(encoded CPU half, None), (None, why the CPU run dies) or a harness error."""
        for attempt in range(2):
            res, why = self._ask("cpu", f"{self.seed} {index}")
            if res is not None:
                return res.get("cpu"), res.get("error")
            if not why.startswith("died"):
                break
            # A death may be damage an earlier case's CPU kernel left: retry once in a fresh worker.
        return None, "the CPU run alone " + why

    def fresh_tpu(self):
        """Restart the tpu worker: a CPU fallback there may have run the kernel that just
        corrupted the CPU worker's memory, and the damage would surface in a later case."""
        if self.tpu is not None:
            self.tpu.kill()
            self.tpu = None

    def case(self, index):
        cpu, why = self.reference(index)
        if cpu is None and why and not why.startswith("the CPU run"):
            return {"cls": classify.GEN_ERROR, "detail": why}
        res = self._tpu_half(index, cpu, why)
        if cpu is None and why:
            self.fresh_tpu()  # the CPU kernel died on this case; the tpu worker may have run it
        return res

    def _tpu_half(self, index, cpu, why):
        res, tpu_why = self._ask("tpu", json.dumps({"seed": self.seed, "index": index, "cpu": cpu,
                                                    "cpu_detail": why}))
        if res is None:
            cls = classify.HANG if tpu_why.startswith("no result") else classify.CRASH
            return {"cls": cls, "detail": "tpu worker " + tpu_why}
        return res

    def close(self):
        for w in (self.cpu, self.tpu):
            if w is not None:
                w.proc.stdin.close()
                w.kill()


def run_cases(seed, indices, *, timeout=60.0, progress=None):
    """{index: result dict}. Results are deterministic for a given seed (timing aside)."""
    results = {}
    pool = Pool(seed, timeout)
    t0 = time.time()
    for n, index in enumerate(indices):
        res = pool.case(index)
        if res["cls"] in classify.FAILING and res["cls"] not in (classify.CRASH, classify.HANG) \
                and pool.cpu is not None and pool.cpu.served > 1:
            # A difference against a CPU worker that ran earlier cases: confirm it against a fresh
            # one, in case an earlier case's CPU kernel damaged that worker's memory.
            pool.fresh_cpu()
            res = pool.case(index)
        res["index"] = index
        results[index] = res
        if progress and (n + 1) % progress == 0:
            print(f"  {n + 1}/{len(indices)} cases, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    pool.close()
    return results
