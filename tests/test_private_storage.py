"""Private tensors (``\\alloc``): syntax, checking, interpretation and lowering.

A register-blocked GEMM written by hand checks (no false E040 on its parallel loop),
runs identically in both interpreter modes, verifies compiled against the interpreter,
and lowers with its accumulator allocated inside the loop nest, not at function root
(issue #12, "done when")."""

from __future__ import annotations

import numpy as np
import pytest

from leirc.interp.core import Interpreter, InterpError, check_source
from leirc.lang import ast as A
from leirc.lang.canonical import canonical, fingerprint
from leirc.lang.checker import check_text
from leirc.lang.parser import parse
from leirc.lang.printer import COMPACT, print_module

GEMM = r"""
\kernel gemm(A: f32[16, 12], B: f32[12, 16]) -> (C: f32[16, 16]) {
  P^{4}_{io=0} L^{2}_{jo=0} [
    \alloc Acc^{f32,l}[4, 8]; % one register tile per (io, jo)
    L^{12}_{k=0} U^{4}_{ii=0} V^{8}_{jj=0} [
      Acc^{f32,l}_{ii,jj} = Acc^{f32,l}_{ii,jj} + A^{f32,g}_{io*4+ii,k}*B^{f32,g}_{k,jo*8+jj};
    ];
    L^{4}_{ii=0} V^{8}_{jj=0} [
      C^{f32,g}_{io*4+ii,jo*8+jj} = Acc^{f32,l}_{ii,jj};
    ];
  ];
}
"""


def K(body: str, sig: str = "(A: f32[8, 4]) -> (C: f32[8, 4])") -> str:
    return "\\kernel k" + sig + " {\n" + body + "\n}\n"


def codes(src: str) -> list[str]:
    return [d.code for d in check_text(src, "t.leir").diagnostics]


def inputs(r, seed=0):
    rng = np.random.default_rng(seed)
    return {p.name: rng.standard_normal(p.shape).astype(np.float32) for p in r.kernel.inputs}


# -- syntax ---------------------------------------------------------------------------


def test_alloc_parses_prints_and_round_trips():
    pr = parse(GEMM)
    assert pr.ok, pr.diagnostics
    k = pr.module.kernels[0]
    al = k.body[0].body[0].body[0]
    assert isinstance(al, A.Alloc) and (al.name, al.dtype, al.scope, al.shape) == ("Acc", "f32", "l", (4, 8))
    assert al.span is not None and al.span.line == 4
    pretty = print_module(pr.module)
    assert "\\alloc Acc^{f32,l}[4, 8]; % one register tile" in pretty
    for text in (pretty, print_module(pr.module, COMPACT)):
        again = parse(text)
        assert again.ok and again.module == pr.module


def test_scalar_alloc_and_bad_spellings():
    src = K("L^{8}_{i=0}[\\alloc S^{f32,l}; L^{4}_{j=0}[S^{f32,l} = S^{f32,l} + A^{f32,g}_{i,j};];"
            "L^{4}_{j=0}[C^{f32,g}_{i,j} = A^{f32,g}_{i,j}/S^{f32,l};];];")
    assert codes(src) == []
    assert "\\alloc S^{f32,l}[];" in print_module(parse(src).module)
    assert "E005" in codes(K("L^{8}_{i=0}[\\alloc S^{f32,q}[2]; C^{f32,g}_{i,0} = 1.0;];"))
    assert "E004" in codes(K("L^{8}_{i=0}[\\alloc S^{f33,l}[2]; C^{f32,g}_{i,0} = 1.0;];"))
    assert "E001" in codes(K("L^{8}_{i=0}[\\alloc S^{f32,l}[2] C^{f32,g}_{i,0} = 1.0;];"))


def test_canonical_renames_allocated_names():
    a = parse(GEMM).module.kernels[0]
    b = parse(GEMM.replace("Acc", "Tile")).module.kernels[0]
    assert fingerprint(a) == fingerprint(b)
    names = {n.name for n in A.walk(canonical(a)) if isinstance(n, (A.Alloc, A.Access))}
    assert "Acc" not in names and "T0" in names


# -- checking -------------------------------------------------------------------------


def test_register_blocked_gemm_checks_without_false_race():
    cf = check_text(GEMM)
    assert cf.ok and [d.code for d in cf.diagnostics] == [], cf.diagnostics
    r = cf.results[0]
    acc = r.tensors["Acc"]
    assert acc.private and acc.shape == (4, 8) and [l.var for l in acc.alloc_loops] == ["io", "jo"]
    red = r.stmts[0]
    # the loops outside the allocation do not reduce into one copy
    assert red.kind == "reduce" and red.reduce_vars == ("k",) and red.init_loop.var == "k"
    # the same tile as one kernel-level buffer is a real race on the parallel loop
    shared = GEMM.replace("\\alloc Acc^{f32,l}[4, 8]; % one register tile per (io, jo)", "")
    assert "E040" in codes(shared)


