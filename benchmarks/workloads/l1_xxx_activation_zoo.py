"""Element-wise activation chain: leaky_relu, elu, selu, softplus, softsign, hardswish, silu (KernelBench L1-20..32 family)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = F.leaky_relu(x - 0.5, negative_slope=0.1)
        x = F.elu(x, alpha=1.2) + F.selu(x)
        x = F.softplus(x) - F.softsign(x)
        return F.hardswish(x) * F.silu(x)


batch_size = 32
dim = 2048


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
