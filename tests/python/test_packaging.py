"""Building the package: what pip's build isolation (which hides the installed torch) gets."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _setup_py(*args, hide_torch):
    code = ("import runpy, sys\n"
            + ("sys.modules['torch'] = None  # as under pip's build isolation\n" if hide_torch else "")
            + f"sys.argv = ['setup.py', *{list(args)!r}]\n"
            "runpy.run_path('setup.py', run_name='__main__')\n"
            "import os; print('autoload', os.environ.get('TORCH_DEVICE_BACKEND_AUTOLOAD'))\n")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_build_without_torch_stops_at_once_saying_what_to_do():
    res = _setup_py("--version", hide_torch=True)
    assert res.returncode != 0
    assert "pip install --no-build-isolation ." in res.stderr and "torch==2.13.0" in res.stderr, res.stderr


def test_build_never_autoloads_the_package_it_builds():
    # CMake's `python -c "import torch"` inherits this: no half-built torch_tpu through the
    # entry point the metadata step writes.
    res = _setup_py("--version", hide_torch=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[-2:] == ["autoload", "0"], res.stdout
