"""The arithmetic of one call, and the CPU's own matrix-product rate, so a table can say how close
a compiled step runs to what this machine's matrix products allow.

On XLA:CPU a compiled transformer step is mostly matrix products; its FLOP rate next to the rate
PyTorch's own CPU matmul reaches on the same cores tells whether a ratio target is still open
(less host work and fewer passes to remove) or bounded by the products themselves."""
import timing

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode


def call_flops(fn):
    """FLOPs of one call of `fn` on CPU tensors (a backward it runs included), matrix products and convolutions counted by
    PyTorch's FlopCounterMode. Attention runs through its math form so its two products count
    too (the CPU flash kernel is not in the counter's table)."""
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def cpu_matmul_gflops(m=512, k=512, n=2048, seconds=0.5):
    """PyTorch CPU's float32 matmul rate on this machine (GFLOP/s, the best of short blocks): a
    reference rate measured in the same run as the table it goes into."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    best = timing.best_block(lambda: a @ b, "cpu", 4, seconds)
    return 2 * m * k * n / best / 1e9
