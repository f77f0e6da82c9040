"""Regression tests for the verifier's blind spots (issue 9, item 3, and its crashes).

Each test pins a bug of the earlier verifier: defaults that never drew large or special
values, inputs outside the program's domain, a flat tolerance that rejected correct long
f32 reductions, a vacuous EQUAL for a file without a kernel, tracebacks on bad arguments.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest

from leirc.cli.main import main
from leirc.interp import Interpreter, check_source
from leirc.interp.inputs import Domain, infer_domains, inject_special, random_inputs
from leirc.verify import RunResult, compare_output, verify
from leirc.verify.bound import ErrorBound, Unsupported, bound_program


def K(body: str, sig: str, name: str = "k") -> str:
    return f"\\kernel {name}({sig}) {{\n{body}\n}}\n"


SOFTMAX = K("L^{4}_{i=0} L^{64}_{j=0} [ M^{f32,g}_{i} = max(M^{f32,g}_{i}, X^{f32,g}_{i,j}); ];\n"
            "L^{4}_{i=0} L^{64}_{j=0} [ S^{f32,g}_{i} = S^{f32,g}_{i} + exp(X^{f32,g}_{i,j} - M^{f32,g}_{i}); ];\n"
            "L^{4}_{i=0} L^{64}_{j=0} [ Y^{f32,g}_{i,j} = exp(X^{f32,g}_{i,j} - M^{f32,g}_{i}) / S^{f32,g}_{i}; ];",
            "X: f32[4, 64]) -> (Y: f32[4, 64]", "softmax")
# expand_powsimp applied to it: exp(x - m) -> exp(x)*exp(-m), exact in the reals, overflows in f32
SOFTMAX_POWSIMP = SOFTMAX.replace("exp(X^{f32,g}_{i,j} - M^{f32,g}_{i})",
                                  "exp(X^{f32,g}_{i,j})*exp(-M^{f32,g}_{i})")

RELU = K("L^{8}_{i=0} L^{16}_{j=0} [ Y^{f32,g}_{i,j} = max(X^{f32,g}_{i,j}, 0.0); ];",
         "X: f32[8, 16]) -> (Y: f32[8, 16]", "relu")
# the same for every finite x, NaN for x = -inf
RELU_ARITH = RELU.replace("max(X^{f32,g}_{i,j}, 0.0)", "(X^{f32,g}_{i,j} + abs(X^{f32,g}_{i,j}))*0.5")


def literal_runner(source, inputs, outputs, *, kernel=None, target="interp", timeout=120.0):
    """Runs the candidate loop by loop in f32, as a serial compiled kernel sums."""
    it = Interpreter(check_source(source, kernel), vectorize=False)
    return RunResult(True, it.run(inputs, outputs=outputs), inputs)


# ---------------------------------------------------------------------------
# 4. no kernel, bad arguments


@pytest.mark.parametrize("text", ["", "% only a comment\n"])
def test_file_without_kernel_is_not_equal(text, tmp_path, capsys):
    rep = verify(text, target="interp")
    assert not rep.equal and rep.runs == 0
    assert any("no kernel to verify" in f for f in rep.failures), rep.failures
    f = tmp_path / "empty.leir"
    f.write_text(text)
    assert main(["verify", str(f), "-t", "interp"]) == 2
    assert f"leirc: error: {f}: no kernel to verify" in capsys.readouterr().err


@pytest.mark.parametrize("argv, msg", [
    (["--seeds", "-1"], "seeds are non-negative integers"),
    (["--seeds", "1.5"], "bad seed list"),
    (["--timeout", "0"], "--timeout must be a finite positive number"),
    (["--timeout", "nan"], "--timeout must be"),
    (["--rtol", "-1"], "--rtol must be a finite non-negative number"),
    (["--norm-tol", "inf"], "--norm-tol must be"),
    (["--probes", "cauchy"], "unknown distribution"),
    (["--domain", "X"], "bad --domain"),
    (["--domain", "X=2,1"], "need LO < HI"),
    (["--oracle", "fast"], "invalid choice"),
])
def test_bad_arguments_are_usage_errors(argv, msg, tmp_path, capsys):
    f = tmp_path / "relu.leir"
    f.write_text(RELU)
    with pytest.raises(SystemExit) if argv[0] == "--oracle" else contextlib.nullcontext():
        assert main(["verify", str(f), "-t", "interp"] + argv) == 2
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err


def test_bad_api_arguments_are_failures_not_tracebacks():
    for kw, msg in [({"seeds": (-1,)}, "non-negative"), ({"seeds": (1.5,)}, "integers"),
                    ({"dists": ("cauchy",)}, "unknown distribution"), ({"oracle": "x"}, "unknown oracle"),
                    ({"timeout": 0}, "timeout"), ({"rtol": float("nan")}, "rtol"),
                    ({"domains": {"Q": (0, 1)}}, "not a float input"), ({"domains": {"X": (1, 0)}}, "empty domain")]:
        rep = verify(RELU, target="interp", **kw)
        assert not rep.equal and any(msg in f for f in rep.failures), (kw, rep.failures)


def test_unknown_domain_name_in_cli(tmp_path, capsys):
    f = tmp_path / "relu.leir"
    f.write_text(RELU)
    assert main(["verify", str(f), "-t", "interp", "--domain", "Q=0,1"]) == 1
    assert "not a float input" in capsys.readouterr().out


# ---------------------------------------------------------------------------
# 1. probe distributions


def test_powsimp_softmax_overflow_is_caught_by_the_logits_probe():
    old_defaults = verify(SOFTMAX_POWSIMP, SOFTMAX, target="interp", dists=("uniform", "normal", "signed"))
    assert old_defaults.equal  # the grid alone never reaches exp overflow
    rep = verify(SOFTMAX_POWSIMP, SOFTMAX, target="interp")
    assert not rep.equal
    assert rep.runs == 9 and rep.probes == ["logits", "mixed", "special", "range"]
    assert any("logits" in f and "NaN/Inf" in f for f in rep.failures), rep.failures
    assert verify(SOFTMAX, target="interp").equal  # the written form survives every probe


def test_minus_inf_special_value_is_injected_where_the_reference_stays_finite():
    assert verify(RELU_ARITH, RELU, target="interp", dists=("uniform", "normal", "signed")).equal
    rep = verify(RELU_ARITH, RELU, target="interp")
    assert not rep.equal
    assert any("special (X=-inf, X=inf, X=nan)" in f for f in rep.failures), rep.failures
    # matmul: no special value keeps the reference finite, so none is injected
    mm = K("L^{4}_{i=0} L^{3}_{j=0} L^{5}_{k=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j}; ];",
           "A: f32[4, 5], B: f32[5, 3]) -> (C: f32[4, 3]", "mm")
    rep = verify(mm, target="interp")
    assert rep.equal and rep.probe_runs == 4, rep.failures


def test_nan_dropped_by_a_select_is_caught_where_the_reference_propagates_it():
    # max(NaN, 0) is NaN (docs/language.md); a select on NaN > 0 gives 0 -- as a compiled max
    # that drops NaN does
    select = RELU.replace("max(X^{f32,g}_{i,j}, 0.0)", "if_then_else(X^{f32,g}_{i,j} > 0.0, X^{f32,g}_{i,j}, 0.0)")
    assert verify(select, RELU, target="interp", dists=("uniform", "normal", "signed")).equal
    rep = verify(select, RELU, target="interp")
    assert not rep.equal and rep.special_values == ["X=-inf", "X=inf", "X=nan"]
    assert any("non-finite reference elements not reproduced" in f and "nan vs nan" not in f
               for f in rep.failures), rep.failures


def test_probe_distributions_are_deterministic_and_have_their_shape():
    k = check_source(SOFTMAX).kernel
    a = random_inputs(k, 3, "logits")["X"]
    assert np.array_equal(a, random_inputs(k, 3, "logits")["X"])
    assert a.max() > 88.8 and a.min() < -88.8  # beyond exp's f32 range on both sides
    m = np.abs(random_inputs(k, 0, "mixed")["X"])
    assert m.max() / m.min() > 1e4
    z = random_inputs(k, 0, "zeros")["X"]
    assert (z[0] == 0).all() and (z == 0).mean() > 0.25 and np.signbit(z[z == 0]).any()
    s = inject_special(random_inputs(k, 0, "special"), "X", -math.inf, 0)["X"]
    assert np.isneginf(s).any() and np.isfinite(s).mean() > 0.8


def test_probes_count_as_runs_and_match_nonfinite_reference_exactly():
    y = np.array([1.0, np.inf, -np.inf, np.nan], np.float32)
    assert compare_output("Y", y.copy(), y, "f32", nonfinite="match").ok
    assert not compare_output("Y", y.copy(), y, "f32").ok  # grid runs: a non-finite reference fails
    for wrong in ([1.0, -np.inf, -np.inf, np.nan], [1.0, np.inf, np.nan, np.nan], [1.0, np.inf, -np.inf, 0.0]):
        c = compare_output("Y", np.array(wrong, np.float32), y, "f32", nonfinite="match")
        assert not c.ok and "not reproduced" in c.failures[0]


# ---------------------------------------------------------------------------
# 2. domains


LOGS = K("L^{6}_{i=0} [ Y^{f32,g}_{i} = log(X^{f32,g}_{i}) + sqrt(Q^{f32,g}_{i} + 1.0) + rsqrt(R^{f32,g}_{i}) "
         "+ A^{f32,g}_{i} / D^{f32,g}_{i} + pow(P^{f32,g}_{i}, 0.5) + A^{f32,g}_{i}; ];",
         "X: f32[6], Q: f32[6], R: f32[6], A: f32[6], D: f32[6], P: f32[6]) -> (Y: f32[6]", "logs")


def test_domains_are_inferred_from_uses():
    doms = infer_domains(check_source(LOGS).kernel)
    assert set(doms) == {"X", "Q", "R", "D", "P"}
    for n in ("X", "Q", "R", "P"):
        assert doms[n].lo == 0 and doms[n].hi == math.inf
    assert doms["D"].nonzero and doms["D"].lo == -math.inf
    assert "A" not in doms


@pytest.mark.parametrize("dist", ["uniform", "normal", "signed", "large", "small", "logits", "mixed", "zeros",
                                  "special"])
def test_inputs_are_drawn_inside_their_domains(dist):
    k = check_source(LOGS).kernel
    ins = random_inputs(k, 0, dist)
    for n in ("X", "Q", "R", "P"):
        assert (ins[n] > 0).all(), (n, ins[n])
    assert (ins["D"] != 0).all()
    given = random_inputs(k, 0, dist, {"A": (2.0, 3.0)})["A"]
    assert (given > 2.0).all() and (given < 3.0).all()


def test_kernel_with_log_of_an_input_verifies_with_signed_inputs():
    rep = verify(LOGS, target="interp")
    assert rep.equal, rep.failures
    assert rep.domains["X"].startswith("(0, inf)")


def test_domain_contains():
    assert Domain(-math.inf, math.inf).contains(-math.inf) and Domain().contains(math.nan)
    assert not Domain(0.0, math.inf).contains(-math.inf) and not Domain(nonzero=True).contains(0.0)


# ---------------------------------------------------------------------------
# 3. poisoned intermediates


def _uninit_supported() -> bool:
    import inspect

    return "check_uninit" in inspect.signature(Interpreter.run).parameters


@pytest.mark.skipif(not _uninit_supported(), reason="Interpreter.run(check_uninit=) not available yet")
def test_output_from_never_written_intermediate_elements_is_not_equal():
    # T is written at even positions only; comparisons of the NaN poison are false, so the output
    # looks like ordinary zeros without the check
    src = K("L^{4}_{i=0} [ T^{f32,g}_{2*i} = X^{f32,g}_{i}; ];\n"
            "L^{7}_{i=0} [ Y^{f32,g}_{i} = if_then_else(T^{f32,g}_{i} > 0.0, 1.0, 0.0); ];",
            "X: f32[7]) -> (Y: f32[7]", "u")
    rep = verify(src, target="interp", seeds=(0,), dists=("uniform",))
    assert not rep.equal
    assert any("uninitialized read" in f for f in rep.failures), rep.failures


# ---------------------------------------------------------------------------
# 5. a tolerance that follows the arithmetic


def gemm_norm(order: str, k: int = 2048) -> str:
    """GEMM [4,k]x[k,16] then a normalization of each row of 16 (GroupNorm of GEMM outputs):
    the mean is ~500 times the spread, so the GEMM's rounding error is amplified."""
    prod = "X^{f32,g}_{i,k}*W^{f32,g}_{k,j}"
    ext = k
    if order == "reversed":
        prod = f"X^{{f32,g}}_{{i,{k - 1}-k}}*W^{{f32,g}}_{{{k - 1}-k,j}}"
    elif order == "missing_term":
        ext = k - 1
    elif order == "shifted":
        prod = "X^{f32,g}_{i,k}*W^{f32,g}_{k,15-j}"
    c = "(G^{f32,g}_{i,j} - M^{f32,g}_{i}*0.0625)"
    return K(f"L^{{4}}_{{i=0}} L^{{16}}_{{j=0}} L^{{{ext}}}_{{k=0}} [ G^{{f32,g}}_{{i,j}} = G^{{f32,g}}_{{i,j}} + {prod}; ];\n"
             "L^{4}_{i=0} L^{16}_{j=0} [ M^{f32,g}_{i} = M^{f32,g}_{i} + G^{f32,g}_{i,j}; ];\n"
             f"L^{{4}}_{{i=0}} L^{{16}}_{{j=0}} [ V^{{f32,g}}_{{i}} = V^{{f32,g}}_{{i}} + {c}*{c}; ];\n"
             f"L^{{4}}_{{i=0}} L^{{16}}_{{j=0}} [ Y^{{f32,g}}_{{i,j}} = {c}*rsqrt(V^{{f32,g}}_{{i}}*0.0625 + 0.00001); ];",
             f"X: f32[4, {k}], W: f32[{k}, 16]) -> (Y: f32[4, 16]", "gn")