def test_real_races_on_private_tiles_are_still_errors():
    # two iterations of a parallel loop *inside* the allocation write one element
    src = K("L^{2}_{io=0}[\\alloc T^{f32,l}[4]; P^{4}_{i=0}L^{4}_{j=0}[T^{f32,l}_{j} = A^{f32,g}_{io*4+i,j};];"
            "L^{4}_{i=0}L^{4}_{j=0}[C^{f32,g}_{io*4+i,j} = T^{f32,l}_{j};];];")
    assert "E040" in codes(src)
    # a reduction across a parallel loop inside the allocation
    red = K("L^{8}_{i=0}[\\alloc S^{f32,l}; P^{4}_{j=0}[S^{f32,l} = S^{f32,l} + A^{f32,g}_{i,j};];"
            "L^{4}_{j=0}[C^{f32,g}_{i,j} = S^{f32,l};];];")
    assert "E040" in codes(red)


def test_value_cannot_flow_between_iterations():
    # reading the tile before this iteration writes it would read the previous iteration's value
    src = K("L^{8}_{i=0}[\\alloc T^{f32,l}[4]; L^{4}_{j=0}[C^{f32,g}_{i,j} = T^{f32,l}_{j};];"
            "L^{4}_{j=0}[T^{f32,l}_{j} = A^{f32,g}_{i,j};];];")
    assert "E018" in codes(src)


@pytest.mark.parametrize("body, line", [
    # used after its body ends
    ("L^{8}_{i=0}[\\alloc T^{f32,l}[4]; L^{4}_{j=0}[T^{f32,l}_{j} = A^{f32,g}_{i,j};];];\n"
     "L^{8}_{i=0}L^{4}_{j=0}[C^{f32,g}_{i,j} = T^{f32,l}_{j};];", 3),
    # allocated twice
    ("L^{8}_{i=0}[\\alloc T^{f32,l}[4]; \\alloc T^{f32,l}[4];\n"
     "L^{4}_{j=0}[T^{f32,l}_{j} = A^{f32,g}_{i,j}; C^{f32,g}_{i,j} = T^{f32,l}_{j};];];", 2),
    # a parameter
    ("L^{8}_{i=0}[\\alloc C^{f32,l}[4];\nL^{4}_{j=0}[C^{f32,g}_{i,j} = A^{f32,g}_{i,j};];];", 2),
    # used at kernel level before the allocation
    ("L^{4}_{j=0}[T^{f32,l}_{j} = 1.0;];\nL^{8}_{i=0}[\\alloc T^{f32,l}[4]; L^{4}_{j=0}[C^{f32,g}_{i,j} = T^{f32,l}_{j};];];", 3),
])
def test_e047_scope_of_a_private_tensor(body, line):
    cf = check_text(K(body), "t.leir")
    d = next((d for d in cf.diagnostics if d.code == "E047"), None)
    assert d is not None, cf.diagnostics
    assert d.severity == "error" and d.file == "t.leir" and d.span.line == line


@pytest.mark.parametrize("body", [
    "L^{8}_{i=0}[\\alloc T^{f32,l}[0]; L^{4}_{j=0}[C^{f32,g}_{i,j} = A^{f32,g}_{i,j};];];",
    # shared memory allocated per thread
    "B^{8}_{tx=0}[\\alloc T^{f32,s}[4]; L^{4}_{j=0}[T^{f32,s}_{j} = A^{f32,g}_{tx,j}; C^{f32,g}_{tx,j} = T^{f32,s}_{j};];];",
    # local memory shared by the threads of a block
    "B^{2}_{bx=0}[\\alloc T^{f32,l}[4]; B^{4}_{tx=0}[T^{f32,l}_{tx} = A^{f32,g}_{bx*4+tx,0};];"
    "L^{4}_{i=0}L^{4}_{j=0}[C^{f32,g}_{bx*4+i,j} = T^{f32,l}_{j};];];",
])
def test_e048_invalid_allocations(body):
    assert "E048" in codes(K(body))


def test_bounds_are_proven_against_the_declared_shape():
    src = K("L^{8}_{i=0}[\\alloc T^{f32,l}[3]; L^{4}_{j=0}[T^{f32,l}_{j} = A^{f32,g}_{i,j}; C^{f32,g}_{i,j} = T^{f32,l}_{j};];];")
    assert "E030" in codes(src)


# -- interpretation -------------------------------------------------------------------


def test_interpreter_modes_agree_and_match_numpy():
    r = check_source(GEMM)
    x = inputs(r)
    ref = x["A"].astype(np.float64) @ x["B"].astype(np.float64)
    outs = [Interpreter(r, vectorize=v).run(x, check_uninit=True)["C"] for v in (True, False)]
    for o in outs:
        np.testing.assert_allclose(o, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outs[0], outs[1], rtol=2e-6, atol=2e-6)
    # a private tile has no value after its nest
    assert "Acc" not in Interpreter(r).run(x, intermediates=True)


