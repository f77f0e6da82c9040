"""Every stdlib kernel builds for llvm and emits CUDA source that nvcc compiles; the cheap
ones also run (llvm) and match NumPy references computed here.

CI budget: the stdlib is at development-set sizes, where the naive -O0 loop nests of the
GEMM/convolution kernels take seconds each. A kernel runs when its total number of
statement executions (per statement, the product of its enclosing loop extents, summed)
is at most ``RUN_LIMIT``; the others are built (and compile-checked for CUDA) only.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from leirc.lang import ast as A
from leirc.lang.checker import check_text
from leirc.lower import NvccNotFound, build, nvcc_compile

ROOT = Path(__file__).resolve().parent.parent
STDLIB = sorted((ROOT / "stdlib").glob("*.leir"))
RUN_LIMIT = 3e7


def _results(path: Path):
    cf = check_text(path.read_text(encoding="utf-8"), str(path))
    errs = [d for d in cf.diagnostics if d.is_error]
    assert not errs, "\n".join(f"{d.code} {d.message}" for d in errs)
    return cf.results


def statement_executions(kernel: A.Kernel) -> int:
    total = 0

    def rec(items, mult):
        nonlocal total
        for it in items:
            if isinstance(it, A.Loop):
                rec(it.body, mult * it.extent)
            elif isinstance(it, A.Region):
                rec(it.body, mult)
            elif isinstance(it, A.Assign):
                total += mult

    rec(kernel.body, 1)
    return total


# ---------------------------------------------------------------------------
# NumPy references (float64), by file stem


def _erf(x):
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), far below the comparison tolerance
    x = np.asarray(x, dtype=np.float64)
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * np.exp(-a * a)
    return s * y


def _gelu(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _conv2d(x, w, stride=1, pad=0, dil=1):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for p in range(kh):
        for q in range(kw):
            patch = xp[:, :, p * dil: p * dil + stride * (oh - 1) + 1: stride, q * dil: q * dil + stride * (ow - 1) + 1: stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, p, q])
    return out


def _groupnorm(x, w, b, g, eps=1e-5):
    n, c = x.shape[:2]
    xg = x.reshape(n, g, -1)
    mu = xg.mean(2, keepdims=True)
    var = ((xg - mu) ** 2).mean(2, keepdims=True)
    y = ((xg - mu) / np.sqrt(var + eps)).reshape(x.shape)
    return y * w[None, :, None, None] + b[None, :, None, None]


def _maxpool(x, k=4, pad=1):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    oh, ow = xp.shape[2] - k + 1, xp.shape[3] - k + 1
    out = np.full(x.shape[:2] + (oh, ow), -np.inf)
    for p in range(k):
        for q in range(k):
            out = np.maximum(out, xp[:, :, p:p + oh, q:q + ow])
    return out


def _conv_transpose(x, w):
    n, c, h, wd = x.shape
    _, o, kh, kw = w.shape
    out = np.zeros((n, o, h + kh - 1, wd + kw - 1))
    for p in range(kh):
        for q in range(kw):
            out[:, :, p:p + h, q:q + wd] += np.einsum("nchw,co->nohw", x, w[:, :, p, q])
    return out


#: stem -> reference(inputs in declared order) -> outputs in declared order
REFS = {
    "batched_matmul": lambda A, B: (A @ B,),
    "conv2d": lambda X, W: (_conv2d(X, W, pad=1),),
    "conv2d_strided_dilated": lambda X, W: (_conv2d(X, W, stride=2, pad=2, dil=2),),
    "conv_transpose2d": lambda X, W: (_conv_transpose(X, W),),
    "cumsum": lambda X: (np.cumsum(X, 1),),
    "depthwise_conv2d": lambda X, W: (sum(X[:, :, p:p + X.shape[2] - 2, q:q + X.shape[3] - 2]
                                          * W[None, :, 0, p, q, None, None] for p in range(3) for q in range(3)),),
    "gelu": lambda X: (_gelu(X),),
    "gemm_bias_relu": lambda X, W, Bias: (np.maximum(X @ W.T + Bias, 0),),
    "gemv": lambda A, X: (A @ X,),
    "groupnorm": lambda X, W, Bias: (_groupnorm(X, W, Bias, 8),),
    "layernorm": lambda X, W, Bias: (((X - X.mean((1, 2, 3), keepdims=True))
                                      / np.sqrt(X.var((1, 2, 3), keepdims=True) + 1e-5)) * W + Bias,),
    "log_softmax": lambda X: (np.log(_softmax(X, 1)),),
    "matmul_gelu_softmax": lambda X, W, Bias: (_softmax(_gelu(X @ W.T + Bias), 1),),
    "matmul_irregular": lambda A, B: (A @ B,),
    "matmul_square": lambda A, B: (A @ B,),
    "matmul_standard": lambda A, B: (A @ B,),
    "matmul_transposed_b": lambda A, B: (A @ B.T,),
    "matmul_upper_triangular": lambda A, B: (np.triu(np.triu(A) @ np.triu(B)),),
    "max_reduce_dim1": lambda X: (X.max(1),),
    "maxpool2d": lambda X: (_maxpool(X),),
    "mean_reduce_dim1": lambda X: (X.mean(1),),
    "mse_loss": lambda A, B: (np.asarray(((A - B) ** 2).mean()),),
    "pointwise_conv2d": lambda X, W: (np.einsum("nchw,oc->nohw", X, W[:, :, 0, 0]),),
    "relu": lambda X: (np.maximum(X, 0),),
    "rmsnorm": lambda X: (X / np.sqrt((X ** 2).mean(1, keepdims=True) + 1e-5),),
    "sdpa": lambda Q, K, V: (_softmax(Q @ np.swapaxes(K, -1, -2) / 16.0, -1) @ V,),
    "softmax": lambda X: (_softmax(X, 1),),
    "sum_reduce_dim1": lambda X: (X.sum(1, keepdims=True),),
}


def _inputs(kernel: A.Kernel, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for p in kernel.inputs:
        assert p.dtype == "f32", "stdlib test inputs are f32"
        out[p.name] = (rng.random(tuple(p.shape), dtype=np.float32) * 2 - 1).astype(np.float32)
    return out


def assert_close(got, ref, name):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, (name, got.shape, ref.shape)
    assert np.isfinite(got).all(), f"{name}: non-finite values"
    scale = max(np.abs(ref).max(), 1e-30)
    assert np.abs(got - ref).max() / scale < 1e-3, f"{name}: max error {np.abs(got - ref).max()} (scale {scale})"
    assert np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30) < 2e-4, f"{name}: normwise error"


def _ids(paths):
    return [p.stem for p in paths]


def test_stdlib_present():
    if not STDLIB:
        pytest.skip("no stdlib/*.leir yet")
    assert len(STDLIB) >= 1


@pytest.mark.parametrize("path", STDLIB, ids=_ids(STDLIB))
def test_stdlib_builds_for_llvm_and_runs_if_cheap(path):
    for r in _results(path):
        b = build(r, "llvm")
        assert b.symbol and b.tir_text
        if statement_executions(r.kernel) > RUN_LIMIT:
            continue
        ref_fn = REFS.get(path.stem)
        if ref_fn is None:
            continue  # a kernel added after this table: built, not compared
        ins = _inputs(r.kernel)
        outs = b.run(ins, {p.name: np.full(tuple(p.shape), np.nan, np.float32) for p in r.kernel.outputs})
        ref = ref_fn(*[ins[p.name].astype(np.float64) for p in r.kernel.inputs])
        assert len(ref) == len(r.kernel.outputs)
        for p, v in zip(r.kernel.outputs, ref):
            assert_close(outs[p.name], v, f"{path.stem}.{p.name}")


@pytest.mark.parametrize("path", STDLIB, ids=_ids(STDLIB))
def test_stdlib_cuda_source_compiles_with_nvcc(path):
    for r in _results(path):
        b = build(r, "cuda")
        assert b.cuda_source and "__global__" in b.cuda_source
        try:
            ok, log = nvcc_compile(b.cuda_source, "sm_90")
        except NvccNotFound:
            pytest.skip("nvcc not found")
        assert ok, log


def test_references_cover_the_stdlib():
    missing = [p.stem for p in STDLIB if p.stem not in REFS]
    if missing:
        pytest.skip(f"no NumPy reference for {', '.join(missing)} (built only)")
