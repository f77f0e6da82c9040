"""Private storage verified like globals (issue #30, item 1).

A ``\\alloc`` tile is fresh and uninitialized in every execution of its item
(docs/language.md §3.1). The checker proves, per element, that a tile element is written
before it is read (E049 where a read provably sees a never-written element, W049 where it
cannot tell), and verification builds poison the tile at the start of every execution, so
a compiled candidate that reads what the previous iteration left, or what nobody wrote,
computes a visibly wrong output instead of whatever the stack held.
"""

from __future__ import annotations

import numpy as np
import pytest

from leirc.lang import ast as A
from leirc.lang.checker import check_text
from leirc.lower import build
from leirc.verify import verify


def K(body: str, sig: str = "(A: f32[8]) -> (C: f32[8])") -> str:
    return "\\kernel k" + sig + " {\n" + body + "\n}\n"


def diags(src: str) -> list[tuple[str, str]]:
    return [(d.code, d.severity) for d in check_text(src, "t.leir").diagnostics]


# -- checker --------------------------------------------------------------------------------


def test_read_of_an_element_written_only_by_the_previous_iteration_is_e049():
    # T_{0} is written at even i only: at odd i the read sees the previous iteration's value
    src = K("L^{8}_{i=0}[\\alloc T^{f32,l}[2]; T^{f32,l}_{i%2} = A^{f32,g}_{i} * 2.0;"
            " C^{f32,g}_{i} = T^{f32,l}_{0};];")
    assert diags(src) == [("E049", "error")]
    d = check_text(src, "t.leir").diagnostics[0]
    assert "T_{0}" in d.message and "i=1" in d.message and d.span.line == 2


def test_never_written_element_is_e049():
    src = K("L^{8}_{i=0}[\\alloc T^{f32,l}[2]; T^{f32,l}_{0} = A^{f32,g}_{i};"
            " C^{f32,g}_{i} = T^{f32,l}_{0} + T^{f32,l}_{1} * 0.0;];")
    assert diags(src) == [("E049", "error")]


def test_fully_written_tiles_check_clean():
    srcs = [
        K("L^{8}_{i=0}[\\alloc T^{f32,l}[2]; L^{2}_{k=0}[T^{f32,l}_{k} = A^{f32,g}_{i} * 2.0;];"
          " C^{f32,g}_{i} = T^{f32,l}_{0} + T^{f32,l}_{1};];"),
        # a reduction into the tile starts from its identity
        K("L^{8}_{i=0}[\\alloc S^{f32,l}; L^{4}_{j=0}[S^{f32,l} = S^{f32,l} + A^{f32,g}_{i,j};];"
          " L^{4}_{j=0}[C^{f32,g}_{i,j} = A^{f32,g}_{i,j}/S^{f32,l};];];", "(A: f32[8, 4]) -> (C: f32[8, 4])"),
        # the element depends on the outer loop: every execution is simulated
        K("L^{8}_{i=0}[\\alloc T^{f32,l}[2]; T^{f32,l}_{i%2} = A^{f32,g}_{i};"
          " C^{f32,g}_{i} = T^{f32,l}_{i%2};];"),
    ]
    for src in srcs:
        assert diags(src) == [], src


def test_register_tile_too_large_to_simulate_is_proven_by_its_covering_write():
    src = r"""\kernel gemm(A: f32[64, 512], B: f32[512, 64]) -> (C: f32[64, 64]) {
      P^{8}_{io=0} L^{4}_{jo=0} [
        \alloc Acc^{f32,l}[8, 16];
        L^{512}_{k=0} U^{8}_{ii=0} V^{16}_{jj=0} [
          Acc^{f32,l}_{ii,jj} = Acc^{f32,l}_{ii,jj} + A^{f32,g}_{io*8+ii,k}*B^{f32,g}_{k,jo*16+jj};
        ];
        L^{8}_{ii=0} V^{16}_{jj=0} [ C^{f32,g}_{io*8+ii,jo*16+jj} = Acc^{f32,l}_{ii,jj}; ];
      ];
    }"""
    assert diags(src) == []