def test_each_iteration_starts_uninitialized():
    # the second row of the tile is written only in iteration i == 0; reading it later
    # is an uninitialized read, not the value of iteration 0
    src = K("L^{2}_{i=0}[\\alloc T^{f32,l}[2, 4];"
            "L^{4}_{j=0}[T^{f32,l}_{0,j} = A^{f32,g}_{i,j}; T^{f32,l}_{1,j} = if_then_else(i == 0, 1.0, T^{f32,l}_{0,j});];"
            "L^{4}_{j=0}[C^{f32,g}_{i,j} = T^{f32,l}_{1,j};];];"
            "L^{6}_{i=2}L^{4}_{j=0}[C^{f32,g}_{i,j} = 0.0;];")
    r = check_source(src)
    x = {"A": np.ones((8, 4), np.float32)}
    for v in (True, False):
        out = Interpreter(r, vectorize=v).run(x, check_uninit=True)["C"]
        assert (out[:2] == 1.0).all()
    # reading a row that no statement of this iteration writes
    bad = src.replace("T^{f32,l}_{1,j} = if_then_else(i == 0, 1.0, T^{f32,l}_{0,j});",
                      "T^{f32,l}_{1,j} = if_then_else(i == 0, 1.0, T^{f32,l}_{1,j});")
    rb = check_text(bad)
    if rb.ok:  # a self-read that is not a reduction form is E046; otherwise it must fail at run time
        with pytest.raises(InterpError, match="uninitialized read"):
            Interpreter(check_source(bad), vectorize=False).run(x, check_uninit=True)
    else:
        assert any(d.code in ("E046", "E018") for d in rb.diagnostics)


def test_reduction_reinitializes_per_iteration():
    # S is summed over j in each i: the sum must not carry over from one i to the next
    src = K("L^{8}_{i=0}[\\alloc S^{f32,l}; L^{4}_{j=0}[S^{f32,l} = S^{f32,l} + A^{f32,g}_{i,j};];"
            "L^{4}_{j=0}[C^{f32,g}_{i,j} = S^{f32,l};];];")
    r = check_source(src)
    x = inputs(r, 3)
    want = np.repeat(x["A"].astype(np.float64).sum(1, keepdims=True), 4, 1)
    for v in (True, False):
        np.testing.assert_allclose(Interpreter(r, vectorize=v).run(x)["C"], want, rtol=1e-5, atol=1e-6)


# -- lowering -------------------------------------------------------------------------


def _tir(src: str, target="llvm") -> str:
    from leirc.lower import lower

    return lower(check_source(src), target).script()


def test_accumulator_is_allocated_inside_the_nest():
    text = _tir(GEMM)
    lines = text.splitlines()
    alloc = next(i for i, l in enumerate(lines) if "Acc = T.alloc" in l)
    par = next(i for i, l in enumerate(lines) if "T.parallel(4)" in l)
    assert "local" in lines[alloc], lines[alloc]
    assert alloc > par, "the tile must be allocated inside the parallel loop"
    indent = len(lines[alloc]) - len(lines[alloc].lstrip())
    assert indent > len(lines[par]) - len(lines[par].lstrip()) + 4, "inside jo as well"
    assert "(4, 8)" in lines[alloc]


def test_gemm_verifies_compiled():
    from leirc.verify.core import verify

    rep = verify(GEMM, seeds=(0,), dists=("uniform", "normal"), probes=())
    assert rep.equal, rep.failures


def test_cuda_places_local_and_shared_tiles():
    src = K("B^{2}_{bx=0}[\\alloc T^{f32,s}[4, 4];"
            "B^{4}_{tx=0}L^{4}_{j=0}[T^{f32,s}_{tx,j} = A^{f32,g}_{bx*4+tx,j};];"
            "B^{4}_{tx=0}[\\alloc R^{f32,l}[4]; L^{4}_{j=0}[R^{f32,l}_{j} = T^{f32,s}_{3-tx,j} * 2.0;];"
            "L^{4}_{j=0}[C^{f32,g}_{bx*4+tx,j} = R^{f32,l}_{j};];];];")
    assert codes(src) == []
    text = _tir(src, "cuda")
    assert 'T.alloc_buffer((4, 4), scope="shared")' in text or "T.alloc_shared((4, 4))" in text, text
    assert "alloc_local((4,))" in text or 'T.alloc_buffer((4,), scope="local")' in text, text
    import shutil

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    from leirc.lower import build, nvcc_compile

    cuda = build(check_source(src), "cuda").cuda_source
    assert "__shared__" in cuda and "__syncthreads()" in cuda
    ok, log = nvcc_compile(cuda)
    assert ok, log
