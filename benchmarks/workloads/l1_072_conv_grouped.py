"""Grouped 2-D convolution (groups=4), asymmetric kernel 3x5 with padding (1, 2) (KernelBench L1-72 family, reduced)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, (3, 5), padding=(1, 2), groups=groups)

    def forward(self, x):
        return self.conv(x)


batch_size = 2
in_channels = 16
out_channels = 32
groups = 4
height = 32
width = 32


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, groups]
