"""pad_input: copy a guarded input into a padded tensor before the nest; the nest reads it
without its guard (leirc/strategies/blocking.py, issue #12)."""

from __future__ import annotations

import pytest

from leirc.lang import ast as A
from leirc.lang.checker import check_kernel
from leirc.lang.printer import print_kernel, print_module
from leirc.strategies import NotApplicable, Step, apply_step, enumerate_sites
from leirc.strategies.base import plan_step
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text

NAME = "pad_input"

#: a 1-d full convolution: the subscript i - p runs from -2 to 9 over an input of 8
FULL = (r"\kernel k(X:f32[8],W:f32[3])->(C:f32[10]){L^{10}_{i=0}L^{3}_{p=0}"
        r"[C^{f32,g}_{i}=C^{f32,g}_{i}+if_then_else(0<=i-p<8,X^{f32,g}_{i-p},0.0)*W^{f32,g}_{p};];}")
#: a guard narrower than the input (only rows 1..5 count) and two guarded reads with the same box
NARROW = (r"\kernel k(X:f32[8,4])->(C:f32[8,4]){L^{8}_{i=0}L^{4}_{j=0}"
          r"[C^{f32,g}_{i,j}=if_then_else(1<=i&i<=5,X^{f32,g}_{i,j},0.0)+if_then_else(1<=i<=5,X^{f32,g}_{i,j},0.0)*2;];}")


def text(kernel) -> str:
    return print_module(A.Module((kernel,)), "pretty")


def not_applicable(kernel, match: str, **args) -> None:
    with pytest.raises(NotApplicable, match=match):
        apply_step(kernel, Step.make(NAME, **args))


def assert_bitwise(before, after, target: str = "interp") -> None:
    from leirc.verify import verify

    rep = verify(text(after), text(before), target=target, seeds=(0, 1), dists=("normal",))
    assert rep.equal, rep.failures
    assert rep.bitwise, f"not bitwise: max abs err {rep.max_abs_err}"


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_strided_dilated_conv(update_golden):
    k = kernel_of(stdlib_text("conv2d_strided_dilated"))
    check_golden(NAME, "conv2d_strided_dilated_X", apply_step(k, Step.make(NAME, stmt="N0.S0", tensor="X")),
                 update_golden)


def test_copy_nest_shape_and_handles():
    k = kernel_of(FULL)
    rw = plan_step(k, Step.make(NAME, stmt="N0.S0", tensor="X"))
    padded = rw.created["padded"]
    assert rw.created["copy"] == "N0.a" and rw.numerics == "bitwise"
    info = rw.result.tensors[padded]
    assert (info.role, info.scope, info.shape) == ("intermediate", "g", (12,))  # 2 in front, 2 behind
    hot = rw.kernel.body[1]
    assert not any(isinstance(n, A.Call) and n.func == "if_then_else" for n in A.walk(hot))
    assert f"{padded}^{{f32,g}}_{{i-p+2}}" in print_kernel(rw.kernel)
    assert rw.forward("N0.S0") == "N1.S0" and rw.forward("N0.p") == "N1.p"


def test_a_box_narrower_than_the_input_is_kept_in_the_copy():
    k = kernel_of(NARROW)
    got = apply_step(k, Step.make(NAME, stmt="N0.S0", tensor="X"))
    s = print_kernel(got)
    assert "if_then_else(1<=a<6," in s and s.count("if_then_else") == 1  # both reads unguarded, one guard
    assert check_kernel(got).tensors["A"].shape == (8, 4)  # no padding needed: the subscripts stay inside
    assert_bitwise(k, got)


def test_two_shifted_reads_with_the_same_box_share_one_padded_copy():
    # X_{i-1} for 1 <= i and X_{i+1} for i < 7: both read zero exactly outside X's 0..7
    src = (r"\kernel k(X:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}="
           r"if_then_else(1<=i,X^{f32,g}_{i-1},0.0)+if_then_else(i<7,X^{f32,g}_{i+1},0.0);];}")
    k = kernel_of(src)
    got = apply_step(k, Step.make(NAME, stmt="N0.S0", tensor="X"))
    assert "A^{f32,g}_{i}+A^{f32,g}_{i+2}" in print_kernel(got)
    assert check_kernel(got).tensors["A"].shape == (10,)
    assert_bitwise(k, got)


