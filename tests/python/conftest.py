import json
import os

os.environ.setdefault("TORCH_TPU_QUIET", "1")

import pytest
import torch
import torch_tpu  # noqa: F401  (autoload also imports it; explicit for clarity)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "strict_eager: the test counts strict eager's per-op executables or launches; it runs in "
        "the strict mode whatever TORCH_TPU_EAGER_MODE says (the suite also runs in the fused mode)")


@pytest.fixture(autouse=True)
def _strict_eager_for_marked_tests(request, monkeypatch):
    if request.node.get_closest_marker("strict_eager") is None or torch.tpu.get_eager_mode() == "strict":
        yield
        return
    monkeypatch.setenv("TORCH_TPU_EAGER_MODE", "strict")  # and the processes the test starts
    with torch.tpu.eager_mode("strict"):
        yield


@pytest.fixture
def no_fallbacks():
    """Asserts that the test body ran without any CPU fallback."""
    before = dict(torch_tpu._C._fallback_counts_since_start())  # metrics.reset() cannot hide one
    yield
    after = dict(torch_tpu._C._fallback_counts_since_start())
    new = {op: n - before.get(op, 0) for op, n in after.items() if n != before.get(op, 0)}
    assert not new, f"ops fell back to the CPU: {new}"


# With TORCH_TPU_AOT_CHECK=<topology> (as `make test` sets when libtpu is installed), every
# module the suite compiles is also compiled by libtpu for that TPU topology: print the counts,
# and fail the run for a rejection that docs/tpu_aot.md does not explain.
def _aot_stats():
    if not os.environ.get("TORCH_TPU_AOT_CHECK"):
        return None
    return torch_tpu._C._aot_check_stats()


def _undocumented_rejections(stats):
    from pathlib import Path
    docs = (Path(__file__).resolve().parents[2] / "docs" / "tpu_aot.md").read_text()
    return {op: msg for op, msg in stats["rejections"].items() if f"`{op}`" not in docs}


# Under pytest-xdist (`make test` runs the op-level suites on every core) each worker process
# runs part of the suite: it hands its counts to the controller, which prints and checks the sum.
def _this_process_counts():
    stats = _aot_stats()
    aot = None
    if stats is not None:
        aot = {k: stats[k] for k in ("topology", "accepted", "rejected")}
        aot["rejections"] = dict(stats["rejections"])
    return {"rules_used": sorted(torch_tpu._C._rules_used()), "aot": aot}


_worker_counts = []  # on the xdist controller: one entry per finished worker


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    counts = getattr(node, "workeroutput", {}).get("torch_tpu_counts")
    if counts is not None:
        _worker_counts.append(json.loads(counts))


def _run_counts(config):
    """This run's counts: this process's, or on an xdist controller the sum of its workers'."""
    if not _worker_counts or hasattr(config, "workerinput"):
        return _this_process_counts()
    ran, aot = set(), None
    for counts in _worker_counts:
        ran.update(counts["rules_used"])
        if counts["aot"] is not None:
            if aot is None:
                aot = {"topology": counts["aot"]["topology"], "accepted": 0, "rejected": 0, "rejections": {}}
            aot["accepted"] += counts["aot"]["accepted"]
            aot["rejected"] += counts["aot"]["rejected"]
            aot["rejections"].update(counts["aot"]["rejections"])
    return {"rules_used": sorted(ran), "aot": aot}


def pytest_terminal_summary(terminalreporter, config):
    counts = _run_counts(config)
    # Which lowering rules this run executed (so the AOT counts below cover them too).
    ran = set(counts["rules_used"])
    rules = set(torch_tpu._C._lowering_rules())
    unexercised = sorted(rules - ran)
    terminalreporter.write_line(f"lowering rules executed in this run: {len(rules & ran)} of {len(rules)}"
                                + (f" (not executed: {', '.join(unexercised)})" if 0 < len(unexercised) <= 60 else ""))
    stats = counts["aot"]
    if stats is None:
        return
    terminalreporter.write_line(
        f"AOT check {stats['topology']}: libtpu accepted {stats['accepted']}, "
        f"rejected {stats['rejected']} modules of this test run")
    for op, msg in sorted(stats["rejections"].items()):
        terminalreporter.write_line(f"  rejected {op}: {msg}")


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workeroutput"):  # an xdist worker: the controller checks the sum
        session.config.workeroutput["torch_tpu_counts"] = json.dumps(_this_process_counts())
        return
    stats = _run_counts(session.config)["aot"]
    if stats is not None and _undocumented_rejections(stats):
        session.exitstatus = 1
