"""The interpreter's two modes agree on programs with private tiles (the ones -O2 and the
schedule strategies produce), and those programs compute what the originals do.

Small sizes: the literal mode runs every loop in Python."""

from __future__ import annotations

import numpy as np
import pytest

from leirc.interp.core import Interpreter
from leirc.lang import ast as A
from leirc.lang.checker import check_kernel
from leirc.lang.parser import parse
from leirc.opt import o2

KERNELS = {
    "matmul": r"""\kernel k(A: f32[16, 24], B: f32[24, 32]) -> (C: f32[16, 32]) {
      L^{16}_{i=0} L^{32}_{j=0} L^{24}_{k=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j}; ];
    }""",
    "batched": r"""\kernel k(A: f32[2, 8, 16], B: f32[2, 16, 32]) -> (C: f32[2, 8, 32]) {
      L^{2}_{n=0} L^{8}_{i=0} L^{32}_{j=0} L^{16}_{k=0} [
        C^{f32,g}_{n,i,j} = C^{f32,g}_{n,i,j} + A^{f32,g}_{n,i,k}*B^{f32,g}_{n,k,j}; ];
    }""",
    "conv1d": r"""\kernel k(X: f32[4, 8, 34], W: f32[8, 3]) -> (C: f32[4, 8, 32]) {
      L^{4}_{n=0} L^{8}_{i=0} L^{32}_{j=0} L^{3}_{q=0} [
        C^{f32,g}_{n,i,j} = C^{f32,g}_{n,i,j} + X^{f32,g}_{n,i,j+q}*W^{f32,g}_{i,q}; ];
    }""",
    "softmax": r"""\kernel k(A: f32[4, 128]) -> (C: f32[4, 128]) {
      L^{4}_{r=0} L^{128}_{a=0} [ D^{f32,g}_{r} = max(D^{f32,g}_{r}, A^{f32,g}_{r,a}); ];
      L^{4}_{r=0} L^{128}_{a=0} [ E^{f32,g}_{r} = E^{f32,g}_{r} + exp(A^{f32,g}_{r,a} - D^{f32,g}_{r}); ];
      L^{4}_{r=0} L^{128}_{a=0} [ C^{f32,g}_{r,a} = exp(A^{f32,g}_{r,a} - D^{f32,g}_{r})/E^{f32,g}_{r}; ];
    }""",
}


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("seed", [0, 1])
def test_modes_agree_on_o2_programs(name, seed):
    k = parse(KERNELS[name]).module.kernels[0]
    res = o2.optimize(k, tiles=o2.Tiles(mr=4, nr=16, lanes=8))
    assert any(isinstance(n, A.Alloc) for n in A.walk(res.kernel)), res.log
    new = check_kernel(res.kernel)
    assert new.ok, new.diagnostics
    rng = np.random.default_rng(seed)
    x = {p.name: rng.standard_normal(p.shape).astype(np.float32) for p in k.inputs}
    vec = Interpreter(new).run(x, check_uninit=True)
    lit = Interpreter(new, vectorize=False).run(x, check_uninit=True)
    ref = Interpreter(check_kernel(k)).run(x)
    for p in k.outputs:
        a, b, r = vec[p.name], lit[p.name], ref[p.name]
        assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))
        assert np.linalg.norm(a - b) <= 2e-6 * np.linalg.norm(b)
        assert np.linalg.norm(b - r) <= 1e-5 * np.linalg.norm(r)