def test_correct_long_f32_reduction_in_another_order_is_accepted():
    ref = gemm_norm("written")
    rep = verify(gemm_norm("reversed"), ref, runner=literal_runner, seeds=(0,), dists=("uniform",))
    assert rep.equal, rep.failures
    assert rep.tolerance == "arithmetic"
    assert rep.norm_rel_err > 1e-5  # what the flat rule rejected
    flat = verify(gemm_norm("reversed"), ref, runner=literal_runner, seeds=(0,), dists=("uniform",), norm_tol=1e-5)
    assert not flat.equal and any("normwise" in f for f in flat.failures)


@pytest.mark.parametrize("bug", ["missing_term", "shifted"])
def test_wrong_long_reduction_is_still_rejected(bug):
    rep = verify(gemm_norm(bug), gemm_norm("written"), runner=literal_runner, seeds=(0,), dists=("uniform",))
    assert not rep.equal
    assert any("the arithmetic error bound" in f for f in rep.failures), rep.failures


def test_bound_is_tight_for_exact_and_short_programs():
    # a copy rounds nothing: its bound is exactly 0, so any change is a mismatch
    cp = K("L^{8}_{i=0} [ Y^{f32,g}_{i} = X^{f32,g}_{i}; ];", "X: f32[8]) -> (Y: f32[8]", "cp")
    r = check_source(cp)
    e = ErrorBound(r).run({"X": np.arange(8, dtype=np.float32)})["Y"]
    assert e.shape == (8,) and not e.any()
    x = np.linspace(1, 2, 8, dtype=np.float32)
    y = x.copy()
    y[3] = np.nextafter(y[3], np.float32(3))
    c = compare_output("Y", y, x, "f32", bound=e)
    assert c.ok  # one ulp is within rtol
    y[3] = x[3] * np.float32(1.001)
    c = compare_output("Y", y, x, "f32", bound=e)
    assert not c.ok and "mismatch at (3)" in c.failures[0]


