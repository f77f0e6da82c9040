"""privatize: an intermediate used only inside a loop, one slice per iteration, becomes a
private tensor of that loop (array contraction, docs/language.md §3.1). -O2 uses it for the
row intermediates of softmax-like kernels once their passes share one row loop."""

import numpy as np
import pytest

from leirc.lang import ast as A
from leirc.lang.checker import check_kernel
from leirc.lang.printer import print_kernel
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_loop_helpers import apply, assert_equivalent, check_all_sites, not_applicable, numerics, stdlib, step

NAME = "privatize"

#: two passes over each row: D is written and read back within the iteration of i
ROWS = (r"\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}[L^{8}_{j=0}[D^{f32,g}_{i,j}=exp(A^{f32,g}_{i,j});];"
        r"L^{8}_{j=0}[S^{f32,g}_{i}=S^{f32,g}_{i}+D^{f32,g}_{i,j};];"
        r"L^{8}_{j=0}[C^{f32,g}_{i,j}=D^{f32,g}_{i,j}/S^{f32,g}_{i};];];}")


def fused_softmax() -> A.Kernel:
    """The stdlib softmax with its three passes in one row loop (what -O2's row fusion does)."""
    k = stdlib("softmax")
    return apply(apply(k, "outer_fusion", nest=0), "outer_fusion", nest=0)


def assert_bitwise_uninit_checked(before: A.Kernel, after: A.Kernel) -> None:
    """Bit-identical outputs of both programs in the loop-by-loop interpreter, with the
    uninitialized-read check on: a private copy read before this iteration wrote it fails."""
    from leirc.interp import Interpreter

    rng = np.random.default_rng(0)
    inputs = {p.name: rng.standard_normal(p.shape).astype(np.float32) for p in before.inputs}
    got = [Interpreter(check_kernel(k), vectorize=False).run(inputs, check_uninit=True) for k in (before, after)]
    for p in before.outputs:
        assert got[0][p.name].tobytes() == got[1][p.name].tobytes(), p.name


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_softmax_row_intermediates(update_golden):
    k = fused_softmax()
    for t in ("Rmax", "Rsum"):
        k = apply(k, NAME, tensor=t, loop="N0.i")
    check_golden(NAME, "softmax_rmax_rsum", k, update_golden)


def test_the_slice_is_allocated_at_the_start_of_the_loop_with_the_dimension_dropped():
    k = apply(kernel_of(ROWS), NAME, tensor="D", loop="N0.i")
    body = k.body[0].body
    assert body[0] == A.Alloc("D", "f32", "l", (8,))
    uses = [n for n in A.walk(k) if isinstance(n, A.Access) and n.name == "D"]
    assert len(uses) == 3 and all(u.indices == (A.Var("j"),) and u.scope == "l" for u in uses)
    # the reduction into S is untouched and still starts from 0 at its own loop
    assert [si.kind for si in check_kernel(k).stmts] == ["assign", "reduce", "assign"]


def test_a_row_statistic_becomes_a_private_scalar():
    k = apply(kernel_of(ROWS), NAME, tensor="S", loop="N0.i")
    assert k.body[0].body[0] == A.Alloc("S", "f32", "l", ())
    assert_bitwise_uninit_checked(kernel_of(ROWS), k)


def test_numerics_class_and_bitwise_results():
    before = kernel_of(ROWS)
    assert numerics(before, NAME, tensor="D", loop="N0.i") == "bitwise"
    after = apply(apply(before, NAME, tensor="D", loop="N0.i"), NAME, tensor="S", loop="N0.i")
    assert_bitwise_uninit_checked(before, after)
    assert_equivalent(before, after, "bitwise")


def test_numeric_equivalence_softmax():
    before = stdlib("softmax")
    after = fused_softmax()
    for t in ("Rmax", "Rsum"):
        after = apply(after, NAME, tensor=t, loop="N0.i")
    assert_equivalent(before, after, "bitwise")


