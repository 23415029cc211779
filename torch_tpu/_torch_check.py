"""torch_tpu._C links against the C++ library of one torch release: beside another one it fails
with an undefined symbol, or worse, loads and misbehaves. The build records its torch
(`_build_info.py`, written by setup.py); importing checks it first and says what to do."""
import torch


def _release(version: str) -> str:
    """'2.13.0+cpu' -> '2.13.0': CPU and CUDA builds of one release share the C++ ABI we use."""
    return version.split("+", 1)[0]


def _rebuild_hint(built: str) -> str:
    return (f"install torch=={_release(built)}, or rebuild torch-tpu against this torch "
            "(from its source tree: pip install --no-build-isolation --no-deps --force-reinstall .)")


def require_built_torch():
    """Raises ImportError when the running torch is not the release torch_tpu was built with."""
    try:
        from ._build_info import TORCH_VERSION as built
    except ImportError:  # built by CMake directly (C++ tests): nothing recorded, nothing to check
        return
    if _release(torch.__version__) != _release(built):
        raise ImportError(f"torch-tpu was built against torch {built}, and this environment has torch "
                          f"{torch.__version__}: {_rebuild_hint(built)}")


def explain_load_failure(error: ImportError) -> ImportError:
    """A clearer ImportError for a _C that does not load (e.g. a torch replaced in place)."""
    try:
        from ._build_info import TORCH_VERSION as built
        hint = f"It was built against torch {built}; {_rebuild_hint(built)}"
    except ImportError:
        hint = "Rebuild it against this torch (pip install --no-build-isolation --no-deps --force-reinstall .)"
    return ImportError(f"torch-tpu's C++ core (torch_tpu._C) did not load with torch {torch.__version__}: "
                       f"{error}. {hint}")
