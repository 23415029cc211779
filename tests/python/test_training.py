"""A two-layer MLP trains 50 AdamW steps on tpu exactly like on CPU, with zero CPU fallbacks."""
import torch
import torch.nn.functional as F

import torch_tpu


def train(device, steps=50):
    torch.manual_seed(0)
    inputs = torch.randn(64, 16)
    targets = torch.randint(0, 3, (64,))
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    x, y = inputs.to(device), targets.to(device)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


def test_mlp_adamw_matches_cpu_without_fallbacks():
    cpu_losses, cpu_params = train("cpu")
    before = torch_tpu.metrics.fallback_count()
    tpu_losses, tpu_params = train("tpu")
    assert torch_tpu.metrics.fallback_count() == before, torch_tpu.metrics.counters()["fallbacks"]
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-6)
    for p_tpu, p_cpu in zip(tpu_params, cpu_params):
        torch.testing.assert_close(p_tpu, p_cpu, rtol=1e-4, atol=1e-5)
    assert tpu_losses[-1] < tpu_losses[0]


class _TiedLM(torch.nn.Module):
    """GPT-2's pattern: the LM head shares the embedding matrix."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.proj = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 50, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(torch.tanh(self.proj(self.emb(ids))))


def test_module_to_tpu_keeps_parameter_identity_and_ties():
    torch.manual_seed(0)
    model = _TiedLM()
    params_before = list(model.parameters())
    emb = model.emb.weight
    model.to("tpu")
    assert model.emb.weight is emb and emb.device.type == "tpu"  # converted in place, as on CUDA
    assert model.head.weight is model.emb.weight  # still one parameter
    assert [p is q for p, q in zip(model.parameters(), params_before)] == [True] * len(params_before)
    model.cpu()
    assert model.emb.weight is emb and emb.device.type == "cpu" and model.head.weight is emb


def test_tied_weights_train_like_cpu():
    torch.manual_seed(0)
    cpu = _TiedLM()
    tpu = _TiedLM()
    tpu.load_state_dict(cpu.state_dict())
    tpu_opt = torch.optim.SGD(tpu.parameters(), lr=0.5)  # made before .to(): must stay valid
    tpu.to("tpu")
    cpu_opt = torch.optim.SGD(cpu.parameters(), lr=0.5)
    ids = torch.tensor([[1, 7, 3, 49, 0, 7]])
    for model, opt, dev in ((cpu, cpu_opt, "cpu"), (tpu, tpu_opt, "tpu")):
        for _ in range(2):
            loss = F.cross_entropy(model(ids.to(dev))[0], ids[0].roll(1).to(dev))
            opt.zero_grad()
            loss.backward()
            opt.step()
    torch.testing.assert_close(tpu.emb.weight.detach().cpu(), cpu.emb.weight.detach())
    torch.testing.assert_close(tpu.head.weight.detach().cpu(), cpu.head.weight.detach())
    assert tpu.head.weight is tpu.emb.weight
