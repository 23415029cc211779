"""Builds torch_tpu._C with CMake against the torch already installed (no build isolation)."""
import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent

# The build (and CMake's `python -c "import torch"`) must not autoload a half-built torch_tpu
# through the entry point that the metadata step has just written.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"


def _require_installed_torch():
    """torch_tpu._C links against the torch in this environment; pip's build isolation hides it
    (and would fetch a multi-GB CUDA torch if asked to install one)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("torch-tpu builds against the torch already installed, and none is importable here: "
                 "install torch first (e.g. `pip install torch==2.13.0`), then build without build "
                 "isolation: `pip install --no-build-isolation .`")


_require_installed_torch()


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = ROOT / "build"
        build_dir.mkdir(exist_ok=True)
        jobs = os.environ.get("TORCH_TPU_BUILD_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(
            ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
             f"-DPython3_EXECUTABLE={sys.executable}", "-DCMAKE_BUILD_TYPE=Release"])
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "_C", "-j", jobs])
        built = next((ROOT / "torch_tpu").glob("_C*.so"))
        target = Path(self.get_ext_fullpath(ext.name))
        if target.resolve() != built.resolve():
            target.parent.mkdir(parents=True, exist_ok=True)
            self.copy_file(str(built), str(target))
        _write_build_info({ROOT / "torch_tpu", target.parent})


def _write_build_info(package_dirs):
    """Records the torch that _C was linked against: importing torch_tpu beside another torch
    then raises a sentence saying so (torch_tpu/_torch_check.py), not an undefined C++ symbol."""
    import torch

    text = ('"""Written by setup.py at build time."""\n'
            f"TORCH_VERSION = {torch.__version__!r}\n")
    for d in package_dirs:
        (Path(d) / "_build_info.py").write_text(text)


setup(ext_modules=[Extension("torch_tpu._C", sources=[])], cmdclass={"build_ext": CMakeBuild})
