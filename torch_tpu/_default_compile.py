"""Plain torch.compile(model) on tpu tensors: the default backend routes tpu graphs to ours.

PyTorch 2.13 sends `tpu` graphs under Inductor to a Pallas code generator that needs JAX.
torch.compile without `backend=` uses `torch.compiler.get_default_backend()`, which PyTorch
lets a program set with `torch.compiler.set_default_backend` (public API). We set a dispatcher:
graphs whose tensors are on `tpu` go to the `tpu` backend, every other graph is compiled by
Inductor exactly as before (same mode and options). torch.compile itself is not touched, an
explicit backend="..." is honoured, and a later set_default_backend by the user wins.

Setting it needs torch._dynamo, which costs ~1.5 s to import, so it is done when PyTorch itself
first imports torch._dynamo's backend registry (an import hook), not when torch_tpu loads.
TORCH_TPU_DEFAULT_COMPILE=0 turns this off.
"""
import os

from ._import_hooks import after_import

_REGISTRY = "torch._dynamo.backends.registry"


def _graph_devices(gm, example_inputs):
    import torch

    devices = {t.device.type for t in example_inputs if isinstance(t, torch.Tensor)}
    for node in gm.graph.nodes:
        value = node.meta.get("example_value")
        if isinstance(value, torch.Tensor):
            devices.add(value.device.type)
    return devices


def tpu_or_inductor(gm, example_inputs, mode=None, options=None, **kwargs):
    """The default torch.compile backend while torch_tpu is loaded."""
    if "tpu" in _graph_devices(gm, example_inputs):
        from .compile import tpu_backend

        return tpu_backend(gm, example_inputs, options=options, mode=mode, **kwargs)
    import torch

    return torch._TorchCompileInductorWrapper(mode, options, None)(gm, example_inputs)


def _install(registry_module):
    if registry_module.get_default_backend() == "inductor":  # the user did not choose another
        registry_module.set_default_backend(tpu_or_inductor)


def enable():
    if os.environ.get("TORCH_TPU_DEFAULT_COMPILE", "1") == "0":
        return
    after_import(_REGISTRY, _install)
