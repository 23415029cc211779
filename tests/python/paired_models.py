"""A Transformers model on the CPU and its copy on tpu, run side by side at new lengths (the
bucketing tests of training and generation): both take the same inputs, the CPU's losses or
tokens are the reference, and the executables the tpu side builds per new length are counted."""
import torch

from helpers import DEV, executables_built


class Paired:
    """`auto.from_config(config)` twice with the same seeded weights: `cpu`, and `dev` on tpu;
    with `train`, an AdamW optimizer each."""

    def __init__(self, auto, config, train=False):
        torch.manual_seed(0)
        self.cpu = auto.from_config(config)
        self.dev = auto.from_config(config)
        self.dev.load_state_dict(self.cpu.state_dict())
        self.dev.to(DEV)
        if not train:
            self.cpu.eval()
            self.dev.eval()
        self.optimizers = {m: torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (self.cpu, self.dev)} if train else {}

    def sides(self):
        return ((self.dev, DEV), (self.cpu, "cpu"))

    def train_step(self, inputs, what):
        """One optimizer step of both on `inputs` (keyword tensors, with labels): equal losses."""
        losses = []
        for model, device in self.sides():
            out = model(**{k: v.to(device) for k, v in inputs.items()})
            out.loss.backward()
            self.optimizers[model].step()
            self.optimizers[model].zero_grad()
            losses.append(out.loss.detach().cpu())
        torch.testing.assert_close(losses[0], losses[1], msg=lambda m: f"{what}: {m}")

    def generate(self, inputs, what, **kw):
        """Greedy generate() of both on `inputs`: equal tokens."""
        tokens = []
        for model, device in self.sides():
            out = model.generate(**{k: v.to(device) for k, v in inputs.items()}, do_sample=False, **kw)
            tokens.append(out.cpu())
        torch.testing.assert_close(tokens[0], tokens[1], msg=lambda m: f"{what}: {m}")


def built_at_new_lengths(run, lengths=(23, 77, 120), warm=(40, 50)):
    """run(length) at the `warm` lengths (bucket 128), then at `lengths` in the same bucket: the
    executables built by the latter."""
    for length in warm:
        run(length)
    built = executables_built()
    for length in lengths:
        run(length)
    return executables_built() - built


def assert_builds_at_most(built, bound):
    """Strict eager's per-op count. Fused eager (the suite's other mode) splits a model's stream
    into programs anew as its loop detection learns it, so there the values alone are checked."""
    if torch.tpu.get_eager_mode() == "strict":
        assert built <= bound, built
