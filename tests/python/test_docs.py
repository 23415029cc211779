"""docs/supported_ops.md and docs/op_coverage.md are generated and must be current."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_supported_ops_table_is_current():
    spec = importlib.util.spec_from_file_location("gen_ops_table", ROOT / "tools" / "gen_ops_table.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    committed = (ROOT / "docs" / "supported_ops.md").read_text()
    assert committed == gen.table(), "docs/supported_ops.md is stale: run `make docs`"


def test_op_coverage_table_is_current():
    spec = importlib.util.spec_from_file_location("gen_op_coverage", ROOT / "tools" / "gen_op_coverage.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    committed = (ROOT / "docs" / "op_coverage.md").read_text()
    assert committed == gen.table(), "docs/op_coverage.md is stale: run `make docs`"
