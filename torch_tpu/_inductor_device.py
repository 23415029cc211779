"""What Inductor does with `tpu` graphs while torch_tpu is loaded.

PyTorch 2.13 registers, for the device name `tpu`, Inductor's Pallas code generator, which
needs JAX: `torch.compile(backend="inductor")` on our tensors died in it (`No module named
'jax'`), and AOT Inductor with `AssertionError: Device tpu not supported`. Inductor takes
out-of-tree devices through `register_backend_for_device` (public) and keeps a registration
made before its own. We register for `tpu`:
- a graph pass that hands each post-grad graph with tpu tensors to our compiler and leaves
  Inductor one extern call to emit (compile/inductor_graphs.py), so backend="inductor" works;
- a scheduling that emits no kernels (there are none left to emit; any other node is refused
  with the error below), and Inductor's own Python wrapper codegen;
- for AOT Inductor's C++ wrapper and the FX wrapper, classes that raise the error below: an AOT
  package of a tpu graph would need our executables inside PyTorch's package format.
TORCH_TPU_INDUCTOR=error makes every tpu graph in Inductor raise that error instead.

Registered when PyTorch itself imports Inductor's codegen registry (no cost at import torch).
"""
import os

from ._import_hooks import after_import

_COMMON = "torch._inductor.codegen.common"

MESSAGE = (
    "Inductor cannot generate code for the tpu device (torch-tpu): PyTorch's Inductor has no code "
    "generator for it (its own 'tpu' generator is Pallas, for JAX). Compile with torch-tpu's backend: "
    "torch.compile(model, backend=\"tpu\"), or torch.compile(model) with no backend (tpu graphs then "
    "use it); in Transformers, generate(..., compile_config=CompileConfig(backend=\"tpu\")). "
    "AOT Inductor packages (aoti_compile_and_package) cannot target tpu: compile with backend=\"tpu\" "
    "on the machine that runs the model; its executables persist in the disk cache "
    "(TORCH_TPU_CACHE_DIR, docs/compile.md)."
)


class InductorOnTpuError(RuntimeError):
    """Inductor asked to generate code for tpu."""


def _refuse(*_args, **_kwargs):
    raise InductorOnTpuError(MESSAGE)


class _RefuseOnUse(type):
    # Inductor reads class attributes of a device's codegen classes (supports_caching, create)
    # before instantiating them: any of them raises the error.
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        _refuse()


class _NoTpuCodegen(metaclass=_RefuseOnUse):
    """Stands for the wrapper codegen classes Inductor must not use for tpu."""

    def __init__(self, *args, **kwargs):
        _refuse()


def _scheduling():
    from torch._inductor.scheduler import BaseScheduling
    from torch.utils._ordered_set import OrderedSet

    class ExternCallsOnly(BaseScheduling):
        """Inductor's scheduling of tpu: the graph pass left only extern calls, which need no
        kernel; a node that would need one raises the error."""

        def get_backend_features(self, device):
            return OrderedSet()

        def can_fuse_vertical(self, node1, node2):
            return False

        def can_fuse_horizontal(self, node1, node2):
            return False

        def group_fn(self, sizes):
            _refuse()

        def codegen_node(self, node):
            _refuse()

        def codegen_template(self, *args, **kwargs):
            _refuse()

        def codegen_sync(self):
            pass

        def ready_to_flush(self):
            return False

        def flush(self):
            pass

    return ExternCallsOnly


def _graph_pass():
    from torch._inductor.custom_graph_pass import CustomGraphModulePass

    class CompileTpuGraphs(CustomGraphModulePass):
        """Inductor applies it to each post-grad graph that holds tpu tensors."""

        def __call__(self, gm):
            if os.environ.get("TORCH_TPU_INDUCTOR", "") == "error":
                _refuse()
            from .compile.inductor_graphs import replace_with_compiled_graph

            replace_with_compiled_graph(gm)

        def uuid(self):
            from .compile.inductor_graphs import PROCESS_ID

            return PROCESS_ID

    return CompileTpuGraphs()


class _PythonWrapperOnUse(type):
    # Inductor's Python wrapper codegen, imported on first use: importing it while Inductor's
    # codegen registry is being imported would be circular.
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        from torch._inductor.codegen.wrapper import PythonWrapperCodegen

        return getattr(PythonWrapperCodegen, name)


class _PythonWrapper(metaclass=_PythonWrapperOnUse):
    """Stands for Inductor's PythonWrapperCodegen (Inductor calls its `create`)."""


def _register(common):
    if common.get_scheduling_for_device("tpu") is not None:
        return  # someone registered a tpu code generator on purpose: theirs stays
    common.register_backend_for_device("tpu", lambda scheduler: _scheduling()(scheduler), _PythonWrapper,
                                       _NoTpuCodegen, _NoTpuCodegen, device_custom_pass=_graph_pass())


def enable():
    after_import(_COMMON, _register)
