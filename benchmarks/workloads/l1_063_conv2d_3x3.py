"""Standard 2-D convolution 3x3, 16 -> 64 channels, padding 1, no bias (KernelBench L1-63, reduced)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1, bias=False)

    def forward(self, x):
        return self.conv2d(x)


batch_size = 2
in_channels = 16
out_channels = 64
kernel_size = 3
height = 32
width = 32


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
