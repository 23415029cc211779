"""v6e roofline figures shared by the projections: chip peaks (https://docs.cloud.google.com/tpu/
docs/v6e, ../shared/research/anchors.md) and the bound of a workload on one chip."""

V6E_FLOPS = 918e12  # bf16 FLOP/s per chip
V6E_HBM = 1.638e12  # bytes/s per chip
V6E_ICI = 800e9  # bytes/s per chip, both directions together (400 GB/s each way)


def bound_seconds(flops, necessary_bytes):
    """max(flops at the MXU peak, necessary bytes at HBM bandwidth): what no schedule beats."""
    return max(flops / V6E_FLOPS, necessary_bytes / V6E_HBM)


def ring_all_reduce_seconds(nbytes, chips):
    """ICI time of a ring all-reduce of `nbytes` per chip over `chips` chips: each chip sends and
    receives 2 (p - 1) / p of the tensor, at 400 GB/s each way. libtpu's cost analysis counts a
    collective's HBM traffic only (docs/parallel.md), so this is added beside it, not read from it."""
    if chips <= 1:
        return 0.0
    return 2 * (chips - 1) / chips * nbytes / (V6E_ICI / 2)
