"""Conv2d (stride 2, padding 1) + BatchNorm2d (train) + ReLU6 + AvgPool2d(2, padding 1, count_include_pad=False) + flatten + Linear."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, num_classes):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(out_channels)
        self.pool = nn.AvgPool2d(2, stride=2, padding=1, count_include_pad=False)
        self.fc = nn.Linear(out_channels * 9 * 9, num_classes)

    def forward(self, x):
        x = F.relu6(self.bn(self.conv(x)))
        x = self.pool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


batch_size = 2
in_channels = 3
out_channels = 16
num_classes = 10


def get_inputs():
    return [torch.rand(batch_size, in_channels, 32, 32)]


def get_init_inputs():
    return [in_channels, out_channels, num_classes]
