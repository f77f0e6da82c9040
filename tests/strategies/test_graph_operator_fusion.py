"""operator_fusion: docstring, golden, every precondition, trace, numerics."""

import pytest

from leirc.lang import ast as A
from leirc.strategies import NotApplicable, apply_step
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_graph_helpers import assert_equivalent, run, stdlib, step, text

NAME = "operator_fusion"


def fuse(k, nest, local="false"):
    return apply_step(k, step(NAME, nest=nest, local=local))


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_matmul_gelu_softmax(update_golden):
    # bias add (in-place update of G) fused with the GELU that reads it elementwise
    check_golden(NAME, "matmul_gelu_softmax_nest1", fuse(stdlib("matmul_gelu_softmax"), 1), update_golden)


def test_golden_softmax_after_cse_local(update_golden):
    k = run(stdlib("softmax"), step("common_subexpression_elimination", stmt="N1.S0", expr=1))
    # the hoisted exp(X - Rmax) is read by the Rsum nest (fused) and by the output nest (not), so it stays global
    check_golden(NAME, "softmax_cse_nest1", fuse(k, 1), update_golden)


def test_local_rescopes_only_private_intermediates():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}*2.0;];"
                  "L^{8}_{j=0}[E^{f32,g}_{j}=D^{f32,g}_{j}+1.0;];L^{8}_{j=0}[C^{f32,g}_{j}=E^{f32,g}_{j}+D^{f32,g}_{j};];}")
    # D is read again by nest 2, so fusing nests 0 and 1 has nothing private to re-scope
    with pytest.raises(NotApplicable, match="nothing to re-scope"):
        fuse(k, 0, "true")
    new = fuse(fuse(k, 0), 0, "true")  # all three in one nest: D and E are private now
    scopes = {a.name: a.scope for a in A.walk(new) if isinstance(a, A.Access)}
    assert scopes == {"D": "l", "E": "l", "A": "g", "C": "g"}


def test_independent_nests_fuse():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8],D:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2.0;];"
                  "L^{8}_{j=0}[D^{f32,g}_{j}=A^{f32,g}_{j}+1.0;];}")
    assert len(fuse(k, 0).body) == 1


def test_consumer_reading_an_earlier_iteration_is_fine():
    # C[j] reads D[j-1], written one iteration earlier in the fused loop
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}*2.0;];"
                  "L^{8}_{j=0}[C^{f32,g}_{j}=if_then_else(1<=j,D^{f32,g}_{j-1},0.0);];}")
    assert_equivalent(k, fuse(k, 0), bitwise=True)


# -- negatives: one per precondition ------------------------------------------------

TWO = ("\\kernel k(A:f32[8,4])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i,0};];"
       "L^{8}_{i=0}L^{4}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j}*D^{f32,g}_{i};];}")


def test_rejects_unknown_nest():
    with pytest.raises(NotApplicable, match="no nest 7"):
        fuse(kernel_of(TWO), 7)


def test_rejects_last_nest():
    with pytest.raises(NotApplicable, match="last nest"):
        fuse(kernel_of(TWO), 1)


def test_rejects_different_headers():
    with pytest.raises(NotApplicable, match="loop headers differ"):
        fuse(kernel_of(TWO), 0)


def test_rejects_different_loop_kinds():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){P^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i};];"
                  "L^{8}_{i=0}[C^{f32,g}_{i}=D^{f32,g}_{i};];}")
    with pytest.raises(NotApplicable, match="loop headers differ"):
        fuse(k, 0)


def test_rejects_imperfect_nest():
    k = kernel_of("\\kernel k(A:f32[8,4])->(C:f32[8,4]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i,0};L^{4}_{j=0}"
                  "[C^{f32,g}_{i,j}=D^{f32,g}_{i};];];L^{8}_{i=0}[E^{f32,g}_{i}=D^{f32,g}_{i};];}")
    with pytest.raises(NotApplicable, match="not a perfect loop nest"):
        fuse(k, 0)


def test_rejects_statement_without_loops():
    k = stdlib("mse_loss")
    with pytest.raises(NotApplicable, match="without loops"):
        fuse(k, 1)


