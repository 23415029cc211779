"""libtpu's cost analysis counts a weight's bytes several times once memory-space assignment
moves it into VMEM (DMA pieces, ConcatBitcast, the product's VMEM read); tools/hbm_traffic.py
counts what crosses HBM (docs/transformers.md, "Bytes per token"). Checked on a real libtpu
compile of an embedding lookup and a chain of products with 4 MB weights, in a fresh process with libtpu's HLO dumps
written. Skipped when libtpu is not installed."""
import os
import subprocess
import sys

import pytest

from torch_tpu import _discovery

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from hbm_traffic import hbm_traffic, instruction_traffic, libtpu_dumps  # noqa: E402

pytestmark = pytest.mark.skipif(_discovery.libtpu_path() is None, reason="libtpu not installed")

SCRIPT = r"""
import torch, torch_tpu
from torch_tpu.compile import stats
g = torch.Generator().manual_seed(0)
ws = [torch.randn(1024, 1024, generator=g) * 0.03 for _ in range(4)]
# 256 MB, of which the lookup reads one row. A table that fits on-chip memory (32 MB tried) is
# prefetched into it whole by a DMA, which the tool counts, as that copy does cross HBM.
table = torch.randn(65536, 1024, generator=g)
ids = torch.tensor([[40961]])
def f(ids, table, *ws):
    x = torch.nn.functional.embedding(ids, table)[0]
    for w in ws:
        x = torch.tanh(x @ w.t())
    return x
with torch.no_grad():
    out = torch.compile(f, backend="tpu", fullgraph=True)(ids.to("tpu"), table.to("tpu"), *[w.to("tpu") for w in ws]).cpu()
torch.testing.assert_close(out, f(ids, table, *ws))
print("BYTES", [e.last_aot() for e in stats.executables if e.last_aot()][-1]["bytes_accessed"])
"""


def test_weights_cross_hbm_once_where_the_cost_analysis_counts_them_several_times(tmp_path):
    env = dict(os.environ, TORCH_TPU_AOT_CHECK="v6e:1x1", TORCH_TPU_QUIET="1", TORCH_TPU_CACHE_DIR="",
               XLA_FLAGS=f"--xla_dump_to={tmp_path} --xla_dump_hlo_as_text")
    res = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    cost_bytes = float(res.stdout.split("BYTES")[-1])
    graphs = [open(f).read() for f in libtpu_dumps(tmp_path)]
    assert len(graphs) == 1, len(graphs)
    t = hbm_traffic(graphs[0])
    weights, table = 4 * 1024 * 1024 * 4, 65536 * 1024 * 4
    assert weights + table <= t["parameters"] <= (weights + table) * 1.01
    # Every weight is read from HBM once (a DMA into VMEM or a fusion's operand), the table only
    # at the row the lookup reads; the analysis counts the weights about four times.
    assert weights <= t["hbm"] <= 1.1 * weights, t
    assert cost_bytes >= 2.5 * t["hbm"], (cost_bytes, t)
    # Per instruction (--top): the rows add up to the total. libtpu computes these one-row
    # products as multiply-reduce fusions, not on the matrix unit: no matmul flops.
    rows = instruction_traffic(graphs[0])
    assert sum(r[2] for r in rows) == t["hbm"]
    assert sum(r[3] for r in rows) == 0, rows


MATMUL_SCRIPT = r"""
import torch, torch_tpu
g = torch.Generator().manual_seed(0)
a, b, c = (torch.randn(*s, generator=g) * 0.05 for s in ((256, 512), (512, 384), (384, 128)))
f = lambda a, b, c: torch.relu(a @ b) @ c
with torch.no_grad():
    out = torch.compile(f, backend="tpu", fullgraph=True)(a.to("tpu"), b.to("tpu"), c.to("tpu")).cpu()
torch.testing.assert_close(out, f(a, b, c))
print("OK")
"""


def test_matmul_flops_are_found_inside_libtpus_fusions(tmp_path):
    env = dict(os.environ, TORCH_TPU_AOT_CHECK="v6e:1x1", TORCH_TPU_QUIET="1", TORCH_TPU_CACHE_DIR="",
               XLA_FLAGS=f"--xla_dump_to={tmp_path} --xla_dump_hlo_as_text")
    res = subprocess.run([sys.executable, "-c", MATMUL_SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and "OK" in res.stdout, res.stderr[-3000:]
    graphs = [open(f).read() for f in libtpu_dumps(tmp_path)]
    assert len(graphs) == 1, len(graphs)
    rows = instruction_traffic(graphs[0])
    assert sum(r[3] for r in rows) == 2 * 256 * 512 * 384 + 2 * 256 * 384 * 128, rows
