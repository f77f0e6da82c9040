"""LayerNorm over (C, H, W) (KernelBench L1-40, reduced); 16K elements per sample, so the statistics use partial sums."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        return self.ln(x)


batch_size = 4
features = 16
dim1 = 32
dim2 = 32


def get_inputs():
    x = torch.rand(batch_size, features, dim1, dim2)
    return [x]


def get_init_inputs():
    return [(features, dim1, dim2)]