def test_bound_of_a_dot_product_grows_like_sqrt_n():
    def dot(n):
        return K(f"L^{{{n}}}_{{k=0}} [ S^{{f32,g}} = S^{{f32,g}} + A^{{f32,g}}_{{k}}*B^{{f32,g}}_{{k}}; ];",
                 f"A: f32[{n}], B: f32[{n}]) -> (S: f32", "dot")
    es = []
    for n in (64, 4096):
        r = check_source(dot(n))
        ones = np.ones(n, np.float32)
        es.append(float(ErrorBound(r).run({"A": ones, "B": ones})["S"]))
    # per term: u for the product's rounding, sqrt(n) u for the accumulation
    u = 2.0**-24
    assert es[0] == pytest.approx(64 * (8 * u + u), rel=1e-9)
    assert es[1] / es[0] == pytest.approx(4096 * 65 / (64 * 9), rel=1e-9)


def test_unsupported_programs_fall_back_to_the_flat_rule():
    prod = K("L^{4}_{i=0} L^{8}_{k=0} [ P^{f32,g}_{i} = P^{f32,g}_{i} * X^{f32,g}_{i,k}; ];",
             "X: f32[4, 8]) -> (P: f32[4]", "prod")
    with pytest.raises(Unsupported):
        bound_program(check_source(prod))
    correct = Interpreter(check_source(prod))

    def off(source, inputs, outputs, **kw):
        return RunResult(True, {"P": (correct.run(inputs)["P"] * np.float32(1 + 2e-6)).astype(np.float32)}, inputs)

    rep = verify(prod, runner=off, seeds=(0,), dists=("uniform",))
    assert rep.equal and rep.tolerance.startswith("flat (no arithmetic bound"), (rep.failures, rep.tolerance)


