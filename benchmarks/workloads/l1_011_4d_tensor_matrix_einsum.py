"""4-D tensor times matrix via einsum 'bijl,lk->bijk' (KernelBench L1-11, reduced)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.einsum("bijl,lk->bijk", A, B)


b = 2
i = 16
j = 16
l = 64
k = 48


def get_inputs():
    A = torch.rand(b, i, j, l)
    B = torch.rand(l, k)
    return [A, B]


def get_init_inputs():
    return []
