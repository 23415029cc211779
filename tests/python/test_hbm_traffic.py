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

needs_libtpu = pytest.mark.skipif(_discovery.libtpu_path() is None, reason="libtpu not installed")

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


@needs_libtpu
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


@needs_libtpu
def test_matmul_flops_are_found_inside_libtpus_fusions(tmp_path):
    env = dict(os.environ, TORCH_TPU_AOT_CHECK="v6e:1x1", TORCH_TPU_QUIET="1", TORCH_TPU_CACHE_DIR="",
               XLA_FLAGS=f"--xla_dump_to={tmp_path} --xla_dump_hlo_as_text")
    res = subprocess.run([sys.executable, "-c", MATMUL_SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and "OK" in res.stdout, res.stderr[-3000:]
    graphs = [open(f).read() for f in libtpu_dumps(tmp_path)]
    assert len(graphs) == 1, len(graphs)
    rows = instruction_traffic(graphs[0])
    assert sum(r[3] for r in rows) == 2 * 256 * 512 * 384 + 2 * 256 * 384 * 128, rows


# Two convolutions as libtpu writes products in optimized modules (shapes from a Qwen3.5 prefill
# graph): a [1024, 4096] x [4096, 8192] matmul with its 8192 columns as 16 window positions of
# 512, the window walking 15 rows of padding on each side of a length-1 input, and a batched product ([512] batches of [64, k] x [k, 64]) as a
# base-dilated convolution whose stride and lhs_dilate leave one tap per output.
SYNTHETIC_MODULE = """HloModule m

%fused (p0: bf16[1024,4096,1], p1: bf16[16,512,4096]) -> bf16[1024,16,512] {
  %p0 = bf16[1024,4096,1]{2,1,0} parameter(0)
  %p1 = bf16[16,512,4096]{2,1,0} parameter(1)
  ROOT %convolution.1 = bf16[1024,16,512]{2,1,0} convolution(%p0, %p1), window={size=16 pad=15_15 rhs_reversal=1}, dim_labels=bf0_0oi->b0f
}

ENTRY %main (a: bf16[1024,4096,1], b: bf16[16,512,4096], c: f32[512,64,32], d: f32[512,32,64]) -> (bf16[1024,16,512], f32[512,64,64]) {
  %a = bf16[1024,4096,1]{2,1,0} parameter(0)
  %b = bf16[16,512,4096]{2,1,0} parameter(1)
  %c = f32[512,64,32]{2,1,0} parameter(2)
  %d = f32[512,32,64]{2,1,0} parameter(3)
  %fusion.1 = bf16[1024,16,512]{2,1,0} fusion(%a, %b), kind=kOutput, calls=%fused
  %convolution-base-dilated.2 = f32[512,64,64]{2,1,0} convolution(%c, %d), window={size=512 stride=511 lhs_dilate=512}, dim_labels=0bf_0io->0bf
  ROOT %tuple = (bf16[1024,16,512]{2,1,0}, f32[512,64,64]{2,1,0}) tuple(%fusion.1, %convolution-base-dilated.2)
}
"""


def test_convolution_flops_count_only_the_taps_that_land_on_input():
    flops = {name: f for name, _, _, f in instruction_traffic(SYNTHETIC_MODULE)}
    # Output position j of the padded window sees input row 0 through exactly one tap.
    assert flops["fusion.1"] == 2 * 1024 * 4096 * 8192  # the matmul's (16 x 512 = 8192 columns)
    assert flops["convolution-base-dilated.2"] == 2 * 512 * 64 * 64 * 32
