"""The torch.compile backend `tpu` (docs/compile.md).

Found by torch.compile(backend="tpu") through the `torch_dynamo_backends` entry point, so
importing torch_tpu does not import torch._dynamo.
"""
from .backend import CompileError, tpu_backend  # noqa: F401
