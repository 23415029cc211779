import os

os.environ.setdefault("TORCH_TPU_QUIET", "1")

import pytest
import torch
import torch_tpu  # noqa: F401  (autoload also imports it; explicit for clarity)


@pytest.fixture
def no_fallbacks():
    """Asserts that the test body ran without any CPU fallback."""
    before = dict(torch_tpu.metrics.counters()["fallbacks"])
    yield
    after = torch_tpu.metrics.counters()["fallbacks"]
    new = {op: n - before.get(op, 0) for op, n in after.items() if n != before.get(op, 0)}
    assert not new, f"ops fell back to the CPU: {new}"
