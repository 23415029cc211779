"""The one-time hint for small host reads in a hot loop (engine/device/host_read_rate.h). It is
once per process, so each case runs in a fresh one."""
import os
import subprocess
import sys

LOOP = """
import warnings, torch
warnings.simplefilter("always")
x = torch.ones(3, device="tpu")
with warnings.catch_warnings(record=True) as seen:
    total = 0.0
    for _ in range({n}):
        total += (x * 2).sum().item()
    big = torch.ones(4096, device="tpu").cpu()  # large reads are not what the hint is about
print(total, sum("small host reads" in str(w.message) for w in seen))
"""


def run(n, **env):
    out = subprocess.run([sys.executable, "-c", LOOP.format(n=n)], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, TORCH_TPU_QUIET="1", **env))
    assert out.returncode == 0, out.stderr
    total, warnings = out.stdout.split()
    return float(total), int(warnings)


def test_item_in_a_hot_loop_warns_once():
    assert run(400) == (2400.0, 1)


def test_a_few_reads_or_the_variable_at_zero_do_not_warn():
    assert run(20) == (120.0, 0)
    assert run(400, TORCH_TPU_WARN_HOST_READS="0") == (2400.0, 0)
