"""Numerical kernels the interpreter needs beyond NumPy's ufuncs (NumPy only, no torch).

* :func:`erf` -- error function computed in float64: a series
  ``erf(x) = 2/sqrt(pi) * x * exp(-x^2) * sum_n (2x^2)^n / (1*3*...*(2n+1))`` (all terms
  positive: no cancellation) for ``|x| < 2`` and the continued fraction of ``erfc`` for
  ``|x| >= 2``. With ``precise=True`` (f64 results) the relative error is below 1e-15
  (checked against ``math.erf``); otherwise (f32/f16/bf16 results, which round it anyway)
  below 1e-9, with fewer terms.
* :func:`contract` -- ``einsum`` of several operands as a sequence of pairwise
  contractions mapped onto (batched) ``np.matmul``, so BLAS does the work also when
  labels are batch dimensions (where ``np.einsum``'s BLAS path does not apply).
"""

from __future__ import annotations

import math

import numpy as np

_C = [1.0]
for _k in range(40):
    _C.append(_C[-1] * 2.0 / (2 * _k + 3))
_SQPI = math.sqrt(math.pi)
_BLOCK = 1 << 15


def _erf_block(x: np.ndarray, nterms: int, depth: int) -> np.ndarray:
    y = x * x
    p = np.full_like(y, _C[nterms])
    for c in _C[nterms - 1::-1]:
        p *= y
        p += c
    out = (2.0 / _SQPI) * x * np.exp(-y) * p
    mid = np.abs(x) >= 2.0
    if mid.any():
        xm = np.minimum(np.abs(x[mid]), 6.0)  # erfc(6) < 3e-17: erf is +-1 beyond
        f = xm.copy()
        for k in range(depth, 0, -1):
            f = xm + (k * 0.5) / f
        erfc = np.exp(-xm * xm) / (_SQPI * f)
        out[mid] = np.copysign(1.0 - erfc, x[mid])
    return out


def erf(x, precise: bool = True, out_dtype=np.float64) -> np.ndarray:
    """Error function of ``x`` (computed in float64 block by block, returned as
    ``out_dtype``; see the module docstring for accuracy)."""
    x = np.asarray(x)
    nterms, depth = (31, 50) if precise else (20, 20)
    flat = x.reshape(-1)
    out = np.empty(flat.shape, dtype=out_dtype)
    with np.errstate(all="ignore"):
        for i in range(0, flat.size, _BLOCK):
            out[i:i + _BLOCK] = _erf_block(flat[i:i + _BLOCK].astype(np.float64), nterms, depth)
    return out.reshape(x.shape)


def _sum_private(a: np.ndarray, la: str, keep: set) -> tuple[np.ndarray, str]:
    axes = tuple(i for i, l in enumerate(la) if l not in keep)
    if not axes:
        return a, la
    return a.sum(axis=axes), "".join(l for l in la if l in keep)


def _pair(a: np.ndarray, la: str, b: np.ndarray, lb: str, keep: set) -> tuple[np.ndarray, str]:
    """Contract two operands; ``keep`` holds the labels needed afterwards."""
    a, la = _sum_private(a, la, keep | set(lb))
    b, lb = _sum_private(b, lb, keep | set(la))
    size = {l: n for l, n in zip(la, a.shape)}
    size.update({l: n for l, n in zip(lb, b.shape)})
    batch = [l for l in la if l in lb and l in keep]
    contr = [l for l in la if l in lb and l not in keep]
    left = [l for l in la if l not in lb]
    right = [l for l in lb if l not in la]
    pa = [la.index(l) for l in batch + left + contr]
    pb = [lb.index(l) for l in batch + contr + right]
    nb = math.prod(size[l] for l in batch)
    m = math.prod(size[l] for l in left)
    k = math.prod(size[l] for l in contr)
    n = math.prod(size[l] for l in right)
    A = np.transpose(a, pa).reshape(nb, m, k)
    B = np.transpose(b, pb).reshape(nb, k, n)
    C = np.matmul(A, B)
    labels = batch + left + right
    return C.reshape([size[l] for l in labels]), "".join(labels)


def contract(operands: list, specs: list, out: str) -> np.ndarray:
    """``np.einsum(','.join(specs) + '->' + out, *operands)`` for operands without repeated
    labels, via pairwise (batched) matrix products, left to right."""
    cur, lc = operands[0], specs[0]
    for i in range(1, len(operands)):
        later = set(out)
        for s in specs[i + 1:]:
            later |= set(s)
        cur, lc = _pair(cur, lc, operands[i], specs[i], later)
    cur, lc = _sum_private(cur, lc, set(out))
    return np.transpose(cur, [lc.index(l) for l in out])
