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
