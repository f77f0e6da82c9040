"""Matmul of upper-triangular matrices, result masked with triu (KernelBench L1-14, reduced)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.triu(torch.matmul(A, B))


N = 192


def get_inputs():
    A = torch.triu(torch.rand(N, N))
    B = torch.triu(torch.rand(N, N))
    return [A, B]


def get_init_inputs():
    return []
