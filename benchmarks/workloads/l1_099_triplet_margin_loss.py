"""Triplet margin loss, p=2 (KernelBench L1-99, reduced)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, margin=1.0):
        super().__init__()
        self.loss_fn = torch.nn.TripletMarginLoss(margin=margin)

    def forward(self, anchor, positive, negative):
        return self.loss_fn(anchor, positive, negative)


batch_size = 64
input_shape = (1024,)


def get_inputs():
    return [torch.rand(batch_size, *input_shape), torch.rand(batch_size, *input_shape), torch.rand(batch_size, *input_shape)]


def get_init_inputs():
    return [1.0]
