"""unroll_and_jam: unroll an outer loop by a factor and jam the copies into a loop inside it
(leirc/strategies/blocking.py, issue #12)."""

from __future__ import annotations

import pytest

import leirc.strategies.blocking  # noqa: F401  (registers the strategy until families.py lists it)
from leirc.lang import ast as A
from leirc.lang.checker import check_kernel
from leirc.lang.printer import print_module
from leirc.strategies import NotApplicable, Step, apply_step, enumerate_sites, get
from leirc.strategies.base import Context, parse_args, plan_step
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text

NAME = "unroll_and_jam"

SMALL_MM = (r"\kernel k(A:f32[16,8],B:f32[8,32])->(C:f32[16,32]){L^{16}_{i=0}L^{8}_{k=0}L^{32}_{j=0}"
            r"[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+A^{f32,g}_{i,k}*B^{f32,g}_{k,j};];}")
#: i jammed into k, then the j loop split and vectorized: 4 vector accumulators per B_{k,j}
SMALL_BLOCKING = [
    Step.make(NAME, loop="N0.i", factor=4, into="N0.k"),
    Step.make("loop_split", loop="N0.j", factor=16),
    Step.make("loop_vectorization", loop="N0.j"),
]


def text(kernel) -> str:
    return print_module(A.Module((kernel,)), "pretty")


def run(kernel, steps):
    for s in steps:
        kernel = apply_step(kernel, s)
    return kernel


def not_applicable(kernel, match: str, **args) -> None:
    with pytest.raises(NotApplicable, match=match):
        apply_step(kernel, Step.make(NAME, **args))


def assert_bitwise(before, after) -> None:
    """The interpreter's outputs are bit-identical (one seed, normal inputs)."""
    from leirc.verify import verify

    rep = verify(text(after), text(before), target="interp", seeds=(0,), dists=("normal",))
    assert rep.equal, rep.failures
    assert rep.bitwise, f"not bitwise: max abs err {rep.max_abs_err}"


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_register_blocked_matmul(update_golden):
    k = kernel_of(stdlib_text("matmul_standard"))
    steps = [Step.make("loop_reorder", loop="N0.i", order="i,k,j")] + [
        Step.make(NAME, loop="N0.i", factor=8, into="N0.k"),
        Step.make("loop_split", loop="N0.j", factor=16),
        Step.make("loop_vectorization", loop="N0.j"),
    ]
    check_golden(NAME, "matmul_standard_i8_into_k", run(k, steps), update_golden)


def test_shape_and_handles():
    rw = plan_step(kernel_of(SMALL_MM), SMALL_BLOCKING[0])
    root = rw.kernel.body[0]
    assert (root.kind, root.var, root.extent) == ("L", "io", 4)
    k = root.body[0]
    assert (k.var, k.extent) == ("k", 8)
    u = k.body[0]
    assert (u.kind, u.var, u.extent) == ("U", "i", 4)
    assert u.body[0].var == "j" and u.body[0].kind == "L"
    assert dict(rw.created) == {"outer": "N0.io", "unrolled": "N0.i"}
    assert rw.numerics == "bitwise"
    # the loops it kept are still addressed by their old handles
    assert rw.forward("N0.k") == "N0.k" and rw.forward("N0.j") == "N0.j"
    assert rw.forward("N0.i") is None  # rebuilt: the old i loop is gone


def test_innermost_default_skips_vector_loops():
    k = kernel_of(SMALL_MM)
    # innermost plain loop of i's chain (k, j): j
    got = apply_step(k, Step.make(NAME, loop="N0.i", factor=2))
    u = got.body[0].body[0].body[0].body[0]  # io, k, j, then the copies
    assert (u.kind, u.var) == ("U", "i")
    split = run(kernel_of(SMALL_MM), [Step.make("loop_split", loop="N0.j", factor=16),
                                      Step.make("loop_vectorization", loop="N0.j")])
    got = apply_step(split, Step.make(NAME, loop="N0.i", factor=2))
    jo = got.body[0].body[0].body[0]
    assert jo.var == "jo" and jo.body[0].kind == "U" and jo.body[0].body[0].kind == "V"


def test_parallel_outer_loop_keeps_its_kind():
    par = apply_step(kernel_of(SMALL_MM), Step.make("loop_parallelization", loop="N0.i"))
    got = apply_step(par, Step.make(NAME, loop="N0.i", factor=4, into="N0.k"))
    assert got.body[0].kind == "P" and got.body[0].var == "io"
    assert_bitwise(kernel_of(SMALL_MM), got)


def test_rejects_bad_factors_and_places():
    k = kernel_of(SMALL_MM)
    not_applicable(k, "factor 3 must divide the 16 iterations", loop="N0.i", factor=3)
    not_applicable(k, "factor 1 must divide", loop="N0.i", factor=1)
    not_applicable(k, r"factor 32 must divide .* lie in 2\.\.16", loop="N0.i", factor=32)
    not_applicable(k, "not in the perfect chain inside 'k'", loop="N0.k", factor=2, into="N0.i")
    not_applicable(k, r"no loop 'N0\.q'", loop="N0.q", factor=2)
    vec = run(k, [Step.make("loop_split", loop="N0.j", factor=16), Step.make("loop_vectorization", loop="N0.j")])
    not_applicable(vec, "is a vector loop", loop="N0.i", factor=2, into="N0.j")
    unrolled = run(k, [Step.make("loop_split", loop="N0.i", factor=4), Step.make("loop_unrolling", loop="N0.i")])
    not_applicable(unrolled, "is unrolled; only serial and parallel", loop="N0.i", factor=2)


