"""Prints docs/op_coverage.md: how each ATen operator of Google TorchTPU 0.2.0's list
(docs/reference/torchtpu_0.2.0_aten_ops.txt) runs on our `tpu` device.

Classes, for an operator name (all its overloads together):
  lowered               one overload has our kernel: in `_C._register_kernels()` (lowered to
                        StableHLO) or an explicit PrivateUse1 kernel (views, copies, factories, ...)
  decomposed upstream   no kernel of ours, but a CompositeImplicitAutograd or
                        CompositeExplicitAutograd(NonFunctional) kernel, which runs for every
                        backend; a representative call (built from the schema by the fuzzer's case
                        generator, float32 inputs) is run on tpu: "verified" when it ran with no CPU
                        fallback, else the ops it fell back on are named (class: CPU fallback)
  CPU fallback          everything else: runs on the CPU through the boxed fallback
  not applicable        nested/jagged tensors, quantization, cuDNN- or sparse-specific kernels
"""
import collections
import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TORCH_TPU_QUIET", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch_tpu  # noqa: E402,F401
from torch_tpu import _C  # noqa: E402

REFERENCE = ROOT / "docs" / "reference" / "torchtpu_0.2.0_aten_ops.txt"
COMPOSITE_KEYS = ("CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")
LOWERED, DECOMPOSED, FALLBACK, NA = "lowered", "decomposed upstream", "CPU fallback", "not applicable"
ATTEMPTS = 40  # generated argument sets tried per op until one runs on the CPU

NOT_APPLICABLE = {
    "nested": "nested/jagged tensors: no nested tensor layout on tpu",
    "quant": "quantization(-aware training) kernels: no quantized dtypes on tpu",
    "cudnn": "cuDNN-specific kernel (CUDA only)",
    "sparse": "sparse-layout gradient: no sparse tensors on tpu",
}