# ---------------------------------------------------------------------------
# 6. the literal oracle


def test_literal_oracle(tmp_path, capsys):
    rep = verify(SOFTMAX, target="interp", oracle="literal", seeds=(0,), dists=("normal",))
    assert rep.equal and rep.oracle == "literal", rep.failures
    assert not rep.bitwise  # the literal oracle sums in f32, the interpreted candidate in f64
    f = tmp_path / "s.leir"
    f.write_text(SOFTMAX)
    assert main(["verify", str(f), "-t", "interp", "--oracle", "literal", "--seeds", "0", "--dists", "normal"]) == 0
    assert "oracle literal" in capsys.readouterr().out


def test_bound_stays_finite_with_minus_inf_inputs():
    # exp(-inf - m) = 0 must remove the infinite magnitude of its argument from the bound,
    # or a whole row's bound would be NaN and the rule would fall back to the flat one
    r = check_source(SOFTMAX)
    ins = inject_special(random_inputs(r.kernel, 0, "special"), "X", -math.inf, 0)
    assert np.isneginf(ins["X"]).any()
    e = ErrorBound(r).run(ins)["Y"]
    assert np.isfinite(e).all() and e.max() < 1e-5


def test_underflowing_results_get_an_absolute_floor():
    ref = np.array([1e-44, 0.5], np.float32)  # a subnormal and a normal value
    flushed = np.array([0.0, 0.5], np.float32)  # flush-to-zero
    assert compare_output("Y", flushed, ref, "f32", bound=np.zeros(2)).ok
    assert not compare_output("Y", np.array([1e-30, 0.5], np.float32), ref, "f32", bound=np.zeros(2)).ok


