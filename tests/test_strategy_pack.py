"""pack_input: copy a tensor into a blocked layout in a nest hoisted before the hot nest
(leirc/strategies/blocking.py, issue #12)."""

from __future__ import annotations

import pytest

import leirc.strategies.blocking  # noqa: F401  (registers the strategy until families.py lists it)
from leirc.lang import ast as A
from leirc.lang.checker import check_kernel
from leirc.lang.printer import print_kernel, print_module
from leirc.strategies import NotApplicable, Step, apply_step, enumerate_sites
from leirc.strategies.base import plan_step
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text

NAME = "pack_input"

SMALL_MM = (r"\kernel k(A:f32[16,8],B:f32[8,32])->(C:f32[16,32]){L^{16}_{i=0}L^{8}_{k=0}L^{32}_{j=0}"
            r"[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+A^{f32,g}_{i,k}*B^{f32,g}_{k,j};];}")
#: j tiled by 16, B packed into 16-wide panels, A into 4-row panels
SMALL_PACKED = [
    Step.make("loop_split", loop="N0.j", factor=16),
    Step.make("loop_reorder", loop="N0.i", order="i,jo,k"),
    Step.make(NAME, stmt="N0.S0", tensor="B", dim=1, factor=16),
    Step.make(NAME, stmt="N1.S0", tensor="A", dim=0, factor=4),
    Step.make("loop_vectorization", loop="N2.j"),
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
    from leirc.verify import verify

    rep = verify(text(after), text(before), target="interp", seeds=(0,), dists=("normal",))
    assert rep.equal, rep.failures
    assert rep.bitwise, f"not bitwise: max abs err {rep.max_abs_err}"


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_packed_matmul(update_golden):
    k = kernel_of(stdlib_text("matmul_standard"))
    steps = [Step.make("loop_split", loop="N0.j", factor=32),
             Step.make("loop_reorder", loop="N0.i", order="i,jo,k,j"),
             Step.make(NAME, stmt="N0.S0", tensor="B", dim=1, factor=32)]
    check_golden(NAME, "matmul_standard_B_panels_32", run(k, steps), update_golden)


def test_layout_copy_nest_and_handles():
    k = run(kernel_of(SMALL_MM), SMALL_PACKED[:2])
    rw = plan_step(k, SMALL_PACKED[2])
    packed = rw.created["packed"]
    assert rw.created["copy"] == "N0.a" and rw.numerics == "bitwise"
    copy = rw.kernel.body[0]
    assert [l.extent for l in (copy, copy.body[0], copy.body[0].body[0])] == [2, 8, 16]
    st = copy.body[0].body[0].body[0]
    assert print_kernel(rw.kernel).count(f"{packed}^{{f32,g}}_{{a,b,c}}=B^{{f32,g}}_{{b,a*16+c}}") == 1
    info = rw.result.tensors[packed]
    assert (info.role, info.scope, info.shape) == ("intermediate", "g", (2, 8, 16))
    assert isinstance(st, A.Assign)
    # the hot nest reads the packed panel without a division: jo*16 + j with j < 16
    reads = [a for a in A.walk(rw.kernel.body[1]) if isinstance(a, A.Access) and a.name == packed]
    assert [tuple(map(str, (print_kernel_expr(i) for i in r.indices))) for r in reads] == [("jo", "k", "j")]
    assert not any(isinstance(a, A.Access) and a.name == "B" for a in A.walk(rw.kernel.body[1]))
    # the hot nest moved one place down; its handles follow it
    assert rw.forward("N0.S0") == "N1.S0" and rw.forward("N0.k") == "N1.k"


def print_kernel_expr(e) -> str:
    from leirc.lang.printer import print_expr

    return print_expr(e)


def test_division_kept_where_a_block_straddles_the_remainder():
    # blocks of 8 over jo*16 + j (j < 16): the remainder j spans two blocks
    k = run(kernel_of(SMALL_MM), SMALL_PACKED[:2])
    got = apply_step(k, Step.make(NAME, stmt="N0.S0", tensor="B", dim=1, factor=8))
    s = print_kernel(got)
    assert "D^{f32,g}_{(jo*16+j)//8,k,(jo*16+j)%8}" in s
    assert_bitwise(kernel_of(SMALL_MM), got)


def test_guarded_read_is_packed_when_the_checker_proves_it():
    src = (r"\kernel k(A:f32[8,4])->(C:f32[8,4]){L^{8}_{i=0}L^{4}_{j=0}"
           r"[C^{f32,g}_{i,j}=if_then_else(1<=i,A^{f32,g}_{i-1,j},0.0);];}")
    k = kernel_of(src)
    got = apply_step(k, Step.make(NAME, stmt="N0.S0", tensor="A", dim=0, factor=4))
    assert "(i-1)//4" in print_kernel(got)
    assert_bitwise(k, got)


def test_rejects_with_reasons():
    k = kernel_of(SMALL_MM)
    not_applicable(k, "factor 3 must divide the extent 32", stmt="N0.S0", tensor="B", dim=1, factor=3)
    not_applicable(k, "factor 1 must divide", stmt="N0.S0", tensor="B", dim=1, factor=1)
    not_applicable(k, "the whole last dimension is the layout", stmt="N0.S0", tensor="B", dim=1, factor=32)
    not_applicable(k, "must name one of the 2 dimensions", stmt="N0.S0", tensor="B", dim=2, factor=2)
    not_applicable(k, "no tensor 'Q'", stmt="N0.S0", tensor="Q", dim=0, factor=2)
    not_applicable(k, r"no statement 'N0\.S3'", stmt="N0.S3", tensor="B", dim=0, factor=2)
    written = (r"\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[D^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;"
               r"C^{f32,g}_{i,j}=D^{f32,g}_{i,j}+1;];}")
    not_applicable(kernel_of(written), "'D' is a kernel intermediate; only kernel inputs", stmt="N0.S1", tensor="D",
                   dim=0, factor=2)
    not_applicable(kernel_of(written), "'C' is a kernel output", stmt="N0.S0", tensor="C", dim=0, factor=2)
    not_applicable(kernel_of(written), "does not read 'A'", stmt="N0.S1", tensor="A", dim=0, factor=2)
    vec = r"\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2;];}"
    not_applicable(kernel_of(vec), "one dimension", stmt="N0.S0", tensor="A", dim=0, factor=2)
    tile = (r"\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}[\alloc D^{f32,l}[8,2];L^{8}_{j=0}[D^{f32,l}_{j,0}=A^{f32,g}_{i,j};];"
            r"L^{8}_{j=0}[C^{f32,g}_{i,j}=D^{f32,l}_{j,0};];];}")
    not_applicable(kernel_of(tile), "intermediate \\(a private tile\\)", stmt="N0.S1", tensor="D", dim=0, factor=2)


def test_trace_roundtrip():
    check_trace_roundtrip(SMALL_MM, SMALL_PACKED)


def test_numeric_equivalence_bitwise():
    before = kernel_of(SMALL_MM)
    assert_bitwise(before, run(before, SMALL_PACKED))


def test_builds_and_verifies_on_llvm():
    from leirc.verify import verify

    before = kernel_of(SMALL_MM)
    after = run(before, SMALL_PACKED)
    rep = verify(text(after), text(before), target="llvm", seeds=(0,), dists=("normal",))
    assert rep.equal, rep.failures


@pytest.mark.parametrize("kernel", ["matmul_standard", "conv2d", "layernorm"])
def test_every_site_applies(kernel):
    k = kernel_of(stdlib_text(kernel))
    res = check_kernel(k)
    sites = enumerate_sites(k, [NAME], res)
    assert [s.to_json() for s in sites] == [s.to_json() for s in enumerate_sites(k, [NAME], res)]
    n = 0
    for site in sites:
        steps = site.steps()
        for st in steps if len(steps) <= 4 else [steps[0], steps[len(steps) // 2], steps[-1]]:
            apply_step(k, st, result=res)
            n += 1
    assert n > 0


def test_tile_stride_is_offered_as_a_factor():
    k = run(kernel_of(stdlib_text("matmul_standard")), [Step.make("loop_split", loop="N0.j", factor=32)])
    sites = [s for s in enumerate_sites(k, [NAME]) if s.fixed.get("tensor") == "B" and s.fixed.get("dim") == 1]
    assert sites and 32 in sites[0].domains["factor"]


def test_every_site_of_a_tiled_gemm_is_bitwise():
    before = kernel_of(SMALL_MM)
    tiled = run(before, SMALL_PACKED[:2])
    steps = [st for site in enumerate_sites(tiled, [NAME]) for st in site.steps()]
    assert len(steps) >= 6
    for st in steps:
        assert_bitwise(before, apply_step(tiled, st))
