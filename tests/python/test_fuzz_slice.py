"""A fast seeded slice of the differential fuzzer (tests/fuzz), and tests of the fuzzer itself.

The slice fails on any crash, hang, silent mismatch, dtype/shape mismatch or tpu-only raise that
tests/fuzz/known_limits.py does not list. Rerun a failing case alone with
`python -m tests.fuzz.show SEED INDEX`; `make fuzz` runs the long version."""
import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.fuzz import classify, execute, known_limits, report, runner  # noqa: E402
from tests.fuzz.cases import Case, make_case  # noqa: E402
from tests.fuzz.tensors import TensorSpec  # noqa: E402

SLICE_SEED = 0
SLICE_CASES = 300


def test_fuzz_slice():
    results = runner.run_cases(SLICE_SEED, range(SLICE_CASES), timeout=60)
    bad, _known = report.triage(SLICE_SEED, results)
    lines = [f"{case.op} [{res['cls']}] seed={case.seed} index={case.index}: {res['detail'][:160]}"
             for case, res in bad]
    assert not bad, (f"{len(bad)} fuzz failures (python -m tests.fuzz.show {SLICE_SEED} INDEX prints a repro):\n"
                     + "\n".join(lines))


# --- the fuzzer itself --------------------------------------------------------------------------

def _case(op, call, *tensors):
    return Case(0, 0, op, [TensorSpec(*t) for t in tensors], call)


ADD = _case("add.Tensor", "t0, t1",
            ("t0", "torch.tensor([1.0, -2.0, nan, 4.0]).reshape(2, 2)", ".t()"),
            ("t1", "torch.tensor([0.5, inf])", ""))


def test_agreeing_case_is_ok():
    assert execute.run_case(ADD)["cls"] == classify.OK


def _perturbed(transform):
    def compare(cpu, tpu, *args, **kwargs):
        return classify.compare(cpu, transform(tpu), *args, **kwargs)
    return compare


def test_wrong_values_are_a_mismatch():
    res = execute.run_case(ADD, compare=_perturbed(lambda t: t + 1e-3 if isinstance(t, torch.Tensor) else t))
    assert res["cls"] == classify.MISMATCH, res


def test_wrong_dtype_and_shape_are_reported():
    res = execute.run_case(ADD, compare=_perturbed(lambda t: t.double() if isinstance(t, torch.Tensor) else t))
    assert res["cls"] == classify.DTYPE, res
    res = execute.run_case(ADD, compare=_perturbed(lambda t: t[:1] if isinstance(t, torch.Tensor) else t))
    assert res["cls"] == classify.SHAPE, res


def test_nan_sign_and_negative_zero_compare_equal_but_nan_vs_number_does_not():
    classify.compare(torch.tensor([float("nan"), 0.0]), torch.tensor([-float("nan"), -0.0]))
    with pytest.raises(classify.Difference):
        classify.compare(torch.tensor([float("nan")]), torch.tensor([0.0]))


def test_raises_on_both_sides_are_agreement():
    bad_shapes = _case("add.Tensor", "t0, t1", ("t0", "torch.ones(2)", ""), ("t1", "torch.ones(3)", ""))
    assert execute.run_case(bad_shapes)["cls"] == classify.BOTH_RAISE


def test_in_place_writes_through_views_are_compared():
    # add_ into a transposed view: the base after the call is compared, not only the result.
    res = execute.run_case(_case("add_.Tensor", "t0, t1", ("t0", "torch.arange(6.0).reshape(2, 3)", ".t()"),
                                 ("t1", "torch.tensor([1.0, 2.0])", "")))
    assert res["cls"] == classify.OK, res


def test_cases_are_deterministic():
    for i in range(20):
        assert make_case(7, i).to_json() == make_case(7, i).to_json()
    assert [make_case(7, i).op for i in range(20)] != [make_case(8, i).op for i in range(20)]


def test_repro_snippet_runs():
    snippet = report.repro(ADD, {"cls": "ok", "detail": ""})
    exec(compile(snippet, "<repro>", "exec"), {})


def test_crash_and_hang_are_isolated(monkeypatch):
    monkeypatch.setenv("FUZZ_TEST_CRASH_ON", "1")
    monkeypatch.setenv("FUZZ_TEST_HANG_ON", "3")
    results = runner.run_cases(0, range(5), timeout=10)
    assert results[1]["cls"] == classify.CRASH and "signal 6" in results[1]["detail"]
    assert results[3]["cls"] == classify.HANG
    for i in (0, 2, 4):  # the cases after a crash or a hang ran in a fresh worker
        assert results[i]["cls"] not in (classify.CRASH, classify.HANG), results[i]


def test_cpu_reference_crash_is_not_ours(monkeypatch):
    # The CPU half runs in a process of its own: its death is the reference's, and the tpu worker
    # (and later cases) carry on.
    monkeypatch.setenv("FUZZ_TEST_CPU_CRASH_ON", "1")
    results = runner.run_cases(0, range(3), timeout=10)
    assert results[1]["cls"] == classify.CPU_CRASH and "signal 6" in results[1]["detail"], results[1]
    for i in (0, 2):
        assert results[i]["cls"] not in (classify.CRASH, classify.CPU_CRASH), results[i]


def test_cpu_death_after_earlier_cases_is_retried_in_a_fresh_worker(monkeypatch):
    # Memory an earlier case's CPU kernel corrupted can kill a later case's CPU half: that case is
    # rerun in a fresh CPU worker, not blamed on anyone.
    monkeypatch.setenv("FUZZ_TEST_CPU_CRASH_AFTER_OTHERS_ON", "2")
    results = runner.run_cases(0, range(3), timeout=10)
    assert all(r["cls"] not in (classify.CRASH, classify.CPU_CRASH) for r in results.values()), results


def test_cpu_half_round_trips_through_the_pipe_encoding():
    half = execute.cpu_half(_case("conj.default", "t0", ("t0", "torch.tensor([complex(1.0, 2.0)])", "")))
    back = execute.decode(execute.encode(half))
    torch.testing.assert_close(back["out"].resolve_conj(), half["out"].resolve_conj())


def test_known_limits_are_documented():
    limits = (ROOT / "docs" / "limits.md").read_text()
    for entry in known_limits.KNOWN:
        _, cls, _pattern, reason = entry
        assert "docs/limits.md" in reason and cls in classify.FAILING
        for op_glob in known_limits.globs(entry):
            assert op_glob.rstrip("*").split(".")[0].split("_")[-1] in limits or "limits" in reason


def test_unsorted_topk_values_are_compared_as_a_multiset():
    from tests.fuzz import optable
    assert optable.unordered_values("topk.default", "t0, 2, 0, True, False")
    assert not optable.unordered_values("topk.default", "t0, 2, 0, False")
    case = _case("topk.default", "t0, 2, 0, True, False", ("t0", "torch.tensor([1.0, nan, 3.0, 2.0])", ""))
    assert execute.run_case(case)["cls"] == classify.OK