def test_mixed_probe_accepts_the_absorption_error_of_a_serial_sum():
    # a serial f32 sum of (x+3)^2 over values spanning six decades: most terms are ~9, just
    # below half an ulp of the ~1e9 partial sums, and are rounded away one way (absorption):
    # about 10x the probabilistic sqrt(n)*u bound, within the worst case n*u. (GroupNorm's
    # variance under the mixed probe, compiled for LLVM, showed exactly this.)
    src = K("L^{32768}_{k=0} [ S^{f32,g} = S^{f32,g} + (X^{f32,g}_{k} + 3.0)*(X^{f32,g}_{k} + 3.0); ];",
            "X: f32[32768]) -> (S: f32", "sq")
    r = check_source(src)
    ins = random_inputs(r.kernel, 0, "mixed")
    serial = literal_runner(src, ins, {"S": np.full((), np.nan, np.float32)}).outputs["S"]
    ref = Interpreter(r).run(ins)["S"]
    assert abs(float(serial) / float(ref) - 1) > 8 * np.sqrt(32768) * 2.0**-24
    assert not compare_output("S", serial, ref, "f32", bound=ErrorBound(r).run(ins)["S"]).ok
    assert compare_output("S", serial, ref, "f32", bound=ErrorBound(r, worst_case=True).run(ins)["S"]).ok
    rep = verify(src, runner=literal_runner, seeds=(0,), dists=("uniform",), probes=("mixed",))
    assert rep.equal and rep.probe_runs == 1, rep.failures


def test_error_bound_models_left_deep_chain_reductions():
    # S = S + a - b is a reduction whose operand the checker leaves as None (a chain); the
    # companion program used to contain a None there, so such kernels silently fell back to
    # the flat tolerance ("cannot type expression") and failed on the logits probe
    from leirc.interp import check_source
    from leirc.verify.bound import ErrorBound

    src = r"""\kernel chain(X: f32[4, 8], M: f32[4]) -> (S: f32[4]) {
      L^{4}_{i=0} L^{8}_{j=0} [ S^{f32,g}_{i} = S^{f32,g}_{i} + X^{f32,g}_{i,j}*M^{f32,g}_{i} - X^{f32,g}_{i,j}; ];
    }"""
    ErrorBound(check_source(src), False)
    rep = verify(src, target="interp", seeds=(0,), dists=("normal",), probes=("logits",))
    assert rep.equal and rep.tolerance == "arithmetic", (rep.tolerance, rep.failures)
