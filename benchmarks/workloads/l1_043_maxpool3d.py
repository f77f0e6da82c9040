"""MaxPool3d k=3 s=2 p=1 d=2 (KernelBench L1-43, reduced)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.maxpool = nn.MaxPool3d(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)

    def forward(self, x):
        return self.maxpool(x)


batch_size = 2
channels = 4
dim1 = 16
dim2 = 16
dim3 = 16
kernel_size = 3
stride = 2
padding = 1
dilation = 2


def get_inputs():
    x = torch.rand(batch_size, channels, dim1, dim2, dim3)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation]
