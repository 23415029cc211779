"""The callable AOTAutograd runs for one compiled graph: a _C._GraphExecutable plus the
graph's lifted constants; CPU tensors other than 0-d scalars are moved to the device."""
import torch

from .. import _C
from . import stats as _stats


def lift_constants(gm):
    """get_attr tensors become trailing inputs (returned so each call can pass them)."""
    constants = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node in list(gm.graph.nodes):
        if node.op != "get_attr":
            continue
        value = getattr(gm, node.target)
        if not isinstance(value, torch.Tensor):
            continue
        anchor = placeholders[-1] if placeholders else next(iter(gm.graph.nodes))
        with gm.graph.inserting_after(anchor):
            ph = gm.graph.placeholder(f"_constant_{len(constants)}")
        ph.meta["val"] = node.meta.get("val", value)
        node.replace_all_uses_with(ph)
        gm.graph.erase_node(node)
        placeholders.append(ph)
        constants.append(value)
    gm.recompile()
    return constants


class CompiledGraph:
    """The boxed callable AOTAutograd runs: one _C._GraphExecutable per graph."""

    def __init__(self, spec, constants, options, device=None, runtime_length=None):
        self._boxed_call = True  # an instance attribute: functools.wraps copies it to wrappers
        self.executable = _C._GraphExecutable(spec)
        self.skipped = set(spec["skipped_inputs"])
        self.constant_outputs = sorted(spec.get("constant_outputs", {}).items())
        self.constants = constants
        self.options = options
        self._device_constants = None
        self.device = device  # where the graph computes when no input is a tpu tensor
        # A graph compiled per bucket (bucketed_graphs.py) takes the call's true length last, as a
        # runtime scalar: a one-element list its BucketedGraph sets before each call.
        self.runtime_length = runtime_length

    def _constants_on(self, device):
        if self._device_constants is None:
            self._device_constants = [c.to(device) if c.device.type != "tpu" and c.dim() > 0 else c
                                      for c in self.constants]
        return self._device_constants

    def __call__(self, args):
        inputs = [a for i, a in enumerate(args) if i not in self.skipped] if self.skipped else list(args)
        args.clear()  # boxed convention: let the caller's references go early
        device = next((t.device for t in inputs if isinstance(t, torch.Tensor) and t.device.type == "tpu"),
                      self.device)
        if self.constants:
            inputs += self._constants_on(device or "tpu")
        if device is not None:
            # CPU tensors other than 0-d scalars (e.g. CPU index tensors, which PyTorch accepts
            # for device tensors) are copied to the device; 0-d ones are runtime scalars.
            inputs = [t.to(device) if isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.dim() > 0 else t
                      for t in inputs]
        if self.runtime_length is not None:
            inputs.append(torch.tensor(self.runtime_length[0], dtype=torch.int64))
        compiles_before = self.executable.compiles
        outputs = self.executable.run(inputs)
        if self.executable.compiles != compiles_before:
            _stats.note_module(self.executable, self.options)
        for position, value in self.constant_outputs:
            outputs.insert(position, value)
        return outputs
