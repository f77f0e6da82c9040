"""tensor_concat_to_fuse_operators: docstring, golden, every precondition, trace, numerics.

No stdlib kernel has two consecutive nests applying the same operator to different
tensors (they are written as tight single-operator pipelines), so the golden and numeric
cases use small hand-written kernels in the stdlib's style; the all-sites test in
test_graph_sites.py still runs the strategy's site listing on every stdlib kernel."""

import pytest

from leirc.strategies import NotApplicable, apply_step, enumerate_sites
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of
from test_graph_helpers import STDLIB_NAMES, assert_equivalent, stdlib, step

NAME = "tensor_concat_to_fuse_operators"


def concat(k, nest):
    return apply_step(k, step(NAME, nest=nest))


TWO_GELUS = """\\kernel two_gelus(X: f32[64, 96], Z: f32[64, 96]) -> (Y: f32[64, 96], W: f32[64, 96]) {
  L^{64}_{i=0} L^{96}_{j=0} [ Y^{f32,g}_{i,j} = 0.5*X^{f32,g}_{i,j}*(1.0 + erf(X^{f32,g}_{i,j}/sqrt(2.0))); ];
  L^{64}_{a=0} L^{96}_{c=0} [ W^{f32,g}_{a,c} = 0.5*Z^{f32,g}_{a,c}*(1.0 + erf(Z^{f32,g}_{a,c}/sqrt(2.0))); ];
}"""

SHARED_SCALE = """\\kernel scaled_pair(X: f32[32, 64], Z: f32[32, 64], S: f32[64]) -> (Y: f32[32, 64], W: f32[64, 32]) {
  L^{32}_{i=0} L^{64}_{j=0} [ Y^{f32,g}_{i,j} = max(X^{f32,g}_{i,j}*S^{f32,g}_{j}, 0.0); ];
  L^{32}_{i=0} L^{64}_{j=0} [ W^{f32,g}_{j,i} = max(Z^{f32,g}_{i,j}*S^{f32,g}_{j}, 0.0); ];
}"""

TANH_PAIR = """\\kernel tanh_pair(A: f32[16, 128], C: f32[16, 128]) -> (D: f32[16, 128], E: f32[16, 128]) {
  B^{16}_{tx=0} L^{128}_{a=0} [ D^{f32,g}_{tx,a} = (exp(A^{f32,g}_{tx,a}) - exp(-A^{f32,g}_{tx,a}))/(exp(A^{f32,g}_{tx,a}) + exp(-A^{f32,g}_{tx,a})); ];
  B^{16}_{tx=0} L^{128}_{a=0} [ E^{f32,g}_{tx,a} = (exp(C^{f32,g}_{tx,a}) - exp(-C^{f32,g}_{tx,a}))/(exp(C^{f32,g}_{tx,a}) + exp(-C^{f32,g}_{tx,a})); ];
}"""


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_two_gelus(update_golden):
    check_golden(NAME, "two_gelus", concat(kernel_of(TWO_GELUS), 0), update_golden)


def test_golden_shared_operand_and_transposed_output(update_golden):
    # S is read identically by both statements, so it is not concatenated
    check_golden(NAME, "scaled_pair", concat(kernel_of(SHARED_SCALE), 0), update_golden)


def test_no_stdlib_kernel_has_a_site():
    assert not [n for n in STDLIB_NAMES if enumerate_sites(stdlib(n), [NAME])]


# -- negatives ---------------------------------------------------------------------

def pair(s1: str, s2: str, h1="L^{8}_{i=0}", h2="L^{8}_{i=0}", sig="(A:f32[8],B:f32[8])->(C:f32[8],D:f32[8])"):
    return kernel_of(f"\\kernel k{sig}{{{h1}[{s1};];{h2}[{s2};];}}")


def test_rejects_unknown_nest():
    with pytest.raises(NotApplicable, match="no nest 4"):
        concat(kernel_of(TWO_GELUS), 4)


def test_rejects_last_nest():
    with pytest.raises(NotApplicable, match="last nest"):
        concat(kernel_of(TWO_GELUS), 1)


def test_rejects_imperfect_nest():
    k = kernel_of("\\kernel k(A:f32[8],B:f32[8])->(C:f32[8],D:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=exp(A^{f32,g}_{i});"
                  "L^{1}_{j=0}[E^{f32,g}_{i}=exp(B^{f32,g}_{i});];];L^{8}_{i=0}[D^{f32,g}_{i}=exp(E^{f32,g}_{i});];}")
    with pytest.raises(NotApplicable, match="not a perfect loop nest"):
        concat(k, 0)