def test_a_declared_intermediate_moves_its_declaration_into_the_loop():
    src = ROWS.replace("{L^{4}_{i=0}[", r"{\alloc D^{f32,g}[4,8];L^{4}_{i=0}[", 1)
    k = apply(kernel_of(src), NAME, tensor="D", loop="N1.i")
    assert not any(isinstance(it, A.Alloc) for it in k.body)
    assert k.body[0].body[0] == A.Alloc("D", "f32", "l", (8,))


def test_rejects():
    k = kernel_of(ROWS)
    not_applicable(k, NAME, "kernel input", tensor="A", loop="N0.i")
    not_applicable(k, NAME, "kernel output", tensor="C", loop="N0.i")
    not_applicable(k, NAME, "no tensor 'Q'", tensor="Q", loop="N0.i")
    # inside the loop over j, D is the whole row of every j: iterations share nothing, but the
    # uses in the other j loops lie outside this one
    not_applicable(k, NAME, "used outside loop 'j'", tensor="D", loop="N0.j")
    # a value that flows from one iteration to the next: the slice of i-1 is read in iteration i
    shift = (r"\kernel k(A:f32[4])->(C:f32[4]){L^{4}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}*2;"
             r"C^{f32,g}_{i}=D^{f32,g}_{i}+D^{f32,g}_{max(i-1,0)};];}")
    not_applicable(kernel_of(shift), NAME, "in every access", tensor="D", loop="N0.i")
    # one row written by every iteration of i: iterations would share it
    shared = (r"\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}[L^{8}_{j=0}[D^{f32,g}_{j}=A^{f32,g}_{i,j};];"
              r"L^{8}_{j=0}[C^{f32,g}_{i,j}=D^{f32,g}_{j};];];}")
    not_applicable(kernel_of(shared), NAME, "share elements", tensor="D", loop="N0.i")
    # used before the loop: the value lives across it
    before_loop = (r"\kernel k(A:f32[4])->(C:f32[4]){L^{4}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i};];"
                   r"L^{4}_{i=0}[C^{f32,g}_{i}=D^{f32,g}_{i};];}")
    not_applicable(kernel_of(before_loop), NAME, "used outside loop", tensor="D", loop="N0.i")
    once = apply(k, NAME, tensor="D", loop="N0.i")
    not_applicable(once, NAME, "already private", tensor="D", loop="N0.i")


def test_sites_name_each_tensor_and_loop_once():
    sites = [s for s in __import__("leirc.strategies", fromlist=["enumerate_sites"]).enumerate_sites(
        kernel_of(ROWS), [NAME], None)]
    assert sorted((s.fixed["tensor"], s.fixed["loop"]) for s in sites) == [("D", "N0.i"), ("S", "N0.i")]


def test_trace_roundtrip():
    src = print_kernel(fused_softmax())
    check_trace_roundtrip(src, [step(NAME, tensor="Rmax", loop="N0.i"), step(NAME, tensor="Rsum", loop="N0.i")])


@pytest.mark.parametrize("kernel", ["softmax", "layernorm", "groupnorm", "matmul_gelu_softmax"])
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)


def test_the_private_row_is_allocated_inside_the_parallel_loop():
    from leirc.lower import lower

    k = apply(apply(kernel_of(ROWS), NAME, tensor="D", loop="N0.i"), "loop_parallelization", loop="N0.i")
    lines = lower(check_kernel(k), "llvm").script().splitlines()
    alloc = next(i for i, l in enumerate(lines) if "D = T.alloc" in l or "D = T.decl_buffer" in l)
    par = next(i for i, l in enumerate(lines) if "T.parallel(4)" in l)
    assert alloc > par, "\n".join(lines)
    assert "(8,)" in lines[alloc]


def test_stdlib_text_is_unchanged_by_listing():
    # listing sites must not rewrite anything: the stdlib text parses to the same kernel after
    assert kernel_of(stdlib_text("softmax")) == stdlib("softmax")
