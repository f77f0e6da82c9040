"""dead_code_elimination: docstring, golden, every precondition, trace, numerics.

The stdlib has no dead code (DCE lists no site on any stdlib kernel). The positive cases
add a dead nest to a stdlib kernel the way the Step-TP generator synthesizes its "before"
programs (a renamed copy of an existing nest whose result nobody reads): that synthesis
happens here in the tests, never in the strategy."""

import pytest

from dataclasses import replace

from leirc.lang import ast as A
from leirc.strategies import NotApplicable, apply_step, enumerate_sites
from leirc.strategies.rewrite import rename_tensor
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of
from test_graph_helpers import STDLIB_NAMES, assert_equivalent, stdlib, step, text

NAME = "dead_code_elimination"


def dce(k, nest):
    return apply_step(k, step(NAME, nest=nest))


def with_dead_copy(kernel: A.Kernel, nest: int, name: str = "Dead") -> A.Kernel:
    """``kernel`` with a renamed copy of ``nest`` (its target renamed to ``name``) inserted after it."""
    item = kernel.body[nest]
    target = next(n for n in A.walk(item) if isinstance(n, A.Assign)).target.name
    dead = rename_tensor(item, target, name)
    return replace(kernel, body=kernel.body[:nest + 1] + (dead,) + kernel.body[nest + 1:])


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_softmax_with_dead_row_sum(update_golden):
    k = with_dead_copy(stdlib("softmax"), 1)
    new = dce(k, 2)
    assert new == stdlib("softmax")
    check_golden(NAME, "softmax_dead_rowsum", new, update_golden)


def test_no_stdlib_kernel_has_dead_code():
    assert not [n for n in STDLIB_NAMES if enumerate_sites(stdlib(n), [NAME])]


def test_dead_chain_is_removed_from_its_end():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i};];"
                  "L^{8}_{i=0}[E^{f32,g}_{i}=D^{f32,g}_{i};];L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i};];}")
    assert [s.fixed["nest"] for s in enumerate_sites(k, [NAME])] == [1]
    assert len(dce(dce(k, 1), 0).body) == 1


def test_overwritten_before_any_read_is_dead():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i};];"
                  "L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}*2.0;];L^{8}_{i=0}[C^{f32,g}_{i}=D^{f32,g}_{i};];}")
    assert_equivalent(k, dce(k, 0), bitwise=True)


# -- negatives ---------------------------------------------------------------------

def test_rejects_unknown_nest():
    with pytest.raises(NotApplicable, match="no nest 1"):
        dce(stdlib("relu"), 1)


def test_rejects_output_writer():
    with pytest.raises(NotApplicable, match="writes the kernel output 'Y'"):
        dce(stdlib("relu"), 0)


def test_rejects_read_result():
    with pytest.raises(NotApplicable, match="nest 1 reads Rmax, written by nest 0"):
        dce(stdlib("softmax"), 0)


def test_rejects_result_read_by_a_later_accumulation():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i};];"
                  "L^{8}_{i=0}[D^{f32,g}_{i}=D^{f32,g}_{i}+1.0;];L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i};];}")
    with pytest.raises(NotApplicable, match="nest 1 reads D"):
        dce(k, 0)


def test_rejects_nest_without_writes():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){L^{4}_{i=0}[D=align(0,4,5);];L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i};];}")
    with pytest.raises(NotApplicable, match="writes nothing"):
        dce(k, 0)


def test_rejects_align_annotation():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){D=align(0,4,5);L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i};];}")
    with pytest.raises(NotApplicable, match="align annotations are not code"):
        dce(k, 0)


# -- traces and numerics ------------------------------------------------------------


def test_trace_roundtrip():
    check_trace_roundtrip(text(with_dead_copy(stdlib("layernorm"), 2)), [step(NAME, nest=3)])


@pytest.mark.parametrize("kernel,nest", [("mse_loss", 0), ("layernorm", 3), ("gemv", 0)])
def test_numerics(kernel, nest):
    k = with_dead_copy(stdlib(kernel), nest)
    new = dce(k, nest + 1)
    assert new == stdlib(kernel)
    assert_equivalent(k, new)


def test_partial_overwrite_keeps_the_nest():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i};];"
                  "L^{4}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}*2.0;];L^{8}_{i=0}[C^{f32,g}_{i}=D^{f32,g}_{i};];}")
    with pytest.raises(NotApplicable, match="nest 2 reads D, written by nest 0"):
        dce(k, 0)
