"""One rank of benchmarks/parallel.py (torchrun): load with tp_plan="auto", generate, report."""
import json
import os
import sys

os.environ.setdefault("TORCH_TPU_QUIET", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import transformers  # noqa: E402
from torch.distributed.tensor import DTensor  # noqa: E402

import torch_tpu  # noqa: E402

import timing  # noqa: E402  (benchmarks/timing.py: this script's folder is on sys.path)

path, new_tokens = sys.argv[1], int(sys.argv[2])
dist.init_process_group("tpu_dist")  # Transformers would too, except at world size 1


def load():
    if dist.get_world_size() == 1:  # Transformers leaves a tp_plan model of one rank on the CPU
        return transformers.AutoModelForCausalLM.from_pretrained(path, device_map="tpu", dtype=torch.float32)
    return transformers.AutoModelForCausalLM.from_pretrained(path, tp_plan="auto", dtype=torch.float32)


model, load_s = timing.timed(load, "tpu")
assert model.device.type == "tpu", model.device
full = sum(p.numel() * p.element_size() for p in model.parameters())
local = sum((p.to_local() if isinstance(p, DTensor) else p).nbytes for p in model.parameters())
ids = torch.tensor([[1, 5, 9, 33, 2, 7, 11, 13]], device=model.device)
mask = torch.ones_like(ids)


def generate():
    return model.generate(ids, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False)


generate()  # compiles
before = torch_tpu.distributed.transport_bytes()
out, decode_s = timing.timed(generate, "tpu")
after = torch_tpu.distributed.transport_bytes()
peak_rss_kb = int(next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1])
if dist.get_rank() == 0:
    print("RESULT " + json.dumps({
        "world": dist.get_world_size(), "load_s": load_s, "tokens_per_s": new_tokens / decode_s,
        "full_param_bytes": full, "local_param_bytes": local, "peak_device_bytes": torch.tpu.max_memory_allocated(),
        "peak_rss_mb": peak_rss_kb / 1024, "tokens": out[0].tolist(),
        "transport_bytes_per_token": (after["to_host"] - before["to_host"]) / new_tokens}), flush=True)
dist.barrier()
dist.destroy_process_group()
