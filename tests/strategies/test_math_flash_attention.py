"""flashattention_wo_tiling and normal_matmul_to_prefix_matmul_based_on_online_softmax."""

import pytest

from leirc.lang.checker import check_kernel
from leirc.lang.printer import print_kernel
from leirc.strategies import NotApplicable, Step, apply_step
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, stdlib_text
from test_math_helpers import apply, assert_verified, kernel, not_applicable, run, stdlib

FA = "flashattention_wo_tiling"
PM = "normal_matmul_to_prefix_matmul_based_on_online_softmax"
TWO_STEPS = [Step.make("online_softmax", stmt="N2.S0"), Step.make(PM, stmt="N5.S0")]


def test_docstring_examples():
    check_docstring_example(FA)
    check_docstring_example(PM)


def test_flash_attention_sdpa(update_golden):
    k = stdlib("sdpa")
    new = apply(k, FA, stmt="N2.S0")
    check_golden(FA, "sdpa", new, update_golden)
    assert len(new.body) == 1  # one nest over (n, h, i)
    assert "P^{" not in print_kernel(new)
    assert_verified(k, new, seeds=(0,), dists=("normal", "signed"))


def test_two_step_trajectory_sdpa(update_golden):
    k = stdlib("sdpa")
    new = run(k, *TWO_STEPS)
    check_golden(PM, "sdpa_after_online_softmax", new, update_golden)
    assert "P^{" not in print_kernel(new)
    assert_verified(k, new, seeds=(0,), dists=("normal",))


def test_invariant_symbolic():
    """O = sum_k exp(x_k - M)*w_k is preserved: O*exp(M - m2) + exp(x - m2)*w."""
    import sympy as sp

    U, m1, m2, x, w = sp.symbols("U m1 m2 x w", real=True)
    O = U * sp.exp(-m1)
    assert sp.simplify(O * sp.exp(m1 - m2) + sp.exp(x - m2) * w - (U + sp.exp(x) * w) * sp.exp(-m2)) == 0


def test_carried_loops():
    new = apply(stdlib("sdpa"), FA, stmt="N2.S0")
    res = check_kernel(new)
    carried = {(si.stmt.target.name, si.carried) for si in res.stmts if si.kind == "update"}
    assert ("Rsum", frozenset({"j"})) in carried and ("O", frozenset({"j"})) in carried
    with pytest.raises(NotApplicable, match="carries a dependence"):
        apply_step(new, Step.make("loop_parallelization", loop="N0.j"))
    apply_step(new, Step.make("loop_parallelization", loop="N0.i"))


def test_negatives():
    sdpa = stdlib_text("sdpa")
    not_applicable(stdlib("softmax"), FA, "'Y' is a kernel output", stmt="N0.S0")
    not_applicable(stdlib("sdpa"), FA, "not a max reduction", stmt="N3.S0")
    # P read elsewhere: it cannot be eliminated
    extra = kernel(sdpa.replace("-> (O: f32[2, 4, 128, 256])", "-> (O: f32[2, 4, 128, 256], Z: f32[2, 4, 128])")
                   .replace("  L^{2}_{n=0} L^{4}_{h=0} L^{128}_{i=0} L^{256}_{d=0} L^{128}_{j=0} [",
                            "  L^{2}_{n=0} L^{4}_{h=0} L^{128}_{i=0} [ Z^{f32,g}_{n,h,i} = P^{f32,g}_{n,h,i,0}; ];\n"
                            "  L^{2}_{n=0} L^{4}_{h=0} L^{128}_{i=0} L^{256}_{d=0} L^{128}_{j=0} ["))
    not_applicable(extra, FA, "also read by", stmt="N2.S0")
    # the product needs the online-softmax stream first
    not_applicable(stdlib("sdpa"), PM, "no online-softmax streaming nest", stmt="N5.S0")
    not_applicable(run(stdlib("sdpa"), TWO_STEPS[0]), PM, "no normalized softmax", stmt="N0.S0")


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("sdpa"), TWO_STEPS)
    check_trace_roundtrip(stdlib_text("sdpa"), [Step.make(FA, stmt="N2.S0")])
