"""Matmul with a transposed operand: A.T @ B (KernelBench L1-16, reduced)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A.T, B)


M = 128
K = 256
N = 128


def get_inputs():
    A = torch.rand(K, M)
    B = torch.rand(K, N)
    return [A, B]


def get_init_inputs():
    return []
