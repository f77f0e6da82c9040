"""loop_peel: a loop's iteration space split in two (head and tail), so a register or vector
tile reaches an extent it does not divide; a reduction the loop indexes gets an initialization
nest for the tail (docs/language.md §6). -O2 uses it for matmul_irregular's 741 columns."""

import numpy as np
import pytest

from leirc.lang import ast as A
from leirc.lang.checker import check_kernel
from leirc.lang.printer import print_kernel
from leirc.strategies.base import plan_step
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_loop_helpers import STDLIB_NAMES, apply, check_all_sites, not_applicable, stdlib, step

NAME = "loop_peel"

#: a small GEMM whose j (10) no vector width divides
GEMM = (r"\kernel k(A:f32[6,5],B:f32[5,10])->(C:f32[6,10]){L^{6}_{i=0}L^{10}_{j=0}L^{5}_{k=0}"
        r"[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+A^{f32,g}_{i,k}*B^{f32,g}_{k,j};];}")


def assert_bitwise(before, after) -> None:
    """Bit-identical outputs, both programs run loop by loop in the interpreter, with the
    uninitialized-read check on (the verifier's vectorized oracle sums a reduction with NumPy,
    in another order than the same reduction split in two)."""
    from leirc.interp import Interpreter

    rng = np.random.default_rng(0)
    inputs = {p.name: rng.standard_normal(p.shape).astype(np.float32) for p in before.inputs}
    got = [Interpreter(check_kernel(k), vectorize=False).run(inputs, check_uninit=True) for k in (before, after)]
    for p in before.outputs:
        assert got[0][p.name].tobytes() == got[1][p.name].tobytes(), p.name


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_matmul_irregular_columns(update_golden):
    k = apply(apply(stdlib("matmul_irregular"), "loop_reorder", loop="N0.i", order="j,i,k"), NAME, loop="N0.j", at=736)
    check_golden(NAME, "matmul_irregular_j736", k, update_golden)


def test_a_reduction_the_loop_indexes_gets_an_initialization_nest_before_the_tail():
    rw = plan_step(kernel_of(GEMM), step(NAME, loop="N0.j", at=8))
    s = print_kernel(rw.kernel)
    assert ("L^{8}_{j=0}L^{5}_{k=0}[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+A^{f32,g}_{i,k}*B^{f32,g}_{k,j};];"
            "L^{2}_{j=8}[C^{f32,g}_{i,j}=0.0;];L^{2}_{j=8}L^{5}_{k=0}[C^{f32,g}_{i,j}=") in s
    assert rw.created == {"head": "N0.j", "tail": "N0.j#2"} and rw.numerics == "bitwise"
    kinds = [si.kind for si in rw.result.stmts]
    # the head stays a reduction (its identity initialization intact), the tail is an update
    assert kinds == ["reduce", "assign", "update"]
    assert rw.forward("N0.k") == "N0.k" and rw.forward("N0.S0") == "N0.S0"


def test_a_max_reduction_starts_its_tail_at_minus_infinity():
    src = r"\kernel k(A:f32[4,6])->(M:f32[6]){L^{6}_{j=0}L^{4}_{i=0}[M^{f32,g}_{j}=max(M^{f32,g}_{j},A^{f32,g}_{i,j});];}"
    k = kernel_of(src)
    got = apply(k, NAME, loop="N0.j", at=5)
    assert "L^{1}_{j=5}[M^{f32,g}_{j}=-inf;];" in print_kernel(got)
    assert_bitwise(k, got)


def test_peeling_a_reduction_loop_continues_the_sum_in_the_tail():
    k = kernel_of(GEMM)
    got = apply(k, NAME, loop="N0.k", at=3)
    s = print_kernel(got)
    assert "L^{3}_{k=0}[C^{f32,g}_{i,j}=" in s and "L^{2}_{k=3}[C^{f32,g}_{i,j}=" in s and "=0.0;" not in s
    assert_bitwise(k, got)


def test_a_parallel_loop_stays_parallel_in_both_halves():
    src = r"\kernel k(A:f32[10])->(C:f32[10]){P^{10}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}+1.0;];}"
    got = apply(kernel_of(src), NAME, loop="N0.i", at=8)
    assert [(lp.kind, lp.start, lp.extent) for lp in got.body] == [("P", 0, 8), ("P", 8, 2)]


def test_peels_a_loop_that_already_starts_late_and_can_be_peeled_again():
    k = apply(kernel_of(GEMM), NAME, loop="N0.j", at=4)
    again = apply(k, NAME, loop="N0.j#2", at=3)
    loops = [(lp.start, lp.extent) for lp in again.body[0].body if isinstance(lp, A.Loop) and lp.body[0].__class__ is A.Loop]
    assert loops == [(0, 4), (4, 3), (7, 3)]
    assert_bitwise(kernel_of(GEMM), again)


