"""Transformers tensor parallelism on tpu (torchrun): from_pretrained(tp_plan="auto") loads each
rank's shard onto its chip; greedy tokens equal one CPU process; per-rank device bytes shrink.

argv: checkpoint directory, max new tokens. Transformers initialises torch.distributed itself
(backend "tpu_dist", its name for the tpu device).
"""
import json
import os
import sys

os.environ.setdefault("TORCH_TPU_QUIET", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import transformers  # noqa: E402
from torch.distributed.tensor import DTensor  # noqa: E402

from common import finish, passed  # noqa: E402

path, new_tokens = sys.argv[1], int(sys.argv[2])
model = transformers.AutoModelForCausalLM.from_pretrained(path, tp_plan="auto", dtype=torch.float32)
rank, world = dist.get_rank(), dist.get_world_size()
assert dist.get_backend() == "tpu_dist", dist.get_backend()
assert model.device == torch.device("tpu", 0), model.device

full_bytes = sum(p.numel() * p.element_size() for p in model.parameters())  # DTensor numel is global
local_bytes = sum((p.to_local() if isinstance(p, DTensor) else p).nbytes for p in model.parameters())
device_bytes = torch.tpu.memory_allocated()
peak_device_bytes = torch.tpu.max_memory_allocated()  # the whole load: no rank held the full model
assert local_bytes <= device_bytes, (local_bytes, device_bytes)
peak_rss_kb = int(next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1])

prompts = [[1, 5, 9, 33, 2, 7], [1, 100, 101, 17, 4, 4]]
ids = torch.tensor(prompts, device=model.device)
out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens, do_sample=False)

cpu = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
cpu_ids = torch.tensor(prompts)
expected = cpu.generate(cpu_ids, attention_mask=torch.ones_like(cpu_ids), max_new_tokens=new_tokens, do_sample=False)
assert out.cpu().tolist() == expected.tolist(), (out.cpu().tolist(), expected.tolist())
passed("tp_generate_matches_cpu")

# StaticCache: transformers compiles the forward with backend "tpu" by itself; the plan's
# all-reduces run through the c10d backend between the compiled parts.
import torch_tpu.compile.stats as compile_stats  # noqa: E402

static = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens, do_sample=False,
                        cache_implementation="static")
assert static.cpu().tolist() == expected.tolist(), (static.cpu().tolist(), expected.tolist())
assert compile_stats.graphs and compile_stats.collectives["_c10d_functional::all_reduce.default"] > 0, (
    compile_stats.graphs, compile_stats.collectives)
passed("tp_static_cache_compiled_matches_cpu")

memory = json.dumps({"rank": rank, "world": world, "full_param_bytes": full_bytes,
                                 "local_param_bytes": local_bytes, "device_allocated_bytes": device_bytes,
                                 "peak_device_bytes": peak_device_bytes,
                                 "peak_rss_kb": peak_rss_kb})
with open(os.path.join(os.environ["TPU_DIST_RESULTS"], f"memory{rank}.json"), "w") as f:
    f.write(memory)
if world >= 4:
    assert peak_device_bytes <= 0.35 * full_bytes, (peak_device_bytes, full_bytes)
    passed("tp_memory_per_rank")
finish()
