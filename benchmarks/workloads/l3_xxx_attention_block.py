"""Pre-norm attention block: LayerNorm, QKV projection, head split (view/transpose), causal SDPA, merge heads, output projection, residual."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.ln = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.n_heads = n_heads

    def forward(self, x):
        B, T, C = x.size()
        h = self.ln(x)
        q, k, v = self.qkv(h).split(C, dim=2)
        q = q.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        k = k.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        v = v.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return x + self.proj(y)


batch_size = 2
seq_len = 32
d_model = 64
n_heads = 4


def get_inputs():
    return [torch.rand(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, n_heads]
