"""Quick start: tensors on the `tpu` device, the platform underneath, a small training loop run
eagerly and then with torch.compile(backend="tpu").

Runs anywhere: on a Cloud TPU VM the device is a TPU (libtpu); elsewhere it is XLA:CPU.
With TORCH_TPU_AOT_CHECK=v6e:1x1 (and `pip install libtpu`) every program is also compiled by
the real TPU compiler, which estimates how long a training step would take on a v6e chip.
"""
import time

import torch
import torch.nn.functional as F

import torch_tpu
import torch_tpu.aot


def train(xs, ys, compiled):
    """50 AdamW steps, eager op by op or with torch.compile(backend="tpu") (model and optimizer
    step each one StableHLO module), and libtpu's v6e estimate of one step."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, capturable=compiled)
    forward = torch.compile(model, backend="tpu") if compiled else model
    step_fn = torch.compile(opt.step, backend="tpu") if compiled else opt.step
    mode = "compiled" if compiled else "eager"
    start = time.perf_counter()
    at_step_10 = None
    for step in range(50):
        if step == 10:
            at_step_10 = torch_tpu.aot.stats()
            torch.tpu.synchronize()
            steady = time.perf_counter()
        loss = F.cross_entropy(forward(xs), ys)
        opt.zero_grad()
        loss.backward()
        step_fn()
        if step % 10 == 0 or step == 49:
            print(f"{mode:>8} step {step:2d}  loss {loss.item():.4f}")
    torch.tpu.synchronize()
    end = time.perf_counter()
    accuracy = (model(xs).argmax(1) == ys).float().mean().item()
    print(f"{mode}: 50 AdamW steps in {end - start:.2f} s, {(end - steady) / 40 * 1e3:.2f} ms per step after "
          f"the first 10 (which compile); accuracy {accuracy:.3f}")
    aot = torch_tpu.aot.stats()
    if aot["topology"] and not aot["error"] and at_step_10 is not None:
        chip = aot["topology"].split(":")[0]
        per_step = {k: (aot[k] - at_step_10[k]) / 40 for k in  # steps 10..49
                    ("estimated_seconds", "roofline_seconds", "flops", "bytes")}
        how = "whole graphs: forward, backward, optimizer" if compiled else "op by op"
        print(f"{mode}: libtpu estimates one training step on {chip} ({aot['topology']}) at "
              f"{per_step['estimated_seconds'] * 1e6:.2f} us: {per_step['flops']:.3g} flops, "
              f"{per_step['bytes']:.3g} bytes accessed; roofline bound {per_step['roofline_seconds'] * 1e6:.2f} us "
              f"({how}; {aot['accepted']} programs accepted, {aot['rejected']} rejected so far)")


def main():
    print("device:", torch.device("tpu"))
    print("runs on:", torch.tpu.get_device_name(), "-", torch_tpu._C._runtime_description())

    x = torch.arange(6, dtype=torch.float32).reshape(2, 3).to("tpu")
    print("x * 2 + 1 =", (x * 2 + 1).cpu().tolist())

    torch.manual_seed(0)
    inputs = torch.randn(256, 16)
    targets = (inputs[:, :4].sum(1) > 0).long()
    xs, ys = inputs.to("tpu"), targets.to("tpu")
    for compiled in (False, True):
        train(xs, ys, compiled)
    print(torch_tpu.metrics.report())


if __name__ == "__main__":
    main()
