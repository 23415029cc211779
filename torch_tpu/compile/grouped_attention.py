"""Grouped-query attention without the repeated keys and values, in compiled graphs.

With an attention mask, Transformers repeats each key/value head for its group of query heads
before scaled_dot_product_attention (`repeat_kv`: unsqueeze, expand, then a reshape that copies),
so a graph materialises keys and values G times over. A TPU then writes and reads the repeats
through HBM every step: at a decode step of Qwen3.5-9B with a batch of 8 and 1024 cached
positions, libtpu's module moved 4.8 GB more than the step needs (docs/transformers.md). Our
attention rules take grouped heads directly (lowering/attention.cc: each group attends to its
shared head, which is what the repeat means), so the repeat is dropped where it only feeds the
attention; the values are the same.
"""
import torch
import torch.fx

aten = torch.ops.aten

# Forward attention ops with rules that take k and v with fewer heads than q (args 1 and 2).
ATTENTION = (aten._scaled_dot_product_efficient_attention.default,
             aten._scaled_dot_product_flash_attention_for_cpu.default)
_RESHAPES = (aten._unsafe_view.default, aten.view.default, aten.reshape.default)


def _shape(node):
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None


def _repeated_heads(node):
    """(x, G) when `node` is x [B, Hkv, L, E] with each head repeated G times in place
    ([B, Hkv * G, L, E] from unsqueeze(x, 2), expand to [B, Hkv, G, L, E], an optional clone and
    a reshape), else None."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function" or node.target not in _RESHAPES:
        return None
    source = node.args[0]
    if source.op == "call_function" and source.target == aten.clone.default:
        source = source.args[0]
    if source.op != "call_function" or source.target != aten.expand.default:
        return None
    unsqueezed = source.args[0]
    if (unsqueezed.op != "call_function" or unsqueezed.target != aten.unsqueeze.default
            or unsqueezed.args[1] not in (2, -3)):
        return None
    x = unsqueezed.args[0]
    xs, es, out = _shape(x), _shape(source), _shape(node)
    if xs is None or es is None or out is None or len(xs) != 4 or len(es) != 5:
        return None
    b, hkv, length, e = xs
    group = es[2]
    if es != (b, hkv, group, length, e) or out != (b, hkv * group, length, e):
        return None
    return x, group


def drop_repeated_kv(gm: torch.fx.GraphModule) -> int:
    """Points each attention whose keys and values are both repeated heads (one group size) at
    the unrepeated ones; returns how many it changed. The repeats stay where anything else
    reads them (a training graph saves them for the backward)."""
    changed = 0
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in ATTENTION or len(node.args) < 3:
            continue
        k, v = _repeated_heads(node.args[1]), _repeated_heads(node.args[2])
        if k is None or v is None or k[1] != v[1] or k[1] < 2:
            continue
        repeats = node.args[1:3]
        node.args = (node.args[0], k[0], v[0], *node.args[3:])
        for repeat in repeats:
            _erase_unused_chain(gm.graph, repeat)
        changed += 1
    if changed:
        gm.recompile()
    return changed


def _erase_unused_chain(graph, node):
    """Erases the reshape, clone, expand and unsqueeze of a repeat that nothing reads any more
    (only these: nothing else in the graph is touched)."""
    while (isinstance(node, torch.fx.Node) and not node.users and node.op == "call_function"
           and node.target in (*_RESHAPES, aten.clone.default, aten.expand.default, aten.unsqueeze.default)):
        source = node.args[0]
        graph.erase_node(node)
        node = source
