"""Every collective of the tpu backend against a reference computed on the CPU (torchrun)."""
import torch
import torch.distributed as dist
from torch.testing import assert_close

from common import finish, passed, rank_data, start

rank, world = start()
dev = torch.device("tpu")
DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.complex64]
SHAPE = (3, 5)  # odd extents


def all_inputs(shape, dtype):
    return [rank_data(r, shape, dtype) for r in range(world)]


for dtype in DTYPES:
    xs = all_inputs(SHAPE, dtype)
    t = xs[rank].to(dev)
    dist.all_reduce(t)
    ref = xs[0].clone()
    for x in xs[1:]:
        ref = ref + x
    assert_close(t.cpu(), ref.to(dtype))
passed("all_reduce_sum")

xs = all_inputs(SHAPE, torch.float32)
stack = torch.stack(xs)
for op, ref in [(dist.ReduceOp.MAX, stack.amax(0)), (dist.ReduceOp.MIN, stack.amin(0)),
                (dist.ReduceOp.AVG, stack.mean(0)), (dist.ReduceOp.PRODUCT, stack.prod(0))]:
    t = xs[rank].to(dev)
    dist.all_reduce(t, op=op)
    assert_close(t.cpu(), ref)
passed("all_reduce_ops")

# NaN and inf in one rank's operand propagate to every rank.
t = torch.tensor([1.0, float("nan"), float("inf"), -0.0], device=dev) if rank == 0 else torch.ones(4, device=dev)
dist.all_reduce(t)
assert_close(t.cpu(), torch.tensor([1.0 + world - 1, float("nan"), float("inf"), world - 1.0]), equal_nan=True)
passed("all_reduce_nan_inf")

# A non-contiguous view is reduced in place through its storage.
base = torch.zeros(4, 6, device=dev)
view = base.t()[1:4]  # (3, 4), strided
dist.all_reduce(view.copy_(torch.full((3, 4), float(rank + 1))))
expect = torch.zeros(4, 6)
expect.t()[1:4] = sum(range(1, world + 1))
assert_close(base.cpu(), expect)
passed("all_reduce_view")

# 0-size tensors.
t = torch.empty(0, 3, device=dev)
dist.all_reduce(t)
assert t.shape == (0, 3)
passed("all_reduce_empty")

# PREMUL_SUM (FSDP's gradient scaling).
t = xs[rank].to(dev)
dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
assert_close(t.cpu(), stack.sum(0) * 0.5)
passed("all_reduce_premul_sum")

for src in range(world):
    t = rank_data(rank, SHAPE).to(dev)
    dist.broadcast(t, src=src)
    assert_close(t.cpu(), xs[src])
passed("broadcast")

t = xs[rank].to(dev)
dist.reduce(t, dst=world - 1)
if rank == world - 1:
    assert_close(t.cpu(), stack.sum(0))
passed("reduce")

for dtype in DTYPES + [torch.bool]:
    xs_d = all_inputs(SHAPE, dtype)
    out = [torch.empty(SHAPE, dtype=dtype, device=dev) for _ in range(world)]
    dist.all_gather(out, xs_d[rank].to(dev))
    for r in range(world):
        assert_close(out[r].cpu(), xs_d[r])
    big = torch.empty((world * SHAPE[0], SHAPE[1]), dtype=dtype, device=dev)
    dist.all_gather_into_tensor(big, xs_d[rank].to(dev))
    assert_close(big.cpu(), torch.cat(xs_d))
passed("all_gather")

out = [torch.empty(SHAPE, device=dev) for _ in range(world)] if rank == 0 else None
dist.gather(xs[rank].to(dev), out, dst=0)
if rank == 0:
    for r in range(world):
        assert_close(out[r].cpu(), xs[r])
passed("gather")

chunks = [rank_data(100 + r, SHAPE).to(dev) for r in range(world)] if rank == 0 else None
t = torch.empty(SHAPE, device=dev)
dist.scatter(t, chunks, src=0)
assert_close(t.cpu(), rank_data(100 + rank, SHAPE))
passed("scatter")