def test_guarded_read_that_may_miss_is_w049():
    src = K("L^{8}_{i=0}[\\alloc T^{f32,l}[2]; T^{f32,l}_{0} = A^{f32,g}_{i};"
            " C^{f32,g}_{i} = if_then_else(A^{f32,g}_{i} > 0.0, T^{f32,l}_{1}, T^{f32,l}_{0});];")
    assert diags(src) == [("W049", "warning")]


# -- compiled verification --------------------------------------------------------------------

#: at odd i the taken branch reads T_{0}, written by the previous iteration (W049: the
#: checker cannot tell which branch runs); the stack still holds A_{i-1}*2
PREVIOUS = K("L^{8}_{i=0}[\\alloc T^{f32,l}[2]; T^{f32,l}_{i%2} = A^{f32,g}_{i} * 2.0;"
             " C^{f32,g}_{i} = if_then_else(i%2 == 1, T^{f32,l}_{0} + T^{f32,l}_{1}, T^{f32,l}_{0});];")
PREVIOUS_REF = K("L^{8}_{i=0}[C^{f32,g}_{i} = if_then_else(i%2 == 1, A^{f32,g}_{(i//2)*2} * 2.0 + A^{f32,g}_{i} * 2.0,"
                 " A^{f32,g}_{i} * 2.0);];")
#: T_{1} is never written; the guard always holds but the checker cannot tell (W049)
LEAK = K("L^{8}_{i=0}[\\alloc T^{f32,l}[2]; T^{f32,l}_{0} = A^{f32,g}_{i};"
         " C^{f32,g}_{i} = T^{f32,l}_{0} + if_then_else(i >= 0, T^{f32,l}_{1} * 0.0, 0.0);];")
LEAK_REF = K("L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i};];")


@pytest.mark.parametrize("cand,ref", [(PREVIOUS, PREVIOUS_REF), (LEAK, LEAK_REF)], ids=["previous", "never"])
def test_compiled_candidate_reading_stale_tile_elements_does_not_verify(cand, ref):
    assert ("W049", "warning") in diags(cand)
    rep = verify(cand, ref, seeds=(0,), dists=["normal"], probes=[])
    assert not rep.equal, "a read of an element this execution did not write verified EQUAL"
    # the poison: NaN where it was computed with, its payload ("never written") where copied
    assert any("nan" in f.lower() or "never written" in f for f in rep.failures), rep.failures


def test_poisoned_tile_shows_as_the_interpreters_payload():
    r = check_text(LEAK, "t").results[0]
    a = np.arange(8, dtype=np.float32)
    poisoned = build(r, "llvm", poison_intermediates=True).run({"A": a})["C"]
    assert np.isnan(poisoned).all()


def test_integer_tiles_are_poisoned_with_the_sentinel():
    src = K("L^{8}_{i=0}[\\alloc T^{i32,l}[2]; T^{i32,l}_{0} = A^{i32,g}_{i};"
            " C^{i32,g}_{i} = if_then_else(i >= 0, T^{i32,l}_{1}, 0);];", "(A: i32[8]) -> (C: i32[8])")
    r = check_text(src, "t").results[0]
    got = build(r, "llvm", poison_intermediates=True).run({"A": np.arange(8, dtype=np.int32)})["C"]
    assert (got == np.iinfo(np.int32).min + 1).all()


@pytest.mark.parametrize("name,target", [("matmul_square", "llvm"), ("matmul_square", "cuda"), ("softmax", "llvm"),
                                         ("sdpa", "llvm"), ("sdpa", "cuda")])
def test_o2_tiles_are_proven_written_before_read(name, target):
    """-O2's register tiles, partial sums and shared tiles (a tile loaded by one nest and
    read by the next inside a serial loop) are proven without simulation: no W049."""
    from pathlib import Path

    from leirc.lang.checker import check_kernel
    from leirc.lang.load import load_kernel
    from leirc.opt import o2

    r = load_kernel((Path(__file__).resolve().parent.parent / "stdlib" / f"{name}.leir").read_text())
    out = check_kernel(o2.optimize(r.kernel, target, r).kernel)
    assert any(isinstance(n, A.Alloc) for n in A.walk(out.kernel))
    assert not [d.message for d in out.diagnostics if d.code in ("E049", "W049")]
