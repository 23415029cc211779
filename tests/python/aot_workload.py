"""A workload that touches every lowering rule family, for the AOT check (test_aot_check.py).

Run as a script (under `python -m torch_tpu.aot` or with TORCH_TPU_AOT_CHECK set). It trains
the MLP of test_training.py with AdamW (optimizer foreach ops), runs a list of extra ops and
prints one line `AOT_STATS <json>` with torch_tpu.aot.stats() and the per-op counters.
"""
import json

import torch
import torch.nn.functional as F

import torch_tpu
import torch_tpu.aot


def mlp_adamw(steps=3):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    x, y = torch.randn(64, 16).to("tpu"), torch.randint(0, 3, (64,)).to("tpu")
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert steps == 1 or losses[-1] < losses[0], losses


def extra_ops():
    """(family, function of fresh tpu tensors) pairs; each runs once."""
    a = torch.randn(8, 16, device="tpu")
    b = torch.randn(16, 4, device="tpu")
    i = torch.randint(0, 8, (5,), device="tpu")
    p = torch.rand(8, 16, device="tpu")
    h = a.to(torch.bfloat16)
    return [
        ("elementwise", lambda: (a * 2 + 1).exp().tanh().sigmoid().clamp(0.1, 0.9) ** 2),
        ("elementwise", lambda: torch.where(a > 0, a, -a).sqrt().log1p() / (a.abs() + 1)),
        ("elementwise", lambda: (a.sin() + a.cos() + a.atan() + a.erf() + torch.lgamma(p + 1))),
        ("elementwise", lambda: (i * 3 // 2) % 5 | 1),
        ("elementwise", lambda: F.gelu(h * h + 1)),
        ("reduction", lambda: (a.sum(), a.mean(1), a.amax(0), a.var(1), a.argmax(1), a.prod(0))),
        ("reduction", lambda: (a.cumsum(1), a.logsumexp(1), a.norm(dim=1), a.all(), (a > 0).any(0))),
        ("softmax/losses", lambda: (a.softmax(1), a.log_softmax(0), F.mse_loss(a, p))),
        ("softmax/losses", lambda: F.nll_loss(a.log_softmax(1), torch.randint(0, 16, (8,), device="tpu"))),
        ("softmax/losses", lambda: F.binary_cross_entropy_with_logits(a, p)),
        ("softmax/losses", lambda: F.layer_norm(a, (16,)) + F.dropout(a, 0.5)),
        ("matmul", lambda: (a @ b, torch.addmm(torch.zeros(8, 4, device="tpu"), a, b))),
        ("matmul", lambda: (torch.bmm(a.view(2, 4, 16), b.expand(2, 16, 4)), torch.mv(a, b[:, 0]), a[0].dot(a[1]))),
        ("matmul", lambda: (torch.einsum("ij,jk->ik", a, b), F.linear(a, b.T), h @ b.to(torch.bfloat16))),
        ("shape", lambda: (torch.cat([a, a]), torch.stack([a, a], 1), a.T.contiguous(), a.flip(0), a.roll(2, 1))),
        ("shape", lambda: (a.repeat(2, 1), F.pad(a, (1, 2)), a.reshape(4, 32).permute(1, 0).contiguous(), a.tril())),
        ("indexing", lambda: (a.index_select(0, i), a.gather(1, i.view(5, 1).expand(5, 3)), a[i], a[:, 2:9:3] + 0)),
        ("indexing", lambda: (a.clone().index_put_((i,), torch.zeros(16, device="tpu")),
                              torch.zeros(8, 16, device="tpu").scatter_add(0, i.view(5, 1).expand(5, 16), a[:5]),
                              a.masked_fill(a > 0, 0.0), F.embedding(i, a))),
        ("sort", lambda: (a.sort(1), a.topk(3, 1), a.argsort(0), a.max(1))),
        ("random", lambda: (torch.rand(4, 4, device="tpu"), torch.randn(4, device="tpu"),
                            torch.randint(0, 9, (6,), device="tpu"), torch.empty(5, device="tpu").normal_(),
                            torch.bernoulli(p), torch.randperm(7, device="tpu"), torch.multinomial(p[0], 2))),
        ("creation", lambda: (torch.arange(10, device="tpu"), torch.linspace(0, 1, 5, device="tpu"),
                              torch.eye(3, device="tpu"), torch.full((2, 2), 3.0, device="tpu"))),
        ("dtypes", lambda: (a.double() * 2, a.half() + 1, a.to(torch.int8) + 1, (a > 0).long().sum())),
        ("dtypes", lambda: (i.view(5, 1) * 2) @ i.view(1, 5)),  # int64 matmul (no s64 dot on TPU)
    ]


def main():
    mlp_adamw()
    failed = {}
    for k, (family, fn) in enumerate(extra_ops()):
        try:
            out = fn()
            torch.utils._pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, out)
        except Exception as e:  # a CPU-side failure is not what this workload measures
            failed[f"{family}#{k}"] = str(e).splitlines()[0][:200]
    torch.tpu.synchronize()
    stats = torch_tpu.aot.stats()
    stats["fingerprint"] = stats["fingerprint"].hex()
    stats["failed_on_cpu"] = failed
    stats["fallbacks"] = torch_tpu.metrics.counters()["fallbacks"]
    stats["report"] = torch_tpu.metrics.report()
    before = stats["estimated_seconds"]
    torch_tpu.metrics.reset()
    stats["estimated_after_reset"] = torch_tpu.aot.stats()["estimated_seconds"]
    mlp_adamw(steps=1)  # plans are cached: estimates accumulate per op run, not per compile
    stats["estimated_one_step"] = torch_tpu.aot.stats()["estimated_seconds"]
    stats["estimated_before_reset"] = before
    print("AOT_STATS " + json.dumps(stats))


if __name__ == "__main__":
    main()
