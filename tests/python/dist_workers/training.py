"""DTensor, DDP and FSDP2 on the tpu backend against one CPU process on the global batch."""
import copy

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.testing import assert_close

from common import finish, passed, rank_data, start

rank, world = start()
dev = torch.device("tpu")
mesh = init_device_mesh("tpu", (world,))

# DTensor: a row-sharded @ column-sharded matmul equals the unsharded product.
a, b = rank_data(0, (8, 12)), rank_data(1, (12, 6))  # same on every rank
da = distribute_tensor(a.to(dev), mesh, [Shard(0)])
db = distribute_tensor(b.to(dev), mesh, [Replicate()])
dc = da @ db
assert dc.to_local().device.type == "tpu"
assert_close(dc.full_tensor().cpu(), a @ b)
da = distribute_tensor(a.to(dev), mesh, [Shard(1)])
db = distribute_tensor(b.to(dev), mesh, [Shard(0)])
assert_close((da @ db).full_tensor().cpu(), a @ b)  # partial sums, then an all-reduce
assert_close(da.redistribute(mesh, [Replicate()]).to_local().cpu(), a)
passed("dtensor_matmul")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(10, 32)
        self.l2 = torch.nn.Linear(32, 32)
        self.l3 = torch.nn.Linear(32, 3)

    def forward(self, x):
        return self.l3(torch.relu(self.l2(torch.relu(self.l1(x)))))


torch.manual_seed(0)
reference = Net()
STEPS, PER_RANK = 4, 4
batches = [(rank_data(50 + s, (world * PER_RANK, 10)), rank_data(80 + s, (world * PER_RANK,), torch.int64) % 3)
           for s in range(STEPS)]


def cpu_losses():
    model = copy.deepcopy(reference)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for x, y in batches:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


def local_batch(x, y):
    sl = slice(rank * PER_RANK, (rank + 1) * PER_RANK)
    return x[sl].to(dev), y[sl].to(dev)


def train(model, opt):
    losses = []
    for x, y in batches:
        lx, ly = local_batch(x, y)
        loss = torch.nn.functional.cross_entropy(model(lx), ly)
        opt.zero_grad()
        loss.backward()
        opt.step()
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss, op=dist.ReduceOp.AVG)
        losses.append(global_loss.item())
    return losses


expected, cpu_model = cpu_losses()

ddp = torch.nn.parallel.DistributedDataParallel(copy.deepcopy(reference).to(dev))
losses = train(ddp, torch.optim.AdamW(ddp.parameters(), lr=1e-2))
assert_close(torch.tensor(losses), torch.tensor(expected), rtol=1e-5, atol=1e-6)
for p, q in zip(ddp.module.parameters(), cpu_model.parameters()):
    assert_close(p.detach().cpu(), q.detach(), rtol=1e-4, atol=1e-5)
passed("ddp")

from torch.distributed.fsdp import fully_shard  # noqa: E402

fsdp = copy.deepcopy(reference).to(dev)
for layer in (fsdp.l1, fsdp.l2, fsdp.l3):
    fully_shard(layer, mesh=mesh)
fully_shard(fsdp, mesh=mesh)
local = fsdp.l2.weight.to_local()
assert local.device.type == "tpu" and local.shape[0] == 32 // world, local.shape
losses = train(fsdp, torch.optim.AdamW(fsdp.parameters(), lr=1e-2))
assert_close(torch.tensor(losses), torch.tensor(expected), rtol=1e-5, atol=1e-6)
for p, q in zip(fsdp.parameters(), cpu_model.parameters()):
    assert_close(p.full_tensor().detach().cpu(), q.detach(), rtol=1e-4, atol=1e-5)
passed("fsdp2")

finish()
