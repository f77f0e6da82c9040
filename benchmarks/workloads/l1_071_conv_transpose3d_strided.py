"""Transposed 3-D convolution k=3, stride 2, padding 1, output_padding 1, groups 2, with bias."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.ConvTranspose3d(in_channels, out_channels, 3, stride=2, padding=1, output_padding=1, groups=2)

    def forward(self, x):
        return self.conv(x)


batch_size = 1
in_channels = 8
out_channels = 8
D = 8
H = 8
W = 8


def get_inputs():
    x = torch.rand(batch_size, in_channels, D, H, W)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels]
