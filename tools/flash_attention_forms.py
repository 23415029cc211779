"""Writes StableHLO attention modules in the forms docs/tpu_aot.md ("Flash attention") compares:
which of them libtpu's flash-attention pass rewrites into its kernel (issue 30).

    python tools/flash_attention_forms.py OUT_DIR
    LIBTPU_INIT_ARGS="--vmodule=flash_attention=5 --v=0 --logtostderr --stderrthreshold=0" \\
      build-tools/tpu_libtpu_compile OUT_DIR/*.mlir     # -DTORCH_TPU_BUILD_TOOLS=ON

The pass logs "attention config: {...}" and "module changed" for a form it takes, and its reason
("input and v element types must match", "padding not supported", ...) or "module unchanged".
"""
import os
import sys


def attention(*, B=1, H=8, KH=None, L=2048, E=128, dt="bf16", scale="q", normalise="before", probs=None,
              mask=None, softcap=None, lse=False, guard=False, false_value="0xFF800000"):
    """softmax(q k^T * s [+ mask]) v as one module. scale: "q" (q * s before the product),
    "scores" (s * scores), None; normalise: "before" (p / sum, then the product with v) or
    "after" (the product, then / sum); probs: the dtype p is rounded to for the product;
    false_value: the masked scores' f32 constant (-inf by default; 0xFF7FFFFF is finfo.min)."""
    KH = KH or H
    probs = probs or dt
    T = lambda h, l, e, t: f"tensor<{B}x{h}x{l}x{e}x{t}>"
    q, kv, o = T(H, L, E, dt), T(KH, L, E, dt), T(H, L, E, dt)
    S, P, R = T(H, L, L, "f32"), T(H, L, L, probs), f"tensor<{B}x{H}x{L}xf32>"
    out = []
    a = out.append
    args = f"%q: {q}, %k: {kv}, %v: {kv}" + (f", %keep: tensor<{L}x{L}xi1>" if mask == "bool" else "")
    results = f"{o}, {R}" if lse else o
    a(f"func.func public @main({args}) -> ({results}) {{")
    k, v = "%k", "%v"
    if KH != H:  # grouped-query attention: k/v heads repeated
        g = T(KH, L, E, dt).replace(f"x{L}x", f"x{H // KH}x{L}x")
        for x in ("k", "v"):
            a(f"  %{x}b = stablehlo.broadcast_in_dim %{x}, dims = [0, 1, 3, 4] : ({kv}) -> {g}")
            a(f"  %{x}r = stablehlo.reshape %{x}b : ({g}) -> {q}")
        k, v = "%kr", "%vr"
    x = "%q"
    if scale == "q":
        a(f"  %sq = stablehlo.constant dense<{E ** -0.5}> : {q}")
        a(f"  %qs = stablehlo.multiply %q, %sq : {q}")
        x = "%qs"
    a(f"  %s0 = stablehlo.dot_general {x}, {k}, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3] : ({q}, {q}) -> {S}")
    s = "%s0"
    if scale == "scores":
        a(f"  %ss = stablehlo.constant dense<{E ** -0.5}> : {S}")
        a(f"  %s1 = stablehlo.multiply {s}, %ss : {S}")
        s = "%s1"
    if softcap:
        a(f"  %cap = stablehlo.constant dense<{softcap}> : {S}")
        a(f"  %sd = stablehlo.divide {s}, %cap : {S}")
        a(f"  %st = stablehlo.tanh %sd : {S}")
        a(f"  %s2 = stablehlo.multiply %st, %cap : {S}")
        s = "%s2"
    if mask:
        pred = T(H, L, L, "i1")
        if mask == "causal":
            it = f"tensor<{L}x{L}xi32>"
            a(f"  %r = stablehlo.iota dim = 0 : {it}")
            a(f"  %c = stablehlo.iota dim = 1 : {it}")
            a(f"  %keep = stablehlo.compare GE, %r, %c : ({it}, {it}) -> tensor<{L}x{L}xi1>")
        a(f"  %keepb = stablehlo.broadcast_in_dim %keep, dims = [2, 3] : (tensor<{L}x{L}xi1>) -> {pred}")
        a(f"  %ninf = stablehlo.constant dense<{false_value}> : {S}")
        a(f"  %s3 = stablehlo.select %keepb, {s}, %ninf : {pred}, {S}")
        s = "%s3"
    a("  %mi = stablehlo.constant dense<0xFF800000> : tensor<f32>")
    a("  %zero = stablehlo.constant dense<0.0> : tensor<f32>")
    a(f"  %m = stablehlo.reduce({s} init: %mi) applies stablehlo.maximum across dimensions = [3] : ({S}, tensor<f32>) -> {R}")
    m = "%m"
    if guard:  # rows with nothing left: max -inf -> 0 (what the masked form does)
        a(f"  %minf = stablehlo.constant dense<0xFF800000> : {R}")
        a(f"  %dead = stablehlo.compare EQ, %m, %minf : ({R}, {R}) -> tensor<{B}x{H}x{L}xi1>")
        a(f"  %z = stablehlo.constant dense<0.0> : {R}")
        a(f"  %ms = stablehlo.select %dead, %z, %m : tensor<{B}x{H}x{L}xi1>, {R}")
        m = "%ms"
    a(f"  %mb = stablehlo.broadcast_in_dim {m}, dims = [0, 1, 2] : ({R}) -> {S}")
    a(f"  %d = stablehlo.subtract {s}, %mb : {S}")
    a(f"  %e = stablehlo.exponential %d : {S}")
    a(f"  %l = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [3] : ({S}, tensor<f32>) -> {R}")
    a(f"  %lb = stablehlo.broadcast_in_dim %l, dims = [0, 1, 2] : ({R}) -> {S}")
    p = "%e"
    if normalise == "before":
        a(f"  %p = stablehlo.divide %e, %lb : {S}")
        p = "%p"
    if probs != "f32":
        a(f"  %pc = stablehlo.convert {p} : ({S}) -> {P}")
        p = "%pc"
    v_t = kv if KH == H else q
    if probs == "f32" and dt != "f32":
        a(f"  %vf = stablehlo.convert {v} : ({v_t}) -> {T(H, L, E, 'f32')}")
        v, v_t = "%vf", T(H, L, E, "f32")
    O32 = T(H, L, E, "f32")
    a(f"  %o = stablehlo.dot_general {p}, {v}, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : ({P}, {v_t}) -> {O32}")
    ret = "%o"
    if normalise == "after":
        a(f"  %lo = stablehlo.broadcast_in_dim %l, dims = [0, 1, 2] : ({R}) -> {O32}")
        a(f"  %on = stablehlo.divide %o, %lo : {O32}")
        ret = "%on"
    if dt != "f32":
        a(f"  %oc = stablehlo.convert {ret} : ({O32}) -> {o}")
        ret = "%oc"
    if lse:
        a(f"  %ll = stablehlo.log %l : {R}")
        a(f"  %lse = stablehlo.add %m, %ll : {R}")
        a(f"  return {ret}, %lse : {o}, {R}")
    else:
        a(f"  return {ret} : {o}")
    a("}")
    return "module @attention {\n" + "\n".join(out) + "\n}\n"


