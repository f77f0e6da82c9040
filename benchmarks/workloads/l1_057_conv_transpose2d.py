"""Transposed 2-D convolution 3x3, 32 -> 32 channels, stride 1 (KernelBench L1-57, reduced)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, bias=False)

    def forward(self, x):
        return self.conv_transpose2d(x)


batch_size = 1
in_channels = 32
out_channels = 32
kernel_size = 3
height = 32
width = 32


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
