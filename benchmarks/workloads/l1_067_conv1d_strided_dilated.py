"""1-D convolution with stride 2, dilation 2, padding 3 and bias."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv1d = nn.Conv1d(in_channels, out_channels, kernel_size, stride=2, padding=3, dilation=2)

    def forward(self, x):
        return self.conv1d(x)


batch_size = 4
in_channels = 8
out_channels = 32
kernel_size = 5
length = 512


def get_inputs():
    x = torch.rand(batch_size, in_channels, length)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
