"""distribute_guard and mask_input: a guarded product's comparisons moved onto its factors,
and a guarded input copied once, masked, so the hot nest reads it plain
(leirc/strategies/blocking.py, issue #12). Together they turn the triangular product of
``triu(A) @ triu(B)`` into a plain GEMM that -O2 blocks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from leirc.lang import ast as A
from leirc.lang.checker import check_kernel
from leirc.lang.printer import print_kernel, print_module
from leirc.strategies import NotApplicable, Step, apply_step, enumerate_sites
from leirc.strategies.base import plan_step
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text

#: the triangular product of stdlib's matmul_upper_triangular, small
TRI = (r"\kernel k(A:f32[6,6],B:f32[6,6])->(C:f32[6,6]){L^{6}_{i=0}L^{6}_{j=0}L^{6}_{k=0}"
       r"[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+if_then_else(i<=k<=j,A^{f32,g}_{i,k}*B^{f32,g}_{k,j},0.0);];}")
#: three factors, a comparison that constrains two of them, and a shifted subscript
THREE = (r"\kernel k(X:f32[8,8],Y:f32[8],Z:f32[9])->(C:f32[8]){L^{8}_{i=0}L^{8}_{j=0}"
         r"[C^{f32,g}_{i}=C^{f32,g}_{i}+if_then_else(j<i&i<6,X^{f32,g}_{i,j}*Y^{f32,g}_{j}*Z^{f32,g}_{i+1},0.0);];}")


def text(kernel) -> str:
    return print_module(A.Module((kernel,)), "pretty")


def not_applicable(name: str, kernel, match: str, **args) -> None:
    with pytest.raises(NotApplicable, match=match):
        apply_step(kernel, Step.make(name, **args))


def verify(before, after, target: str = "interp", **kw):
    from leirc.verify import verify as run

    return run(text(after), text(before), target=target, seeds=(0, 1), dists=("normal",), **kw)


@pytest.mark.parametrize("name", ["distribute_guard", "mask_input"])
def test_docstring_example(name):
    check_docstring_example(name)


def test_golden_upper_triangular(update_golden):
    k = kernel_of(stdlib_text("matmul_upper_triangular"))
    split = apply_step(k, Step.make("distribute_guard", stmt="N0.S0"))
    check_golden("distribute_guard", "matmul_upper_triangular", split, update_golden)
    masked = apply_step(apply_step(split, Step.make("mask_input", stmt="N0.S0", tensor="A")),
                        Step.make("mask_input", stmt="N1.S0", tensor="B"))
    check_golden("mask_input", "matmul_upper_triangular_A_B", masked, update_golden)


def test_each_comparison_lands_on_every_factor_whose_indices_it_uses():
    got = print_kernel(apply_step(kernel_of(THREE), Step.make("distribute_guard", stmt="N0.S0")))
    # j<i uses i and j: only X_{i,j} has both; i<6 lands on X and on Z_{i+1}; Y_j keeps no guard
    assert ("C^{f32,g}_{i}+if_then_else(j<i&i<6,X^{f32,g}_{i,j},0.0)*Y^{f32,g}_{j}"
            "*if_then_else(i<6,Z^{f32,g}_{i+1},0.0)") in got


def test_distribute_guard_is_declared_exact_in_reals_and_is_not_bitwise_on_a_signed_zero():
    rw = plan_step(kernel_of(TRI), Step.make("distribute_guard", stmt="N0.S0"))
    assert rw.numerics == "exact-in-reals" and rw.created == {}
    # what it means: 0.0 where the guard fails became 0*y, which is -0.0 for a negative y
    y = np.float32(-2.5)
    assert math.copysign(1.0, np.float32(0.0) * y) == -1.0


def test_mask_input_copy_nest_and_handles():
    k = apply_step(kernel_of(TRI), Step.make("distribute_guard", stmt="N0.S0"))
    rw = plan_step(k, Step.make("mask_input", stmt="N0.S0", tensor="B"))
    masked = rw.created["masked"]
    assert rw.created["copy"] == "N0.a" and rw.numerics == "bitwise"
    info = rw.result.tensors[masked]
    assert (info.role, info.scope, info.shape) == ("intermediate", "g", (6, 6))
    s = print_kernel(rw.kernel)
    # B_{k,j} under k<=j: the copy is masked in B's coordinates (a, b) = (k, j)
    assert f"{masked}^{{f32,g}}_{{a,b}}=if_then_else(a<=b,B^{{f32,g}}_{{a,b}},0.0)" in s
    assert f"{masked}^{{f32,g}}_{{k,j}}" in s
    assert rw.forward("N0.S0") == "N1.S0" and rw.forward("N0.k") == "N1.k"


def test_mask_input_maps_a_shifted_subscript_into_the_copys_coordinates():
    src = (r"\kernel k(X:f32[9])->(C:f32[8]){L^{8}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+"
           r"if_then_else(i<4,X^{f32,g}_{i+1},0.0);];}")
    k = kernel_of(src)
    got = apply_step(k, Step.make("mask_input", stmt="N0.S0", tensor="X"))
    s = print_kernel(got)
    assert "if_then_else(a-1<4,X^{f32,g}_{a},0.0)" in s and "A^{f32,g}_{i+1}" in s
    rep = verify(k, got)
    assert rep.equal and rep.bitwise, rep.failures


def test_distribute_guard_rejects_with_reasons():
    k = kernel_of(TRI)
    not_applicable("distribute_guard", k, "no statement 'N3.S0'", stmt="N3.S0")
    plain = kernel_of(stdlib_text("matmul_square"))
    not_applicable("distribute_guard", plain, "no if_then_else", stmt="N0.S0")
    across = (r"\kernel k(X:f32[8],Y:f32[8])->(C:f32[8]){L^{8}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+"
              r"if_then_else(i+j<8,X^{f32,g}_{i}*Y^{f32,g}_{j},0.0);];}")
    not_applicable("distribute_guard", kernel_of(across), "constrains no single factor", stmt="N0.S0")
    either = (r"\kernel k(X:f32[8],Y:f32[8])->(C:f32[8]){L^{8}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+"
              r"if_then_else(i<2|j>5,X^{f32,g}_{i}*Y^{f32,g}_{j},0.0);];}")
    not_applicable("distribute_guard", kernel_of(either), "not a conjunction", stmt="N0.S0")
    # log(Y) would be evaluated where j <= i fails: it could be NaN, and 0*NaN is not 0
    computed = (r"\kernel k(X:f32[8,8],Y:f32[8])->(C:f32[8]){L^{8}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+"
                r"if_then_else(j<=i,X^{f32,g}_{i,j}*log(Y^{f32,g}_{j}),0.0);];}")
    not_applicable("distribute_guard", kernel_of(computed), "only a read of a kernel input", stmt="N0.S0")
    inter = (r"\kernel k(A:f32[8],Y:f32[8])->(C:f32[8]){L^{8}_{i=0}[X^{f32,g}_{i}=A^{f32,g}_{i}*2;];"
             r"L^{8}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+if_then_else(j<=i,X^{f32,g}_{i}*Y^{f32,g}_{j},0.0);];}")
    # j <= i lands on Y_j only if it holds X's indices too: it uses i and j, X_i has no j
    not_applicable("distribute_guard", kernel_of(inter), "constrains no single factor", stmt="N1.S0")
    # a non-zero value outside the guard does not distribute: it is no site at all
    one = TRI.replace(",0.0);", ",1.0);")
    not_applicable("distribute_guard", kernel_of(one), "no if_then_else", stmt="N0.S0")


def test_distribute_guard_keeps_an_intermediate_that_keeps_every_comparison():
    src = (r"\kernel k(A:f32[8],Y:f32[8])->(C:f32[8]){L^{8}_{i=0}[X^{f32,g}_{i}=A^{f32,g}_{i}*2;];"
           r"L^{8}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+if_then_else(i<3,X^{f32,g}_{i}*Y^{f32,g}_{j},0.0);];}")
    k = kernel_of(src)
    got = apply_step(k, Step.make("distribute_guard", stmt="N1.S0"))
    assert "if_then_else(i<3,X^{f32,g}_{i},0.0)*Y^{f32,g}_{j}" in print_kernel(got)
    assert verify(k, got).equal


def test_mask_input_rejects_with_reasons():
    k = apply_step(kernel_of(TRI), Step.make("distribute_guard", stmt="N0.S0"))
    not_applicable("mask_input", k, "no tensor 'Q'", stmt="N0.S0", tensor="Q")
    not_applicable("mask_input", kernel_of(TRI), "reads no 'A' as if_then_else", stmt="N0.S0", tensor="A")
    outside = (r"\kernel k(X:f32[8,8])->(C:f32[8]){L^{8}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+"
               r"if_then_else(j<4,X^{f32,g}_{i,i},0.0);];}")
    not_applicable("mask_input", kernel_of(outside), "appears in two subscripts", stmt="N0.S0", tensor="X")
    other = (r"\kernel k(X:f32[8])->(C:f32[8]){L^{8}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+"
             r"if_then_else(j<4,X^{f32,g}_{i},0.0);];}")
    not_applicable("mask_input", kernel_of(other), "no subscript of 'X'", stmt="N0.S0", tensor="X")
    scaled = (r"\kernel k(X:f32[16])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}="
              r"if_then_else(i<4,X^{f32,g}_{2*i},0.0);];}")
    not_applicable("mask_input", kernel_of(scaled), "not a loop index plus a constant", stmt="N0.S0", tensor="X")
    mixed = (r"\kernel k(X:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}="
             r"if_then_else(i<4,X^{f32,g}_{i},0.0)+if_then_else(i<5,X^{f32,g}_{i},0.0);];}")
    not_applicable("mask_input", kernel_of(mixed), "differ in their guard", stmt="N0.S0", tensor="X")
    written = (r"\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}*2;];"
               r"L^{8}_{i=0}[C^{f32,g}_{i}=if_then_else(i<4,D^{f32,g}_{i},0.0);];}")
    not_applicable("mask_input", kernel_of(written), "'D' is not a kernel input", stmt="N1.S0", tensor="D")
    # a convolution's padding reaches outside X: the copy has X's shape, so that is pad_input's case
    conv = kernel_of(r"\kernel k(X:f32[8],W:f32[3])->(C:f32[10]){L^{10}_{i=0}L^{3}_{p=0}"
                     r"[C^{f32,g}_{i}=C^{f32,g}_{i}+if_then_else(0<=i-p<8,X^{f32,g}_{i-p},0.0)*W^{f32,g}_{p};];}")
    not_applicable("mask_input", conv, "not a loop index plus a constant|would not check", stmt="N0.S0", tensor="X")


def test_trace_roundtrip():
    check_trace_roundtrip(TRI, [Step.make("distribute_guard", stmt="N0.S0"),
                                Step.make("mask_input", stmt="N0.S0", tensor="A"),
                                Step.make("mask_input", stmt="N1.S0", tensor="B"),
                                Step.make("loop_vectorization", loop="N0.b")])


@pytest.mark.parametrize("src", [TRI, THREE])
def test_distribute_guard_is_equal_on_finite_inputs(src):
    before = kernel_of(src)
    rep = verify(before, apply_step(before, Step.make("distribute_guard", stmt="N0.S0")))
    assert rep.equal, rep.failures


def test_mask_input_is_bitwise():
    before = apply_step(kernel_of(TRI), Step.make("distribute_guard", stmt="N0.S0"))
    after = apply_step(before, Step.make("mask_input", stmt="N0.S0", tensor="A"))
    rep = verify(before, after)
    assert rep.equal and rep.bitwise, rep.failures


def test_builds_and_verifies_on_llvm():
    before = kernel_of(TRI)
    after = apply_step(apply_step(apply_step(before, Step.make("distribute_guard", stmt="N0.S0")),
                                  Step.make("mask_input", stmt="N0.S0", tensor="A")),
                       Step.make("mask_input", stmt="N1.S0", tensor="B"))
    rep = verify(before, after, target="llvm")
    assert rep.equal, rep.failures


@pytest.mark.parametrize("kernel", ["matmul_upper_triangular", "conv2d_strided_dilated", "matmul_square"])
def test_sites(kernel):
    k = kernel_of(stdlib_text(kernel))
    res = check_kernel(k)
    dist = enumerate_sites(k, ["distribute_guard"], res)
    assert [s.to_json() for s in dist] == [s.to_json() for s in enumerate_sites(k, ["distribute_guard"], res)]
    # the convolution's guard holds one read, not a product; matmul_square has no guard
    assert [s.fixed["stmt"] for s in dist] == (["N0.S0"] if kernel == "matmul_upper_triangular" else [])
    for site in dist:
        for st in site.steps():
            apply_step(k, st, result=res)
    split = apply_step(k, Step.make("distribute_guard", stmt="N0.S0")) if dist else k
    masks = enumerate_sites(split, ["mask_input"], check_kernel(split))
    assert [s.fixed["tensor"] for s in masks] == (["A", "B"] if kernel == "matmul_upper_triangular" else [])


def test_o2_turns_the_triangular_product_into_a_blocked_gemm_that_verifies():
    from leirc.opt import o2
    from leirc.verify import verify as run

    k = kernel_of(stdlib_text("matmul_upper_triangular"))
    res = o2.optimize(k)
    names = [s.name for s in res.steps]
    assert names[:3] == ["distribute_guard", "mask_input", "mask_input"] and "cache_write" in names
    hot = [item for item in res.kernel.body if any(isinstance(n, A.Alloc) for n in A.walk(item))]
    assert len(hot) == 1 and not any(isinstance(n, A.Call) and n.func == "if_then_else" for n in A.walk(hot[0]))
    rep = run(text(res.kernel), text(k), target="llvm", seeds=(0,), dists=("normal",))
    assert rep.equal, rep.failures