def test_rejects_with_reasons():
    k = kernel_of(FULL)
    not_applicable(k, "no tensor 'Q'", stmt="N0.S0", tensor="Q")
    not_applicable(k, "reads no 'W' as if_then_else", stmt="N0.S0", tensor="W")
    mixed = (r"\kernel k(X:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}="
             r"if_then_else(2<=i,X^{f32,g}_{i-1},0.0)+if_then_else(i<7,X^{f32,g}_{i+1},0.0);];}")
    not_applicable(kernel_of(mixed), "differ in their box", stmt="N0.S0", tensor="X")
    fills = (r"\kernel k(X:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}="
             r"if_then_else(1<=i,X^{f32,g}_{i-1},0.0)+if_then_else(1<=i,X^{f32,g}_{i-1},1.0);];}")
    not_applicable(kernel_of(fills), "differ in their box or their value", stmt="N0.S0", tensor="X")
    other = (r"\kernel k(X:f32[8],Y:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}="
             r"if_then_else(Y^{f32,g}_{i}<0.0,X^{f32,g}_{i},0.0);];}")
    not_applicable(kernel_of(other), "does not bound an index expression", stmt="N0.S0", tensor="X")
    either = (r"\kernel k(X:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}="
              r"if_then_else(i<2|i>5,X^{f32,g}_{i},0.0);];}")
    not_applicable(kernel_of(either), "not a conjunction", stmt="N0.S0", tensor="X")
    unrelated = (r"\kernel k(X:f32[8,8])->(C:f32[8]){L^{8}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+"
                 r"if_then_else(i+j<8,X^{f32,g}_{i,j},0.0);];}")
    not_applicable(kernel_of(unrelated), "bounds no subscript", stmt="N0.S0", tensor="X")
    written = (r"\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}*2;];"
               r"L^{8}_{i=0}[C^{f32,g}_{i}=if_then_else(1<=i,D^{f32,g}_{i-1},0.0);];}")
    not_applicable(kernel_of(written), "'D' is not a kernel input", stmt="N1.S0", tensor="D")
    variable = (r"\kernel k(X:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}="
                r"if_then_else(1<=i,X^{f32,g}_{i-1},X^{f32,g}_{i});];}")
    not_applicable(kernel_of(variable), "not a constant", stmt="N0.S0", tensor="X")


def test_trace_roundtrip():
    check_trace_roundtrip(FULL, [Step.make(NAME, stmt="N0.S0", tensor="X"),
                                 Step.make("loop_vectorization", loop="N0.a")])


@pytest.mark.parametrize("src", [FULL, NARROW, stdlib_text("conv_transpose2d").replace("64", "8")])
def test_numeric_equivalence_bitwise(src):
    before = kernel_of(src)
    assert_bitwise(before, apply_step(before, Step.make(NAME, stmt="N0.S0", tensor="X")))


def test_builds_and_verifies_on_llvm():
    from leirc.verify import verify

    # equal, not bitwise: without the guard between them LLVM may contract the multiply-add into an FMA
    before = kernel_of(FULL)
    after = apply_step(before, Step.make(NAME, stmt="N0.S0", tensor="X"))
    rep = verify(text(after), text(before), target="llvm", seeds=(0,), dists=("normal",))
    assert rep.equal, rep.failures


@pytest.mark.parametrize("kernel", ["conv2d_strided_dilated", "conv_transpose2d", "matmul_upper_triangular"])
def test_sites(kernel):
    k = kernel_of(stdlib_text(kernel))
    res = check_kernel(k)
    sites = enumerate_sites(k, [NAME], res)
    assert [s.to_json() for s in sites] == [s.to_json() for s in enumerate_sites(k, [NAME], res)]
    # the convolutions' zero padding is a box; the triangle i <= k <= j bounds no single subscript
    assert [s.fixed["tensor"] for s in sites] == ([] if kernel == "matmul_upper_triangular" else ["X"])
    for site in sites:
        for st in site.steps():
            apply_step(k, st, result=res)