# Hand-written representative calls for composite ops the schema-driven generator cannot build
# (exec'd with `dev` = "cpu", which must succeed, then "tpu"). F = torch.nn.functional.
_R = "torch.randn({}, device=dev)"
_I = "torch.tensor({}, device=dev)"
REPRESENTATIVE = {
    "__lshift__": f"torch.ops.aten.__lshift__.Tensor({_I.format([1, 2, 3])}, {_I.format([1, 1, 2])})",
    "__rshift__": f"torch.ops.aten.__rshift__.Tensor({_I.format([8, 2, 3])}, {_I.format([1, 1, 2])})",
    "bitwise_left_shift": f"torch.bitwise_left_shift({_I.format([1, 2, 3])}, {_I.format([1, 1, 2])})",
    "bitwise_right_shift": f"torch.bitwise_right_shift({_I.format([8, 2, 3])}, {_I.format([1, 1, 2])})",
    "lcm": f"torch.lcm({_I.format([4, 6])}, {_I.format([6, 4])})",
    "bincount": f"torch.bincount({_I.format([0, 1, 1, 3])})",
    "tril_indices": "torch.tril_indices(3, 3, device=dev)",
    "segment_reduce": f"torch.ops.aten.segment_reduce({_R.format(6)}, 'sum', lengths={_I.format([2, 4])})",
    "native_norm": f"torch.ops.aten.native_norm({_R.format('3, 4')})",
    "_fused_dropout": f"torch.ops.aten._fused_dropout({_R.format('4, 4')}, 0.5)",
    "_adaptive_avg_pool3d": f"torch.ops.aten._adaptive_avg_pool3d({_R.format('1, 2, 4, 4, 4')}, [2, 2, 2])",
    "adaptive_avg_pool3d": f"F.adaptive_avg_pool3d({_R.format('1, 2, 4, 4, 4')}, 2)",
    "avg_pool1d": f"F.avg_pool1d({_R.format('1, 2, 6')}, 2)",
    "avg_pool3d": f"F.avg_pool3d({_R.format('1, 2, 4, 4, 4')}, 2)",
    "avg_pool3d_backward": f"torch.ops.aten.avg_pool3d_backward({_R.format('1, 2, 2, 2, 2')}, "
                           f"{_R.format('1, 2, 4, 4, 4')}, [2, 2, 2], [2, 2, 2], [0, 0, 0], False, True, None)",
    "upsample_nearest1d": f"F.interpolate({_R.format('1, 2, 5')}, scale_factor=2.0, mode='nearest')",
    "upsample_linear1d": f"F.interpolate({_R.format('1, 2, 5')}, scale_factor=2.0, mode='linear')",
    "upsample_nearest3d": f"F.interpolate({_R.format('1, 2, 3, 3, 3')}, scale_factor=2.0, mode='nearest')",
    "_upsample_nearest_exact1d": f"F.interpolate({_R.format('1, 2, 5')}, scale_factor=2.0, mode='nearest-exact')",
    "_upsample_nearest_exact3d": f"F.interpolate({_R.format('1, 2, 3, 3, 3')}, scale_factor=2.0, mode='nearest-exact')",
    "upsample_nearest1d_backward": f"torch.ops.aten.upsample_nearest1d_backward({_R.format('1, 2, 10')}, [10], [1, 2, 5])",
    "upsample_nearest3d_backward": f"torch.ops.aten.upsample_nearest3d_backward({_R.format('1, 2, 6, 6, 6')}, "
                                   "[6, 6, 6], [1, 2, 3, 3, 3])",
    "_upsample_nearest_exact1d_backward": f"torch.ops.aten._upsample_nearest_exact1d_backward({_R.format('1, 2, 10')}, "
                                          "[10], [1, 2, 5])",
    "_upsample_nearest_exact3d_backward": f"torch.ops.aten._upsample_nearest_exact3d_backward("
                                          f"{_R.format('1, 2, 6, 6, 6')}, [6, 6, 6], [1, 2, 3, 3, 3])",
    "upsample_bicubic2d_backward": f"torch.ops.aten.upsample_bicubic2d_backward({_R.format('1, 2, 6, 6')}, [6, 6], "
                                   "[1, 2, 3, 3], False)",
    "reflection_pad3d": f"F.pad({_R.format('1, 2, 3, 3, 3')}, [1] * 6, mode='reflect')",
    "reflection_pad3d_backward": f"torch.ops.aten.reflection_pad3d_backward({_R.format('1, 2, 5, 5, 5')}, "
                                 f"{_R.format('1, 2, 3, 3, 3')}, [1] * 6)",
    "replication_pad2d": f"F.pad({_R.format('1, 2, 3, 3')}, [1] * 4, mode='replicate')",
    "replication_pad3d": f"F.pad({_R.format('1, 2, 3, 3, 3')}, [1] * 6, mode='replicate')",
    "grid_sampler_2d": f"F.grid_sample({_R.format('1, 2, 4, 4')}, torch.rand(1, 3, 3, 2, device=dev) * 2 - 1, "
                       "align_corners=False)",
    "grid_sampler_3d": f"F.grid_sample({_R.format('1, 2, 4, 4, 4')}, torch.rand(1, 2, 2, 2, 3, device=dev) * 2 - 1, "
                       "align_corners=False)",
    "grid_sampler_2d_backward": "x = torch.randn(1, 2, 4, 4, device=dev, requires_grad=True)\n"
                                "F.grid_sample(x, torch.rand(1, 3, 3, 2, device=dev) * 2 - 1, align_corners=False).sum().backward()",
    "grid_sampler_3d_backward": "x = torch.randn(1, 2, 4, 4, 4, device=dev, requires_grad=True)\n"
                                "F.grid_sample(x, torch.rand(1, 2, 2, 2, 3, device=dev) * 2 - 1, align_corners=False).sum().backward()",
    "ctc_loss": "F.ctc_loss(torch.randn(6, 2, 4, device=dev).log_softmax(2), torch.tensor([[1, 2], [1, 3]], device=dev), "
                "torch.tensor([6, 6], device=dev), torch.tensor([2, 2], device=dev))",
    "_ctc_loss": "torch.ops.aten._ctc_loss(torch.randn(6, 2, 4, device=dev).log_softmax(2), "
                 "torch.tensor([[1, 2], [1, 3]], device=dev), [6, 6], [2, 2])",
    "_ctc_loss_backward": "x = torch.randn(6, 2, 4, device=dev).log_softmax(2).detach().requires_grad_()\n"
                          "F.ctc_loss(x, torch.tensor([[1, 2], [1, 3]], device=dev), torch.tensor([6, 6], device=dev), "
                          "torch.tensor([2, 2], device=dev)).backward()",
    "_embedding_bag_forward_only": f"F.embedding_bag({_I.format([1, 2, 4, 5])}, {_R.format('10, 3')}, {_I.format([0, 2])})",
    "_embedding_bag": f"F.embedding_bag({_I.format([1, 2, 4, 5])}, torch.randn(10, 3, device=dev, requires_grad=True), "
                      f"{_I.format([0, 2])})",
    "gru": "torch.nn.GRU(3, 4).to(dev)(torch.randn(5, 1, 3, device=dev))",
    "linear_backward": f"torch.ops.aten.linear_backward({_R.format('2, 3')}, {_R.format('2, 4')}, {_R.format('4, 3')}, "
                       "[True, True, True])",
    "native_batch_norm_backward": f"torch.ops.aten.native_batch_norm_backward({_R.format('2, 3, 4')}, "
                                  f"{_R.format('2, 3, 4')}, {_R.format(3)}, {_R.format(3)}, torch.rand(3, device=dev), "
                                  f"{_R.format(3)}, torch.rand(3, device=dev), True, 1e-5, [True, True, True])",
    "linalg_lu_solve": "LU, piv = torch.linalg.lu_factor(torch.randn(3, 3) + 3 * torch.eye(3))\n"
                       "torch.linalg.lu_solve(LU.to(dev), piv.to(dev), torch.randn(3, 2, device=dev))",
    "_thnn_fused_gru_cell": f"torch.ops.aten._thnn_fused_gru_cell({_R.format('2, 9')}, {_R.format('2, 9')}, "
                            f"{_R.format('2, 3')})",
    "_thnn_fused_lstm_cell": f"torch.ops.aten._thnn_fused_lstm_cell({_R.format('2, 12')}, {_R.format('2, 12')}, "
                             f"{_R.format('2, 3')})",
    "_native_multi_head_attention": f"q = {_R.format('1, 3, 4')}\ntorch.ops.aten._native_multi_head_attention(q, q, q, 4, 2, "
                                    f"{_R.format('12, 4')}, {_R.format(12)}, {_R.format('4, 4')}, {_R.format(4)})",
    "_scaled_dot_product_fused_attention_overrideable": f"q = {_R.format('1, 2, 3, 4')}\n"
        "torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, q, q)",
}


