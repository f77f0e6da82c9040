"""PyTorch (float64) implementations of the stdlib kernels, used as ground truth for the
interpreter tests. Each function takes the kernel's inputs (numpy, by name) and returns
{output name: numpy array}; shapes come from the inputs, so a stdlib size change does not
break them."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def _t(x):
    return torch.from_numpy(np.asarray(x)).double()


def _n(x, dtype=np.float32):
    return x.detach().numpy().astype(dtype)


def matmul(A, B):
    return {"C": _n(_t(A) @ _t(B))}


def matmul_transposed_b(A, B):
    return {"C": _n(_t(A) @ _t(B).T)}


def matmul_upper_triangular(A, B):
    return {"C": _n(torch.triu(torch.triu(_t(A)) @ torch.triu(_t(B))))}


def batched_matmul(A, B):
    return {"C": _n(torch.bmm(_t(A), _t(B)))}


def gemv(A, X):
    return {"Y": _n(_t(A) @ _t(X))}


def gemm_bias_relu(X, W, Bias):
    return {"Y": _n(torch.relu(_t(X) @ _t(W).T + _t(Bias)))}


def matmul_gelu_softmax(X, W, Bias):
    return {"Y": _n(torch.softmax(F.gelu(_t(X) @ _t(W).T + _t(Bias)), dim=1))}


def softmax(X):
    return {"Y": _n(torch.softmax(_t(X), dim=1))}


def log_softmax(X):
    return {"Y": _n(torch.log_softmax(_t(X), dim=1))}


def relu(X):
    return {"Y": _n(torch.relu(_t(X)))}


def gelu(X):
    return {"Y": _n(F.gelu(_t(X)))}


def layernorm(X, W, Bias):
    return {"Y": _n(F.layer_norm(_t(X), X.shape[1:], _t(W), _t(Bias), eps=1e-5))}


def rmsnorm(X):
    x = _t(X)
    return {"Y": _n(x / torch.sqrt((x * x).mean(dim=1, keepdim=True) + 1e-5))}


def groupnorm(X, W, Bias):
    return {"Y": _n(F.group_norm(_t(X), 8, _t(W), _t(Bias), eps=1e-5))}


def conv2d(X, W):
    return {"C": _n(F.conv2d(_t(X), _t(W), padding=1))}


def conv2d_strided_dilated(X, W):
    return {"C": _n(F.conv2d(_t(X), _t(W), stride=2, padding=2, dilation=2))}


def conv_transpose2d(X, W):
    return {"C": _n(F.conv_transpose2d(_t(X), _t(W)))}


def depthwise_conv2d(X, W):
    return {"C": _n(F.conv2d(_t(X), _t(W), groups=X.shape[1]))}


def pointwise_conv2d(X, W):
    return {"C": _n(F.conv2d(_t(X), _t(W)))}


def maxpool2d(X):
    return {"C": _n(F.max_pool2d(_t(X), kernel_size=4, stride=1, padding=1))}


def max_reduce_dim1(X):
    return {"C": _n(_t(X).max(dim=1).values)}


def mean_reduce_dim1(X):
    return {"C": _n(_t(X).mean(dim=1))}


def sum_reduce_dim1(X):
    return {"C": _n(_t(X).sum(dim=1, keepdim=True))}


def mse_loss(A, B):
    return {"Loss": _n(((_t(A) - _t(B)) ** 2).mean())}


def cumsum(X):
    return {"Y": _n(torch.cumsum(_t(X), dim=1))}


def sdpa(Q, K, V):
    return {"O": _n(F.scaled_dot_product_attention(_t(Q), _t(K), _t(V)))}


REFS = {
    "batched_matmul": batched_matmul,
    "conv2d": conv2d,
    "conv2d_strided_dilated": conv2d_strided_dilated,
    "conv_transpose2d": conv_transpose2d,
    "cumsum": cumsum,
    "depthwise_conv2d": depthwise_conv2d,
    "gelu": gelu,
    "gemm_bias_relu": gemm_bias_relu,
    "gemv": gemv,
    "groupnorm": groupnorm,
    "layernorm": layernorm,
    "log_softmax": log_softmax,
    "matmul_gelu_softmax": matmul_gelu_softmax,
    "matmul_irregular": matmul,
    "matmul_square": matmul,
    "matmul_standard": matmul,
    "matmul_transposed_b": matmul_transposed_b,
    "matmul_upper_triangular": matmul_upper_triangular,
    "max_reduce_dim1": max_reduce_dim1,
    "maxpool2d": maxpool2d,
    "mean_reduce_dim1": mean_reduce_dim1,
    "mse_loss": mse_loss,
    "pointwise_conv2d": pointwise_conv2d,
    "relu": relu,
    "rmsnorm": rmsnorm,
    "sdpa": sdpa,
    "softmax": softmax,
    "sum_reduce_dim1": sum_reduce_dim1,
}
