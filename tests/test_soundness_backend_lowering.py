"""Lowering and checker agree (issue #30, item 8): ``V`` around ``\\alloc``, tensors of
2**31 elements or more."""

from __future__ import annotations

import numpy as np

from leirc.interp import run_source
from leirc.lang.checker import check_text
from leirc.lower import build, lower
from leirc.lower._tvm import tvm as _tvm


def _result(src: str):
    cf = check_text(src, "<test>")
    errs = [d for d in cf.diagnostics if d.is_error]
    assert not errs, "\n".join(f"{d.code} {d.message}" for d in errs)
    return cf.results[0]


def test_vectorized_loop_around_alloc_gives_each_iteration_its_tile():
    """TVM's vectorizer gave the lanes one shared tile: every row summed the last row's."""
    src = r"""\kernel k(A: f32[8, 4]) -> (C: f32[8]) {
      V^{8}_{i=0} [ \alloc T^{f32,l}[4];
        L^{4}_{k=0} [ T^{f32,l}_{k} = A^{f32,g}_{i,k} * 2.0; ];
        L^{4}_{k=0} [ C^{f32,g}_{i} = C^{f32,g}_{i} + T^{f32,l}_{k}; ];
      ];
    }"""
    a = np.arange(32, dtype=np.float32).reshape(8, 4)
    got = build(_result(src), "llvm").run({"A": a})["C"]
    assert got.tolist() == run_source(src, {"A": a})["C"].tolist() == (a * 2).sum(axis=1).tolist()


def test_alloc_under_an_inner_loop_of_a_vectorized_loop():
    src = r"""\kernel k(A: f32[4, 2, 3]) -> (C: f32[4, 2]) {
      V^{4}_{i=0} L^{2}_{j=0} [ \alloc T^{f32,l}[3];
        U^{3}_{k=0} [ T^{f32,l}_{k} = A^{f32,g}_{i,j,k} + 1.0; ];
        C^{f32,g}_{i,j} = T^{f32,l}_{0} * T^{f32,l}_{1} * T^{f32,l}_{2};
      ];
    }"""
    a = np.random.default_rng(0).standard_normal((4, 2, 3)).astype(np.float32)
    got = build(_result(src), "llvm").run({"A": a})["C"]
    np.testing.assert_array_equal(got, run_source(src, {"A": a})["C"])


BIG = r"""\kernel k(A: f32[4, 1073741825]) -> (C: f32[4]) {
  L^{4}_{i=0} L^{1073741825}_{j=0} [ T^{f32,g}_{i,j} = A^{f32,g}_{i,j} * 2.0; ];
  L^{4}_{i=0} L^{1073741825}_{j=0} [ C^{f32,g}_{i} = C^{f32,g}_{i} + T^{f32,g}_{i,j}; ];
}"""


def test_tensors_over_2_31_elements_are_indexed_in_int64():
    """Each subscript fits int32, the flattened offset does not: TVM flattens in the
    subscripts' type, so an int32 subscript wrapped (a segfault on a big input) or TVM
    refused the size literal."""
    tvm = _tvm()
    mod = lower(_result(BIG), poison_intermediates=True)
    flat = tvm.tirx.transform.FlattenBuffer()(mod).script()
    assert 'T.Cast("int64", i) * T.int64(1073741825) + T.Cast("int64", j)' in flat
    assert "A: T.Buffer((T.int64(4), T.int64(1073741825))" in mod.script()


def test_output_over_2_31_elements_builds():
    src = r"""\kernel k(A: i8[2, 1073741825]) -> (C: i8[2, 1073741825]) {
      L^{2}_{i=0} L^{1073741825}_{j=0} [ C^{i8,g}_{i,j} = A^{i8,g}_{i,j} + 1; ];
    }"""
    b = build(_result(src), "llvm")  # was TVM's own error: literal 2147483650 exceeds int32
    assert b.symbol == "k"