def test_rejects_with_reasons():
    k = kernel_of(GEMM)
    not_applicable(k, NAME, r"no loop 'N3\.i'", loop="N3.i", at=2)
    not_applicable(k, NAME, "'at' must be between 1 and 9", loop="N0.j", at=10)
    not_applicable(k, NAME, "'at' must be between 1 and 9", loop="N0.j", at=0)
    vec = r"\kernel k(A:f32[8])->(C:f32[8]){V^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2;];}"
    not_applicable(kernel_of(vec), NAME, "only serial and parallel loops are peeled", loop="N0.i", at=4)
    # C_j reduced over k outside j: the tail's elements would be initialized at k's entry
    outer = r"\kernel k(A:f32[4,6])->(C:f32[6]){L^{4}_{k=0}L^{6}_{j=0}[C^{f32,g}_{j}=C^{f32,g}_{j}+A^{f32,g}_{k,j};];}"
    not_applicable(kernel_of(outer), NAME, "reduced over loop 'k' outside 'j'", loop="N0.j", at=4)
    # C_{i,j} with j inside the reduction loop k: one store before k cannot set a row of j
    inner = (r"\kernel k(A:f32[4,5,6])->(C:f32[4,6]){L^{4}_{i=0}L^{5}_{k=0}L^{6}_{j=0}"
             r"[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+A^{f32,g}_{i,k,j};];}")
    not_applicable(kernel_of(inner), NAME, "indexed by j inside its reduction loop 'k'", loop="N0.i", at=2)


def test_trace_roundtrip():
    check_trace_roundtrip(GEMM, [step("loop_reorder", loop="N0.i", order="j,i,k"), step(NAME, loop="N0.j", at=8),
                                 step("loop_reorder", loop="N0.j", order="i,j,k"), step(NAME, loop="N0.i", at=4)])


@pytest.mark.parametrize("loop,at", [("N0.i", 1), ("N0.i", 5), ("N0.j", 8), ("N0.k", 4)])
def test_numeric_equivalence_is_bitwise(loop, at):
    before = kernel_of(GEMM)
    assert_bitwise(before, apply(before, NAME, loop=loop, at=at))


def test_builds_and_verifies_on_llvm():
    from leirc.lang.printer import print_module
    from leirc.verify import verify

    before = kernel_of(GEMM)
    after = apply(apply(before, "loop_reorder", loop="N0.i", order="j,i,k"), NAME, loop="N0.j", at=8)
    text = lambda k: print_module(A.Module((k,)), "pretty")  # noqa: E731
    rep = verify(text(after), text(before), target="llvm", seeds=(0, 1), dists=("normal",))
    assert rep.equal, rep.failures


def test_sites_offer_the_remainders_of_vector_widths():
    k = stdlib("matmul_irregular")
    sites = {s.fixed["loop"]: s.domains["at"] for s in __import__("leirc.strategies", fromlist=["enumerate_sites"])
             .enumerate_sites(k, [NAME], check_kernel(k))}
    # 1025 = 1024 + 1; 741 = 736 + 5 = 740 + 1; 369 = 368 + 1 = 352 + 17
    assert sites == {"N0.i": [1024], "N0.j": [736, 740], "N0.k": [352, 368]}


@pytest.mark.parametrize("kernel", STDLIB_NAMES)
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)


def test_o2_peels_the_columns_no_vector_tile_divides_and_verifies():
    from leirc.lang.printer import print_module
    from leirc.opt import o2
    from leirc.verify import verify

    k = stdlib("matmul_irregular")
    res = o2.optimize(k)
    names = [s.name for s in res.steps]
    assert "loop_peel" in names and "cache_write" in names
    peel = next(s for s in res.steps if s.name == "loop_peel")
    assert peel.kwargs["at"] == 736
    # the blocked head, the tail's initialization, the 5-column tail
    assert len(res.kernel.body) == 3 and any(isinstance(n, A.Alloc) for n in A.walk(res.kernel.body[0]))
    text = print_module(A.Module((res.kernel,)), "pretty")
    rep = verify(text, stdlib_text("matmul_irregular"), target="llvm", seeds=(0,), dists=("normal",))
    assert rep.equal, rep.failures


def test_o2_does_not_peel_a_remainder_that_is_a_large_part_of_its_loop():
    from leirc.opt import o2

    # 185 = 160 + 25 columns: the scalar tail would cost more than blocking the head saves
    src = GEMM.replace("B:f32[5,10]", "B:f32[5,185]").replace("C:f32[6,10]", "C:f32[6,185]").replace("L^{10}_{j=0}", "L^{185}_{j=0}")
    res = o2.optimize(kernel_of(src))
    assert "loop_peel" not in [s.name for s in res.steps]
    assert any(f"1/{o2.MAX_PEELED}" in line for line in res.log)


def test_o2_peels_a_reduction_loop_no_vector_width_divides_into_partial_sums_and_a_tail():
    from leirc.lang.printer import print_module
    from leirc.opt import o2
    from leirc.verify import verify

    # torch.min(x, dim=2) of KernelBench L1-53: 255 = 240 in vector partial sums + 15 scalar steps
    src = r"\kernel k(X:f32[8,255])->(M:f32[8]){L^{8}_{i=0}L^{255}_{j=0}[M^{f32,g}_{i}=min(M^{f32,g}_{i},X^{f32,g}_{i,j});];}"
    k = kernel_of(src)
    res = o2.optimize(k, tiles=o2.Tiles(mr=8, nr=32, lanes=16))
    steps = [(s.name, s.kwargs) for s in res.steps[:2]]
    assert steps == [("loop_peel", {"loop": "N0.j", "at": 240}), ("vectorized_partial_sums", {"stmt": "N0.S0", "lanes": 16})]
    rep = verify(print_module(A.Module((res.kernel,)), "pretty"), src, target="llvm", seeds=(0, 1), dists=("normal",))
    assert rep.equal and rep.bitwise, rep.failures
    # 23 = 20 + 3 (only a width of 4 fits four times): a remainder above 1/16 of the loop is not peeled
    wide = kernel_of(src.replace("255", "23"))
    assert "loop_peel" not in [s.name for s in o2.optimize(wide, tiles=o2.Tiles(mr=8, nr=32, lanes=16)).steps]
