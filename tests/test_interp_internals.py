"""Interpreter building blocks: pairwise contraction, poison values, dtype helpers."""

from __future__ import annotations

import numpy as np
import pytest

from leirc.interp import dtypes as D
from leirc.interp.mathfns import contract


@pytest.mark.parametrize("eq", [
    "ik,kj->ij", "bik,bkj->bij", "nhid,nhjd->nhij", "cijpq,ocpq->oij", "ij,j->i", "ijk->ik", "ij,jk,kl->il",
    "ab,cd->abcd", "iaj,aj->ij", "ik,kj->ji", "ijk,ik->", "i,i->i",
])
def test_contract_matches_einsum(eq):
    rng = np.random.default_rng(0)
    ins, out = eq.split("->")
    specs = ins.split(",")
    sizes = {c: int(rng.integers(1, 5)) for c in set(eq) - set(",->")}
    ops = [rng.standard_normal([sizes[c] for c in s]) for s in specs]
    np.testing.assert_allclose(contract(ops, specs, out), np.einsum(eq, *ops), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("t", ["f16", "bf16", "f32", "f64", "i8", "i32", "i64", "u8", "u64", "bool"])
def test_poison_roundtrip(t):
    a = D.poisoned(t, (3, 2))
    assert a.dtype == D.np_dtype(t) and D.poison_mask(a, t).all()
    b = D.poisoned(t, (3, 2), alt=True)
    assert D.poison_mask(b, t, alt=True).all()
    if t != "bool" and not D.is_float(t):  # floats need no second sentinel (NaN payload)
        assert not D.poison_mask(b, t).any()
    if D.is_float(t):
        # arithmetic NaNs are not the poison payload
        c = np.array([np.nan, 0.0 * np.inf, -np.nan], dtype=np.float64).astype(D.np_dtype(t))
        assert not D.poison_mask(c, t).any()
        assert not D.poison_mask(np.zeros(2, D.np_dtype(t)), t).any()


def test_identity_values():
    assert D.identity_value(float("-inf"), "f32") == -np.inf
    assert D.identity_value(float("-inf"), "i32") == np.iinfo(np.int32).min
    assert D.identity_value(float("inf"), "u8") == 255
    assert D.identity_value(1, "f16") == 1 and D.identity_value(0, "i64") == 0
    assert D.leir_dtype(np.float32) == "f32" and D.leir_dtype(D.BF16) == "bf16"


def test_shrink_moves_a_private_tile_with_its_cluster():
    """A private row buffer as long as the reduction moves with it when the reduction shrinks."""
    from leirc.interp.shrink import shrink
    from leirc.lang import ast as A
    from leirc.lang.checker import check_text

    src = r"""\kernel k(A: f32[8, 48]) -> (C: f32[8]) {
  P^{8}_{i=0} [
    \alloc R^{f32,l}[48];
    L^{48}_{k=0} [ R^{f32,l}_{k} = A^{f32,g}_{i,k}*2.0; ];
    L^{48}_{k=0} [ C^{f32,g}_{i} = C^{f32,g}_{i} + R^{f32,l}_{k}; ];
  ];
}
"""
    small, moved = shrink(check_text(src).results[0].kernel)
    allocs = [n for n in A.walk(small.kernel) if isinstance(n, A.Alloc)]
    assert moved and [a.shape for a in allocs] == [(small.kernel.inputs[0].shape[1],)]
    assert small.kernel.inputs[0].shape[1] < 48
