"""Run a function right after PyTorch imports one of its own modules.

Some of PyTorch's extension points live in modules that are slow to import (torch._dynamo,
torch._inductor): registering through them when torch_tpu loads would cost every `import torch`
that time. A finder on sys.meta_path wraps the loader of the named module once, so the
registration runs when PyTorch itself first imports it.
"""
import importlib.abc
import importlib.util
import sys


class _Loader(importlib.abc.Loader):
    def __init__(self, inner, then):
        self.inner = inner
        self.then = then

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        self.then(module)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the loader of `name` once, then leaves sys.meta_path."""

    def __init__(self, name, then):
        self.name = name
        self.then = then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, self.then)
        return spec


def after_import(name: str, then) -> None:
    """Calls then(module) once `name` is imported: now if it already is, else right after."""
    if name in sys.modules:
        then(sys.modules[name])
    elif not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, then))