def test_rejects_several_statements():
    k = kernel_of("\\kernel k(A:f32[8],B:f32[8])->(C:f32[8],D:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=exp(A^{f32,g}_{i});"
                  "D^{f32,g}_{i}=exp(B^{f32,g}_{i});];L^{8}_{i=0}[D^{f32,g}_{i}=exp(B^{f32,g}_{i});];}")
    with pytest.raises(NotApplicable, match="exactly one statement"):
        concat(k, 0)


def test_rejects_different_headers():
    with pytest.raises(NotApplicable, match="loop headers differ"):
        concat(pair("C^{f32,g}_{i}=exp(A^{f32,g}_{i})", "D^{f32,g}_{i}=exp(B^{f32,g}_{i})", h2="P^{8}_{i=0}"), 0)


def test_rejects_reductions():
    k = pair("C^{f32,g}_{0}=C^{f32,g}_{0}+exp(A^{f32,g}_{i})", "D^{f32,g}_{0}=D^{f32,g}_{0}+exp(B^{f32,g}_{i})",
             sig="(A:f32[8],B:f32[8])->(C:f32[1],D:f32[1])")
    with pytest.raises(NotApplicable, match="computed by a reduce"):
        concat(k, 0)


def test_rejects_same_target():
    k = pair("D^{f32,g}_{i}=exp(A^{f32,g}_{i})", "D^{f32,g}_{i}=exp(B^{f32,g}_{i})", sig="(A:f32[8],B:f32[8])->(D:f32[8])")
    with pytest.raises(NotApplicable, match="both nests write 'D'"):
        concat(k, 0)


def test_rejects_different_output_dtypes():
    k = pair("C^{f32,g}_{i}=exp(A^{f32,g}_{i})", "D^{f64,g}_{i}=exp(B^{f32,g}_{i})",
             sig="(A:f32[8],B:f32[8])->(C:f32[8],D:f64[8])")
    with pytest.raises(NotApplicable, match="'C' is f32 but 'D' is f64"):
        concat(k, 0)


def test_rejects_dependent_nests():
    k = pair("E^{f32,g}_{i}=exp(A^{f32,g}_{i})", "D^{f32,g}_{i}=exp(E^{f32,g}_{i})", sig="(A:f32[8])->(D:f32[8])")
    with pytest.raises(NotApplicable, match="depend on each other"):
        concat(k, 0)


def test_rejects_data_dependent_targets():
    k = pair("C^{f32,g}_{I^{i64,g}_{i}}=exp(A^{f32,g}_{i})", "D^{f32,g}_{I^{i64,g}_{i}}=exp(B^{f32,g}_{i})",
             sig="(A:f32[8],B:f32[8],I:i64[8])->(C:f32[8],D:f32[8])")
    with pytest.raises(NotApplicable, match="data-dependent target subscripts"):
        concat(k, 0)


def test_rejects_copies():
    with pytest.raises(NotApplicable, match="are copies"):
        concat(pair("C^{f32,g}_{i}=A^{f32,g}_{i}", "D^{f32,g}_{i}=B^{f32,g}_{i}"), 0)


def test_rejects_different_operators():
    with pytest.raises(NotApplicable, match="do not apply the same operators"):
        concat(pair("C^{f32,g}_{i}=exp(A^{f32,g}_{i})", "D^{f32,g}_{i}=log(B^{f32,g}_{i})"), 0)


def test_rejects_mismatched_operand_dtypes():
    k = pair("C^{f32,g}_{i}=exp(A^{f32,g}_{i})", "D^{f32,g}_{i}=exp(B^{f16,g}_{i})",
             sig="(A:f32[8],B:f16[8])->(C:f32[8],D:f32[8])")
    with pytest.raises(NotApplicable, match="do not apply the same operators"):
        concat(k, 0)


def test_rejects_identical_values():
    with pytest.raises(NotApplicable, match="compute the same values"):
        concat(pair("C^{f32,g}_{i}=exp(A^{f32,g}_{i})", "D^{f32,g}_{i}=exp(A^{f32,g}_{i})"), 0)


def test_rejects_guarded_reads_that_would_be_copied_everywhere():
    k = pair("C^{f32,g}_{i}=if_then_else(1<=i,exp(A^{f32,g}_{i-1}),0.0)",
             "D^{f32,g}_{i}=if_then_else(1<=i,exp(B^{f32,g}_{i-1}),0.0)")
    with pytest.raises(NotApplicable, match="does not check: E030"):
        concat(k, 0)


# -- traces and numerics ------------------------------------------------------------


def test_trace_roundtrip():
    check_trace_roundtrip(TWO_GELUS, [step(NAME, nest=0), step("compute_inline", nest=1)])


@pytest.mark.parametrize("src", [TWO_GELUS, SHARED_SCALE, TANH_PAIR], ids=["two_gelus", "scaled_pair", "tanh_pair"])
def test_numerics(src):
    k = kernel_of(src)
    assert_equivalent(k, concat(k, 0), bitwise=True)
