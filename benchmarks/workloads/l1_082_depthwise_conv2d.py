"""Depthwise 2-D convolution 3x3 (groups = channels), no bias (KernelBench L1-82, reduced)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels: int, kernel_size: int):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, in_channels, kernel_size, groups=in_channels, bias=False)

    def forward(self, x):
        return self.conv2d(x)


batch_size = 2
in_channels = 32
kernel_size = 3
height = 64
width = 64


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, kernel_size]