def test_rejects_a_loop_without_a_chain():
    two = (r"\kernel k(A:f32[4,8])->(C:f32[4,8],D:f32[4]){L^{4}_{i=0}[L^{8}_{j=0}[C^{f32,g}_{i,j}=A^{f32,g}_{i,j};];"
           r"D^{f32,g}_{i}=A^{f32,g}_{i,0};];}")
    not_applicable(kernel_of(two), "not a single loop: there is no loop to jam", loop="N0.i", factor=2)
    start = r"\kernel k(A:f32[8,8])->(C:f32[4,8]){L^{4}_{i=2}L^{8}_{j=0}[C^{f32,g}_{i-2,j}=A^{f32,g}_{i,j};];}"
    not_applicable(kernel_of(start), "starts at 2", loop="N0.i", factor=2)


WAVEFRONT = (r"\kernel k(A:f32[8,8])->(C:f32[8,8]){L^{8}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}="
             r"if_then_else(1<=i&j<7,C^{f32,g}_{i-DIST,j+1},0.0)+A^{f32,g}_{i,j};];}")


def test_rejects_a_reversed_dependence():
    # (i, j+1) is written before (i+1, j) reads it; jammed into j, the read would run first
    k = kernel_of(WAVEFRONT.replace("DIST", "1"))
    not_applicable(k, "'C' is written in one iteration and read in another .* opposite order", loop="N0.i", factor=2)


def test_a_dependence_between_different_outer_iterations_stays_legal():
    # distance 2 in i: with factor 2 the two instances lie in different io iterations,
    # whose order the jam keeps (the test is exact, not "any dependence on i")
    src = WAVEFRONT.replace("1<=i", "2<=i").replace("DIST", "2")
    k = kernel_of(src)
    got = apply_step(k, Step.make(NAME, loop="N0.i", factor=2))
    assert_bitwise(k, got)
    not_applicable(k, "opposite order", loop="N0.i", factor=4)


def test_private_tile_inside_the_jam():
    # the tile is fresh per (n, io): jamming n into io keeps one tile per copy
    src = (r"\kernel k(A:f32[4,4,8],B:f32[8,4])->(C:f32[4,4,4]){L^{4}_{n=0}L^{2}_{io=0}[\alloc D^{f32,l}[2,4];"
           r"L^{8}_{k=0}L^{2}_{i=0}L^{4}_{j=0}[D^{f32,l}_{i,j}=D^{f32,l}_{i,j}+A^{f32,g}_{n,io*2+i,k}*B^{f32,g}_{k,j};];"
           r"L^{2}_{i=0}L^{4}_{j=0}[C^{f32,g}_{n,io*2+i,j}=D^{f32,l}_{i,j};];];}")
    k = kernel_of(src)
    got = apply_step(k, Step.make(NAME, loop="N0.n", factor=2, into="N0.io"))
    u = got.body[0].body[0].body[0]
    assert u.kind == "U" and isinstance(u.body[0], A.Alloc)
    assert_bitwise(k, got)


def test_trace_roundtrip():
    check_trace_roundtrip(SMALL_MM, SMALL_BLOCKING)


def test_numeric_equivalence_bitwise():
    before = kernel_of(SMALL_MM)
    assert_bitwise(before, run(before, SMALL_BLOCKING[:1]))
    assert_bitwise(before, run(before, SMALL_BLOCKING))


def test_numerics_class_is_bitwise():
    s = get(NAME)
    k = kernel_of(SMALL_MM)
    assert s.numerics_for(Context(k), parse_args(s, SMALL_BLOCKING[0].kwargs)) == "bitwise"


def test_builds_and_verifies_on_llvm():
    from leirc.verify import verify

    before = kernel_of(SMALL_MM)
    after = run(before, SMALL_BLOCKING)
    rep = verify(text(after), text(before), target="llvm", seeds=(0,), dists=("normal",))
    assert rep.equal, rep.failures


@pytest.mark.parametrize("kernel", ["matmul_standard", "batched_matmul", "layernorm"])
def test_every_site_applies(kernel):
    k = kernel_of(stdlib_text(kernel))
    res = check_kernel(k)
    sites = enumerate_sites(k, [NAME], res)
    assert [s.to_json() for s in sites] == [s.to_json() for s in enumerate_sites(k, [NAME], res)]
    n = 0
    for site in sites:
        steps = site.steps()
        for st in steps if len(steps) <= 4 else [steps[0], steps[-1]]:
            apply_step(k, st, result=res)
            n += 1
    assert n > 0


def test_every_site_of_a_blocked_gemm_is_bitwise():
    # a register-blocked GEMM (parallel tile loops, a private tile, unrolled and vector
    # loops): every listed jam, at every listed factor, computes the same bits
    before = kernel_of(SMALL_MM)
    blocked = run(before, [Step.make("loop_reorder", loop="N0.i", order="i,j,k"),
                           Step.make("loop_tiling", loop="N0.i", factor_outer=4, factor_inner=16),
                           Step.make("loop_reorder", loop="N0.i", order="k,i,j"),
                           Step.make("cache_write", stmt="N0.S0", loop="N0.jo"),
                           Step.make("loop_parallelization", loop="N0.io"),
                           Step.make("loop_vectorization", loop="N0.j")])
    steps = [st for site in enumerate_sites(blocked, [NAME]) for st in site.steps()]
    assert len(steps) >= 4
    for st in steps:
        assert_bitwise(before, apply_step(blocked, st))