big = [rank_data(r, (world * 3, 5)) for r in range(world)]
total = torch.stack(big).sum(0)
t = torch.empty(3, 5, device=dev)
dist.reduce_scatter_tensor(t, big[rank].to(dev))
assert_close(t.cpu(), total[rank * 3:(rank + 1) * 3])
t = torch.empty(3, 5, device=dev)
dist.reduce_scatter_tensor(t, big[rank].to(dev), op=dist.ReduceOp.AVG)
assert_close(t.cpu(), total[rank * 3:(rank + 1) * 3] / world)
outs = torch.empty(3, 5, device=dev)
dist.reduce_scatter(outs, [c.to(dev) for c in big[rank].chunk(world)])
assert_close(outs.cpu(), total[rank * 3:(rank + 1) * 3])
passed("reduce_scatter")

# all_to_all_single with uneven splits: rank r sends r+1+j rows to rank j.
send_splits = [rank + 1 + j for j in range(world)]
recv_splits = [r + 1 + rank for r in range(world)]
inp = [rank_data(r, (sum(r + 1 + j for j in range(world)), 2)) for r in range(world)]
out = torch.empty(sum(recv_splits), 2, device=dev)
dist.all_to_all_single(out, inp[rank].to(dev), recv_splits, send_splits)
expect = torch.cat([inp[r].split([r + 1 + j for j in range(world)])[rank] for r in range(world)])
assert_close(out.cpu(), expect)
outs = [torch.empty(2, 2, device=dev) for _ in range(world)]
dist.all_to_all(outs, [torch.full((2, 2), float(rank * 10 + j), device=dev) for j in range(world)])
for r in range(world):
    assert_close(outs[r].cpu(), torch.full((2, 2), float(r * 10 + rank)))
passed("all_to_all")

# send/recv around a ring, and recv from any source.
right, left = (rank + 1) % world, (rank - 1) % world
if rank % 2 == 0:
    dist.send(torch.full((4,), float(rank), device=dev), dst=right)
    got = torch.empty(4, device=dev)
    dist.recv(got, src=left)
else:
    got = torch.empty(4, device=dev)
    dist.recv(got, src=left)
    dist.send(torch.full((4,), float(rank), device=dev), dst=right)
assert_close(got.cpu(), torch.full((4,), float(left)))
if rank == 0:
    got = torch.empty(1, device=dev)
    for _ in range(world - 1):
        src = dist.recv(got)
        assert_close(got.cpu(), torch.tensor([float(src)]))
else:
    dist.send(torch.tensor([float(rank)], device=dev), dst=0)
passed("send_recv")

# async work objects: wait() and the future's value.
t = xs[rank].to(dev)
work = dist.all_reduce(t, async_op=True)
assert work.wait()
assert work.is_completed()
assert_close(work.get_future().value()[0].cpu(), stack.sum(0))
passed("async_work")

# Coalesced all-reduce (DDP buckets, the coalescing manager).
a, b = xs[rank].to(dev), (xs[rank] * 2).to(dev)
with dist._coalescing_manager(async_ops=True) as cm:
    dist.all_reduce(a)
    dist.all_reduce(b)
cm.wait()
assert_close(a.cpu(), stack.sum(0))
assert_close(b.cpu(), stack.sum(0) * 2)
passed("coalesced")

# Objects: broadcast_object_list / all_gather_object go through the tpu device.
objs = [{"rank": rank}]
dist.broadcast_object_list(objs, src=0)
assert objs == [{"rank": 0}]
gathered = [None] * world
dist.all_gather_object(gathered, ("r", rank))
assert gathered == [("r", r) for r in range(world)]
passed("objects")

# Subgroups: even ranks only.
evens = list(range(0, world, 2))
group = dist.new_group(evens, backend="tpu")
if rank in evens:
    t = torch.ones(2, device=dev)
    dist.all_reduce(t, group=group)
    assert_close(t.cpu(), torch.full((2,), float(len(evens))))
passed("subgroup")

finish()
