"""compute_inline: docstring, golden, every precondition, trace, numerics."""

import pytest

from leirc.lang.printer import print_kernel
from leirc.strategies import NotApplicable, apply_step
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_graph_helpers import assert_equivalent, run, stdlib, step

NAME = "compute_inline"


def inline(k, nest):
    return apply_step(k, step(NAME, nest=nest))


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_layernorm_mean(update_golden):
    check_golden(NAME, "layernorm_nest1", inline(stdlib("layernorm"), 1), update_golden)


def test_golden_maxpool_padding(update_golden):
    # the padded copy is inlined into the pooling: its guard moves along
    check_golden(NAME, "maxpool2d_nest0", inline(stdlib("maxpool2d"), 0), update_golden)


def test_groupnorm_substitutes_a_division_subscript():
    new = inline(stdlib("groupnorm"), 1)
    assert "Mean" not in print_kernel(new)
    assert "Sum^{f32,g}_{n,c//8}/32768.0" in print_kernel(new)


def test_inverse_of_cse():
    cse = run(stdlib("softmax"), step("common_subexpression_elimination", stmt="N1.S0", expr=1))
    assert inline(cse, 1) == stdlib("softmax")


# -- negatives ---------------------------------------------------------------------

def k_(body: str, sig="(A:f32[8])->(C:f32[8])"):
    return kernel_of(f"\\kernel k{sig}{{{body}}}")


def test_rejects_unknown_nest():
    with pytest.raises(NotApplicable, match="no nest 5"):
        inline(stdlib("layernorm"), 5)


def test_rejects_imperfect_nest():
    k = k_("L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i};L^{1}_{j=0}[E^{f32,g}_{i}=D^{f32,g}_{i};];];"
           "L^{8}_{i=0}[C^{f32,g}_{i}=E^{f32,g}_{i};];")
    with pytest.raises(NotApplicable, match="not a perfect loop nest"):
        inline(k, 0)


def test_rejects_several_statements():
    k = k_("L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i};E^{f32,g}_{i}=A^{f32,g}_{i};];"
           "L^{8}_{i=0}[C^{f32,g}_{i}=D^{f32,g}_{i}+E^{f32,g}_{i};];")
    with pytest.raises(NotApplicable, match="has 2 statements"):
        inline(k, 0)


def test_rejects_reduction_producer():
    with pytest.raises(NotApplicable, match="computed by a reduce"):
        inline(stdlib("layernorm"), 0)


def test_rejects_output_producer():
    with pytest.raises(NotApplicable, match="kernel output"):
        inline(stdlib("relu"), 0)


def test_rejects_second_writer():
    k = k_("L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i};];L^{4}_{i=0}[D^{f32,g}_{i}=0.0;];"
           "L^{8}_{i=0}[C^{f32,g}_{i}=D^{f32,g}_{i};];")
    with pytest.raises(NotApplicable, match="written by 2 statements"):
        inline(k, 0)


def test_rejects_non_invertible_subscript():
    k = k_("L^{4}_{i=0}[D^{f32,g}_{i*2}=A^{f32,g}_{i};];L^{4}_{i=0}[C^{f32,g}_{i}=D^{f32,g}_{i*2};];",
           "(A:f32[4])->(C:f32[4])")
    with pytest.raises(NotApplicable, match="not a loop variable plus a constant"):
        inline(k, 0)


def test_rejects_repeated_variable():
    k = k_("L^{8}_{i=0}[D^{f32,g}_{i,i}=A^{f32,g}_{i};];L^{8}_{i=0}[C^{f32,g}_{i}=D^{f32,g}_{i,i};];")
    with pytest.raises(NotApplicable, match="repeats or does not use a loop variable"):
        inline(k, 0)


def test_rejects_overwritten_elements():
    k = k_("L^{8}_{i=0}L^{4}_{j=0}[D^{f32,g}_{i}=A^{f32,g}_{i,j};];L^{8}_{i=0}[C^{f32,g}_{i}=D^{f32,g}_{i};];",
           "(A:f32[8,4])->(C:f32[8])")
    with pytest.raises(NotApplicable, match=r"loop\(s\) j do not appear"):
        inline(k, 0)


def test_rejects_rounding_producer():
    k = k_("L^{8}_{i=0}[D^{f64,g}_{i}=A^{f32,g}_{i}*2.0;];L^{8}_{i=0}[C^{f32,g}_{i}=f32(D^{f64,g}_{i});];")
    with pytest.raises(NotApplicable, match="value has type f32 but 'D' is f64"):
        inline(k, 0)


def test_rejects_reader_of_another_dtype():
    k = k_("L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}*0.1;];L^{8}_{i=0}[C^{f64,g}_{i}=D^{f32,g}_{i}*0.1;];",
           "(A:f32[8])->(C:f64[8])")
    with pytest.raises(NotApplicable, match="stores f64 but reads the f32 'D'"):
        inline(k, 0)


def test_rejects_reads_outside_the_written_box():
    # D[0] is never written by the producer
    k = k_("L^{7}_{i=0}[D^{f32,g}_{i+1}=A^{f32,g}_{i};];L^{8}_{i=0}[C^{f32,g}_{i}=D^{f32,g}_{i};];")
    with pytest.raises(NotApplicable, match=r"outside the producer's \[1, 7\]"):
        inline(k, 0)


def test_rejects_unread_intermediate():
    k = k_("L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i};];L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i};];")
    with pytest.raises(NotApplicable, match="never read"):
        inline(k, 0)


def test_rejects_source_overwritten_before_the_reader():
    k = k_("L^{8}_{i=0}[S^{f32,g}_{i}=A^{f32,g}_{i};];L^{8}_{i=0}[D^{f32,g}_{i}=S^{f32,g}_{i}*2.0;];"
           "L^{8}_{i=0}[S^{f32,g}_{i}=0.0;];L^{8}_{i=0}[C^{f32,g}_{i}=D^{f32,g}_{i}+S^{f32,g}_{i};];")
    with pytest.raises(NotApplicable, match="nest 2 writes S, which the producer reads"):
        inline(k, 1)


# -- traces and numerics ------------------------------------------------------------


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("layernorm"), [step(NAME, nest=1), step(NAME, nest=2)])


@pytest.mark.parametrize("kernel,prep,nest", [
    ("layernorm", None, 1),
    ("layernorm", None, 3),
    ("gemv", step("expression_splitting", stmt="N0.S0", expr=1), 0),
    ("mse_loss", step("expression_splitting", stmt="N0.S0", expr=2), 0),
])
def test_numerics(kernel, prep, nest):
    k = stdlib(kernel) if prep is None else run(stdlib(kernel), prep)
    assert_equivalent(stdlib(kernel), inline(k, nest))