def run_representative(name):
    """(ok, note) for REPRESENTATIVE[name], or None when the CPU rejects the call."""
    from tests.fuzz.execute import _fallbacks
    code = REPRESENTATIVE[name]
    for dev in ("cpu", "tpu"):
        torch.manual_seed(0)
        ns = {"torch": torch, "F": torch.nn.functional, "dev": dev}
        before = _fallbacks()
        try:
            exec(code, ns)
            if dev == "tpu":
                torch.tpu.synchronize()
        except Exception as e:  # noqa: BLE001
            if dev == "cpu":
                return None
            return False, f"a representative call raised {type(e).__name__} on tpu (CPU ran it)"
        fell = sorted(op for op, n in _fallbacks().items() if n != before.get(op, 0))
        if dev == "tpu" and fell:
            return False, f"a representative call falls back: {', '.join(fell)}"
    return True, "verified: a representative call ran with no fallback"


def not_applicable(name):
    if "_nested_" in name or "jagged" in name:
        return NOT_APPLICABLE["nested"]
    if "quantize" in name or name.endswith("_obs_fq_helper"):
        return NOT_APPLICABLE["quant"]
    if "cudnn" in name:
        return NOT_APPLICABLE["cudnn"]
    if "sparse" in name:
        return NOT_APPLICABLE["sparse"]
    return None


def has_kernel(op, key):
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{op}", key)
    except RuntimeError:  # a TorchScript builtin overload, not a dispatcher op
        return False


def overloads(name):
    return [name + ("." + s.overload_name if s.overload_name else "")
            for s in torch._C._jit_get_schemas_for_operator(f"aten::{name}")
            if has_kernel(name + ("." + s.overload_name if s.overload_name else ""), "CPU")
            or any(has_kernel(name + ("." + s.overload_name if s.overload_name else ""), k)
                   for k in COMPOSITE_KEYS + ("PrivateUse1", "Meta"))]


def verify(ops):
    """Runs one generated call of the first of `ops` (functional overloads first) that the CPU
    accepts; returns (ok, note)."""
    from tests.fuzz import classify, execute
    from tests.fuzz.cases import make_case
    for op in ops:
        for i in range(ATTEMPTS):
            try:
                case = make_case(0, i, ops=[op], plain=True)
            except RuntimeError:
                break  # an argument type the generator does not build
            res = execute.run_case(case)
            if res["cls"] == classify.FALLBACK:
                return False, f"`{op}` falls back: {res['detail'].split(': ', 1)[1]}"
            if res["cls"] in (classify.BOTH_RAISE, classify.CPU_RAISE):
                continue
            if res["cls"] == classify.TPU_RAISE:
                # The exception type only: messages carry plugin-version-specific text.
                return False, f"`{op}` raised {res['detail'][4:].split(':')[0]} on tpu (CPU ran it)"
            return True, f"verified: `{op}` ran with no fallback"
    return None, "not verified (no generated call ran on the CPU)"


