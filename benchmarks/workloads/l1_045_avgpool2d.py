"""AvgPool2d k=5 (stride = kernel, no padding) drops the ragged edge (KernelBench L1-45, reduced)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, kernel_size: int):
        super().__init__()
        self.avg_pool = nn.AvgPool2d(kernel_size=kernel_size)

    def forward(self, x):
        return self.avg_pool(x)


batch_size = 4
channels = 8
height = 64
width = 64
kernel_size = 5


def get_inputs():
    x = torch.rand(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [kernel_size]
