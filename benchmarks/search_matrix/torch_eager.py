"""PyTorch eager (float32) versions of the stdlib kernels: the "eager" and "torch.compile"
columns of the search matrix. The formulas are those of the float64 ground truth the
interpreter tests use (``tests/interp_torch_refs.py``); the bench checks every one against
leirc's -O0 output on the same inputs before it times it. Each takes the kernel's inputs by
name (torch tensors) and returns ``{output name: tensor}``."""

from __future__ import annotations

import functools


@functools.cache  # built on first use: importing the module must not import its library
def eager_table():
    import torch
    import torch.nn.functional as F

    def mm(A, B):
        return {"C": A @ B}

    return {
        "batched_matmul": lambda A, B: {"C": torch.bmm(A, B)},
        "conv2d": lambda X, W: {"C": F.conv2d(X, W, padding=1)},
        "conv2d_strided_dilated": lambda X, W: {"C": F.conv2d(X, W, stride=2, padding=2, dilation=2)},
        "conv_transpose2d": lambda X, W: {"C": F.conv_transpose2d(X, W)},
        "cumsum": lambda X: {"Y": torch.cumsum(X, dim=1)},
        "depthwise_conv2d": lambda X, W: {"C": F.conv2d(X, W, groups=X.shape[1])},
        "gelu": lambda X: {"Y": F.gelu(X)},
        "gemm_bias_relu": lambda X, W, Bias: {"Y": torch.relu(X @ W.T + Bias)},
        "gemv": lambda A, X: {"Y": A @ X},
        "groupnorm": lambda X, W, Bias: {"Y": F.group_norm(X, 8, W, Bias, eps=1e-5)},
        "layernorm": lambda X, W, Bias: {"Y": F.layer_norm(X, X.shape[1:], W, Bias, eps=1e-5)},
        "log_softmax": lambda X: {"Y": torch.log_softmax(X, dim=1)},
        "matmul_gelu_softmax": lambda X, W, Bias: {"Y": torch.softmax(F.gelu(X @ W.T + Bias), dim=1)},
        "matmul_irregular": mm,
        "matmul_square": mm,
        "matmul_standard": mm,
        "matmul_transposed_b": lambda A, B: {"C": A @ B.T},
        "matmul_upper_triangular": lambda A, B: {"C": torch.triu(torch.triu(A) @ torch.triu(B))},
        "max_reduce_dim1": lambda X: {"C": X.max(dim=1).values},
        "maxpool2d": lambda X: {"C": F.max_pool2d(X, kernel_size=4, stride=1, padding=1)},
        "mean_reduce_dim1": lambda X: {"C": X.mean(dim=1)},
        "mse_loss": lambda A, B: {"Loss": ((A - B) ** 2).mean()},
        "pointwise_conv2d": lambda X, W: {"C": F.conv2d(X, W)},
        "relu": lambda X: {"Y": torch.relu(X)},
        "rmsnorm": lambda X: {"Y": X / torch.sqrt((X * X).mean(dim=1, keepdim=True) + 1e-5)},
        "sdpa": lambda Q, K, V: {"O": F.scaled_dot_product_attention(Q, K, V)},
        "softmax": lambda X: {"Y": torch.softmax(X, dim=1)},
        "sum_reduce_dim1": lambda X: {"C": X.sum(dim=1, keepdim=True)},
    }


def eager(name: str):
    """The eager function of stdlib kernel ``name`` (None when there is none)."""
    return eager_table().get(name)