def test_rejects_reduction_producer():
    # Rsum would read Rmax before the row maximum is complete
    with pytest.raises(NotApplicable, match="'Rmax' is accessed by both parts"):
        fuse(stdlib("softmax"), 0)


def test_rejects_reading_a_later_iteration():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}*2.0;];"
                  "L^{8}_{j=0}[C^{f32,g}_{j}=D^{f32,g}_{7-j};];}")
    with pytest.raises(NotApplicable, match="'D' is accessed by both parts"):
        fuse(k, 0)


def test_rejects_when_the_fused_nest_races():
    # legal serially (reads the previous iteration), but the parallel loop makes it a race
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){P^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}*2.0;];"
                  "P^{8}_{j=0}[C^{f32,g}_{j}=if_then_else(1<=j,D^{f32,g}_{j-1},0.0);];}")
    with pytest.raises(NotApplicable, match="does not check: E040"):
        fuse(k, 0)


def test_rejects_bad_local_value():
    with pytest.raises(NotApplicable, match="must be one of false, true"):
        fuse(stdlib("matmul_gelu_softmax"), 1, "yes")


# -- traces and numerics ------------------------------------------------------------


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("softmax"), [step("common_subexpression_elimination", stmt="N1.S0", expr=1),
                                                   step(NAME, nest=1, local="false")])


@pytest.mark.parametrize("kernel,prep", [
    ("layernorm", step("expression_splitting", stmt="N4.S0", expr=3)),
    ("gemv", step("expression_splitting", stmt="N0.S0", expr=1)),
    ("mse_loss", step("expression_splitting", stmt="N0.S0", expr=2)),
])
def test_numerics(kernel, prep):
    before = run(stdlib(kernel), prep)
    after = fuse(before, int(prep.kwargs["stmt"][1]), "false")
    assert len(after.body) == len(before.body) - 1
    assert_equivalent(stdlib(kernel), after)


# -- soundness of the dependence test on small stencils --------------------------------

WRITES = {"i": "D^{f32,g}_{i}", "rev": "D^{f32,g}_{7-i}"}
READS = {"same": "D^{f32,g}_{i}", "prev": "if_then_else(1<=i,D^{f32,g}_{i-1},0.0)",
         "next": "if_then_else(i<7,D^{f32,g}_{i+1},0.0)", "rev": "D^{f32,g}_{7-i}"}
#: (write, read) pairs whose fusion keeps the meaning: the read element is final when read
LEGAL = {("i", "same"), ("i", "prev"), ("rev", "rev")}


def stencil(write: str, read: str, fused: bool):
    """D starts as A; then D[w(i)] = A[i]*2 and C[i] = D[r(i)], as two nests or one."""
    w = f"{WRITES[write]}=A^{{f32,g}}_{{i}}*2.0;"
    r = f"C^{{f32,g}}_{{i}}={READS[read]};"
    body = f"L^{{8}}_{{i=0}}[{w}{r}];" if fused else f"L^{{8}}_{{i=0}}[{w}];L^{{8}}_{{i=0}}[{r}];"
    return kernel_of(f"\\kernel k(A:f32[8])->(C:f32[8]){{L^{{8}}_{{i=0}}[D^{{f32,g}}_{{i}}=A^{{f32,g}}_{{i}};];{body}}}")


@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("read", sorted(READS))
def test_fusion_and_fission_are_exact_on_stencils(write, read):
    two, one = stencil(write, read, False), stencil(write, read, True)
    legal = (write, read) in LEGAL
    for strategy, before, args, after in (("operator_fusion", two, {"nest": 1, "local": "false"}, one),
                                          ("operator_fission", one, {"nest": 1, "at": 1}, two)):
        try:
            new = apply_step(before, step(strategy, **args))
        except NotApplicable:
            assert not legal, f"{strategy} rejected the legal pair {(write, read)}"
            continue
        assert legal, f"{strategy} accepted {(write, read)}"
        assert new == after
        assert_equivalent(before, new, bitwise=True)
    if not legal:  # the rejection was necessary: the fused program computes something else
        from leirc.verify import verify

        assert not verify(text(one), text(two), target="interp", seeds=(0,), dists=("normal",)).equal
