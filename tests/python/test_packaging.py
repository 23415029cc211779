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


def _import_beside_torch(version):
    """Imports torch_tpu in a fresh process whose torch reports `version`."""
    code = ("import torch\n"
            f"torch.__version__ = {version!r}\n"
            "import torch_tpu\n"
            "print('imported', torch.randn(3, device='tpu').sum().item() is not None)\n")
    env = {**__import__("os").environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "TORCH_TPU_QUIET": "1"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)


def test_the_build_records_the_torch_it_links_against():
    import torch
    from torch_tpu import _build_info
    assert _build_info.TORCH_VERSION == torch.__version__


def test_import_beside_another_torch_release_says_so():
    import torch
    built = torch.__version__.split("+")[0]
    res = _import_beside_torch("2.12.1+cpu")
    assert res.returncode != 0
    assert (f"torch-tpu was built against torch {torch.__version__}, and this environment has torch 2.12.1+cpu"
            in res.stderr), res.stderr
    assert f"install torch=={built}" in res.stderr, res.stderr
    # A CUDA build of the same release shares the C++ ABI torch_tpu uses: no refusal.
    res = _import_beside_torch(built + "+cu130")
    assert res.returncode == 0 and "imported True" in res.stdout, res.stderr
