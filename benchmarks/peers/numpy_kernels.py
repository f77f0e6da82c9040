"""NumPy versions of the stdlib kernels that NumPy has a direct call for (the "NumPy" column of
``bench_peers.py``). Each takes the kernel's inputs by name (float32 arrays) and returns
``{output name: array}``; the bench checks each against leirc -O0's outputs before timing it.
Kernels without an entry (convolutions, pooling, norms, attention...) would need loops or
stride tricks that are not "NumPy as a user calls it", so their column is "–"."""

from __future__ import annotations

import functools


@functools.cache  # built on first use: importing the module must not import its library
def _table():
    import numpy as np

    def mm(A, B):
        return {"C": A @ B}

    def softmax(X):
        e = np.exp(X - X.max(axis=1, keepdims=True))
        return {"Y": e / e.sum(axis=1, keepdims=True)}

    return {
        "gemm512": mm,
        "matmul_standard": mm,
        "matmul_square": mm,
        "matmul_irregular": mm,
        "matmul_transposed_b": lambda A, B: {"C": A @ B.T},
        "batched_matmul": lambda A, B: {"C": np.matmul(A, B)},
        "gemv": lambda A, X: {"Y": A @ X},
        "gemm_bias_relu": lambda X, W, Bias: {"Y": np.maximum(X @ W.T + Bias, np.float32(0))},
        "relu": lambda X: {"Y": np.maximum(X, np.float32(0))},
        "cumsum": lambda X: {"Y": np.cumsum(X, axis=1)},
        "sum_reduce_dim1": lambda X: {"C": X.sum(axis=1, keepdims=True)},
        "mean_reduce_dim1": lambda X: {"C": X.mean(axis=1)},
        "mse_loss": lambda A, B: {"Loss": np.mean((A - B) ** 2)},
        "softmax": softmax,
    }


def numpy_fn(name: str):
    """The NumPy function of kernel ``name`` (None when there is none)."""
    return _table().get(name)
