"""Small, real-architecture workloads shared by benchmarks/compile.py and the compile tests.

- an MLP training step (forward, backward, AdamW),
- a tiny Llama decode step (transformers LlamaForCausalLM, StaticCache, one token),
- an SD3-style MMDiT joint transformer block (adaLN modulation, joint attention over text and
  image tokens with qk RMSNorm, tanh-GELU MLPs): the block Stable Diffusion 3.5 repeats.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.LayerNorm(512), nn.Linear(512, 512), nn.GELU(),
                         nn.Linear(512, 10))


class MMDiTBlock(nn.Module):
    """One joint block of SD3's MMDiT: image tokens x and text tokens c attend jointly."""

    def __init__(self, dim=256, heads=4):
        super().__init__()
        self.heads = heads
        head_dim = dim // heads
        self.ada_x = nn.Linear(dim, 6 * dim)
        self.ada_c = nn.Linear(dim, 6 * dim)
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.qkv_x = nn.Linear(dim, 3 * dim)
        self.qkv_c = nn.Linear(dim, 3 * dim)
        self.q_norm, self.k_norm = nn.RMSNorm(head_dim, eps=1e-6), nn.RMSNorm(head_dim, eps=1e-6)
        self.out_x, self.out_c = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.mlp_x = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))
        self.mlp_c = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))

    def _heads(self, t):
        b, n, d = t.shape
        return t.view(b, n, self.heads, d // self.heads).transpose(1, 2)

    def forward(self, x, c, temb):
        mods_x = self.ada_x(F.silu(temb))[:, None].chunk(6, dim=-1)
        mods_c = self.ada_c(F.silu(temb))[:, None].chunk(6, dim=-1)
        hx = self.norm(x) * (1 + mods_x[1]) + mods_x[0]
        hc = self.norm(c) * (1 + mods_c[1]) + mods_c[0]
        qx, kx, vx = self.qkv_x(hx).chunk(3, dim=-1)
        qc, kc, vc = self.qkv_c(hc).chunk(3, dim=-1)
        q = self.q_norm(self._heads(torch.cat([qc, qx], dim=1)))
        k = self.k_norm(self._heads(torch.cat([kc, kx], dim=1)))
        v = self._heads(torch.cat([vc, vx], dim=1))
        attn = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)
        ac, ax = attn[:, : c.shape[1]], attn[:, c.shape[1]:]
        x = x + mods_x[2] * self.out_x(ax)
        c = c + mods_c[2] * self.out_c(ac)
        x = x + mods_x[5] * self.mlp_x(self.norm(x) * (1 + mods_x[4]) + mods_x[3])
        c = c + mods_c[5] * self.mlp_c(self.norm(c) * (1 + mods_c[4]) + mods_c[3])
        return x, c


def mmdit_block(seed=0, dim=256, heads=4):
    torch.manual_seed(seed)
    return MMDiTBlock(dim, heads).eval()


def mmdit_inputs(seed=1, batch=2, image_tokens=256, text_tokens=77, dim=256):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, image_tokens, dim, generator=g), torch.randn(batch, text_tokens, dim, generator=g),
            torch.randn(batch, dim, generator=g))


def tiny_llama(seed=0):
    import transformers

    config = transformers.LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                                      num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=256)
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(config).eval()