def verify_isolated(jobs):
    """verify() for each (name, ops) in a subprocess, so a crashing call is recorded as a crash
    and the rest continue in a fresh process. {name: (ok, note)}"""
    results, pending = {}, list(jobs)
    while pending:
        proc = subprocess.Popen([sys.executable, __file__, "--verify"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        out, _ = proc.communicate("".join(json.dumps(job) + "\n" for job in pending))
        for line in out.splitlines():
            name, ok, note = json.loads(line)
            results[name] = (ok, note)
        rest = [job for job in pending if job[0] not in results]
        if rest:
            code = proc.returncode
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            results[rest[0][0]] = (False, f"a generated call of `{rest[0][1][0]}` crashed the process ({how})")
            rest = rest[1:]
        pending = rest
    return results


def _verify_server():
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    for line in sys.stdin:
        name, ops = json.loads(line)
        res = run_representative(name) if name in REPRESENTATIVE else None
        ok, note = res if res is not None else verify(ops)
        proto.write(json.dumps([name, ok, note]) + "\n")


def classify_all():
    registered = set(_C._register_kernels())
    rows, jobs = [], []
    for name in REFERENCE.read_text().split():
        reason = not_applicable(name)
        ovs = overloads(name)
        if reason:
            rows.append((name, NA, reason))
            continue
        if not ovs:
            rows.append((name, FALLBACK, "no such operator in this PyTorch"))
            continue
        ours = [o for o in ovs if o in registered]
        explicit = [o for o in ovs if o not in registered and has_kernel(o, "PrivateUse1")]
        if ours or explicit:
            note = (f"{len(ours)} lowered overload(s)" if ours else "") + \
                   (", " if ours and explicit else "") + (f"explicit kernel: {', '.join(explicit[:3])}" if explicit else "")
            rows.append((name, LOWERED, note))
            continue
        composite = [o for o in ovs if any(has_kernel(o, k) for k in COMPOSITE_KEYS)]
        if not composite:
            rows.append((name, FALLBACK, "no tpu kernel, no decomposition"))
            continue
        keys = sorted({k.replace("Composite", "") for o in composite for k in COMPOSITE_KEYS if has_kernel(o, k)})
        functional = sorted(composite, key=lambda o: (o.split(".")[0].endswith("_"), "out" in o, o))
        jobs.append((name, functional))
        rows.append((name, DECOMPOSED, "/".join(keys)))
    verified = verify_isolated(jobs)
    for i, (name, cls, note) in enumerate(rows):
        if name in verified:
            ok, how = verified[name]
            rows[i] = (name, FALLBACK if ok is False else DECOMPOSED, f"{note}; {how}")
    return rows


def table() -> str:
    rows = classify_all()
    counts = collections.Counter(cls for _, cls, _ in rows)
    verified = sum(1 for _, cls, note in rows if cls == DECOMPOSED and "verified:" in note)
    lines = [
        "# Op coverage against Google TorchTPU 0.2.0",
        "",
        "Generated by `make docs` (tools/gen_op_coverage.py); a test keeps it current. For each of the",
        f"{len(rows)} ATen operators in Google TorchTPU 0.2.0's list",
        "(docs/reference/torchtpu_0.2.0_aten_ops.txt), how it runs on our `tpu` device:",
        "",
        "| class | operators |",
        "|---|---|",
        f"| lowered (our StableHLO lowering or explicit tpu kernel) | {counts[LOWERED]} |",
        f"| decomposed upstream (PyTorch composite kernel over our ops) | {counts[DECOMPOSED]} "
        f"({verified} verified by a call with no CPU fallback) |",
        f"| CPU fallback (no kernel, or the decomposition reaches a CPU fallback) | {counts[FALLBACK]} |",
        f"| not applicable (nested/jagged, quantization, cuDNN, sparse) | {counts[NA]} |",
        "",
        "Lowered means at least one overload is ours; other overloads (often `out=` or Scalar",
        "forms) may still decompose or fall back. \"Verified\" calls are hand-written (REPRESENTATIVE in",
        "the tool) or built from the schema by the fuzzer's generator (tests/fuzz, float32 inputs); a",
        "decomposition can still fall back for",
        "other dtypes or arguments. Fallbacks are counted at run time in `torch_tpu.metrics.report()`.",
        "",
        "| operator | class | notes |",
        "|---|---|---|",
    ]
    lines += [f"| `{name}` | {cls} | {note} |" for name, cls, note in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--verify"]:
        _verify_server()
    else:
        sys.stdout.write(table())
