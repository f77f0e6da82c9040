"""MaxPool2d k=4 s=1 p=1 d=1: padding is -inf (KernelBench L1-42, reduced)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.maxpool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)

    def forward(self, x):
        return self.maxpool(x)


batch_size = 4
channels = 8
height = 64
width = 64
kernel_size = 4
stride = 1
padding = 1
dilation = 1


def get_inputs():
    x = torch.rand(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation]
