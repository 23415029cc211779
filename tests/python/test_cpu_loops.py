"""The ISA-independent CPU references (cpu_loops.py) and the fuzzer's use of them: both loops are
really taken on this host, whatever ATEN_CPU_CAPABILITY says, and only listed ops are excused."""
import re
import sys
from pathlib import Path

import pytest
import torch

import cpu_loops

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.fuzz import classify, execute, known_limits  # noqa: E402
from tests.fuzz.cases import Case  # noqa: E402
from tests.fuzz.tensors import TensorSpec  # noqa: E402

NAN = float("nan")


def elu_backward(g, x):
    return torch.ops.aten.elu_backward(g, 1.0, 1.0, 1.0, False, x)


@pytest.mark.parametrize("n", [1, 3, 30, 65])
def test_both_loops_are_taken_wherever_the_nan_sits(n):
    # elu_backward(NaN): the gradient in the scalar loop, NaN in the vector loop (cpu_loops.py).
    # Ordinary evaluation gives either, by position and ISA; the two references do not.
    x = torch.linspace(-2, 2, n)
    x[n // 2] = NAN
    g = torch.full((n,), 0.5)
    scalar, vector = cpu_loops.scalar_loop(elu_backward, g, x), cpu_loops.vector_loop(elu_backward, g, x)
    assert scalar[n // 2].item() == 0.5 and vector[n // 2].isnan()
    finite = ~x.isnan()
    torch.testing.assert_close(scalar[finite], vector[finite])


def test_either_picks_per_element_and_checks_the_list():
    x = torch.tensor([NAN, 1.0, -1.0])
    g = torch.ones(3)
    scalar, vector = cpu_loops.scalar_loop(elu_backward, g, x), cpu_loops.vector_loop(elu_backward, g, x)
    assert cpu_loops.either(vector, scalar, vector, "elu_backward")[0].isnan()
    assert cpu_loops.either(scalar, scalar, vector, "elu_backward")[0].item() == 1.0
    # A wrong value elsewhere is still compared with the (agreeing) reference.
    wrong = scalar.clone()
    wrong[1] = 7.0
    with pytest.raises(AssertionError):
        torch.testing.assert_close(wrong, cpu_loops.either(wrong, scalar, vector, "elu_backward"), equal_nan=True)
    with pytest.raises(AssertionError, match="do not list"):
        cpu_loops.either(scalar, scalar, vector, "not_a_listed_op")


def test_one_ulp_is_not_a_disagreement():
    a = torch.tensor([1.0, 2.0])
    assert not cpu_loops.disagree(a, a.nextafter(torch.full_like(a, 3.0))).any()
    assert cpu_loops.disagree(torch.tensor([NAN]), torch.tensor([1.0])).all()


def test_limits_doc_lists_every_self_disagreeing_op():
    text = (ROOT / "docs" / "limits.md").read_text()
    section = text[text.index("PyTorch CPU's own scalar and vector loops disagree"):]
    section = section[: section.index("\n- **", 1)]
    for op in cpu_loops.SELF_DISAGREEING:
        assert f"`{op}`" in section, op


def _elu_backward_case(n):
    # A NaN at position 0 of an n-element tensor: in a vector block for n >= 16 on AVX2.
    vals = ", ".join(["nan"] + ["0.5"] * (n - 1))
    return Case(0, 0, "elu_backward.default", [
        TensorSpec("t0", f"torch.tensor([{', '.join(['1.0'] * n)}])", ""),
        TensorSpec("t1", f"torch.tensor([{vals}])", "")], "t0, 1.0, 1.0, 1.0, False, t1")


@pytest.mark.parametrize("n", [3, 64])
def test_fuzzer_accepts_either_loop_for_listed_ops(n):
    case = _elu_backward_case(n)
    cpu = execute.cpu_half(case)
    (scalar, _), (vector, _) = cpu["loops"]
    assert scalar[0].item() == 1.0 and vector[0].isnan()
    tpu = execute._run(case, "tpu")[0]
    same, other = (vector, scalar) if tpu[0].isnan() else (scalar, vector)
    # The ordinary CPU reference is whichever loop the host's ISA put the NaN in: both must pass.
    assert execute.run_case(case, cpu=dict(cpu, out=same))["cls"] == classify.OK
    res = execute.run_case(case, cpu=dict(cpu, out=other))
    assert res["cls"] == classify.MISMATCH and execute.LOOPS_DISAGREE in res["detail"], res
    assert known_limits.known(case, res) is not None


def test_fuzzer_still_reports_a_wrong_value_of_a_listed_op():
    case = _elu_backward_case(64)
    res = execute.run_case(case, compare=lambda c, t, *a, **k: classify.compare(
        c, t + 1e-3 if isinstance(t, torch.Tensor) else t, *a, **k))
    assert res["cls"] == classify.MISMATCH and execute.LOOPS_DISAGREE not in res["detail"], res
    assert known_limits.known(case, res) is None


def test_fuzzer_does_not_excuse_an_unlisted_op():
    case = Case(0, 0, "hardsigmoid.default", [TensorSpec("t0", "torch.tensor([nan, 1.0])", "")], "t0")
    entry = next(e for e in known_limits.KNOWN if e[2] == re.escape(execute.LOOPS_DISAGREE))
    assert not known_limits.applies(entry, case)