FORMS = {
    "scale_on_q": dict(),
    "no_scale": dict(scale=None),
    "scale_on_scores": dict(scale="scores"),
    "normalise_after": dict(normalise="after"),
    "probs_f32": dict(probs="f32"),
    "row_max_guard": dict(guard=True),
    "returns_logsumexp": dict(lse=True),
    "float32": dict(dt="f32"),
    "gqa_8_2": dict(KH=2),
    "softcap_50": dict(softcap=50.0),
    "bool_mask": dict(mask="bool"),
    "causal": dict(mask="causal"),
    # The pass takes a mask only after a soft-cap (tanh(s / c) * c, then select(mask, s, false)):
    # a cap of 2^64 scales exactly and tanh(x) = x at that size in f32, so the module means plain
    # masked attention. A finite false value: the kernel subtracts each 512-block's own row max,
    # and a wholly masked block would give -inf - -inf = NaN.
    "softcap_50_causal_min": dict(softcap=50.0, mask="causal", false_value="0xFF7FFFFF"),
    "neutral_cap_causal_min": dict(softcap=2.0 ** 64, mask="causal", false_value="0xFF7FFFFF"),
    "neutral_cap_bool_min": dict(softcap=2.0 ** 64, mask="bool", false_value="0xFF7FFFFF"),
    "neutral_cap_causal_gqa_8_2": dict(softcap=2.0 ** 64, mask="causal", false_value="0xFF7FFFFF", KH=2),
    "neutral_cap_causal_1024": dict(softcap=2.0 ** 64, mask="causal", false_value="0xFF7FFFFF", L=1024),
    "length_640": dict(L=640),
    "length_1024": dict(L=1024),
    "qwen_image_4160": dict(H=24, L=4160),
    "qwen_image_4608": dict(H=24, L=4608),
}

if __name__ == "__main__":
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "flash_attention_forms"
    os.makedirs(out_dir, exist_ok=True)
    for name, kw in FORMS.items():
        with open(os.path.join(out_dir, f"{name}.mlir"), "w") as f:
            f.write(attention(**kw))
    print(f"{len(FORMS)} modules in {out_dir}")
