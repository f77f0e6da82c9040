"""Verifier logic, with adversarial candidates.

The candidate side is injected through ``runner=`` (the signature of
``leirc.lower.runner.run_kernel``): either an interpreter run of a deliberately wrong
program, or a Python callable that returns crafted arrays (zeros, stale results, partial
writes, NaN, mutated inputs, crashes). The real compiled path is exercised at the end
(skipped when TVM is unavailable).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from leirc.interp import Interpreter, check_source
from leirc.interp import dtypes as D
from leirc.verify import RunResult, VerifyReport, compare_output, interp_runner, verify


def K(body: str, sig: str, name: str = "k") -> str:
    return f"\\kernel {name}({sig}) {{\n{body}\n}}\n"


MATMUL = K("L^{8}_{i=0} L^{6}_{j=0} L^{16}_{k=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j}; ];",
           "A: f32[8, 16], B: f32[16, 6]) -> (C: f32[8, 6]", "mm")
MATMUL_TB = K("L^{8}_{i=0} L^{6}_{j=0} L^{16}_{k=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,5-j}; ];",
              "A: f32[8, 16], B: f32[16, 6]) -> (C: f32[8, 6]", "mm")
# a long softmax row: outputs ~1/4096, all-zero output is within 1e-4 absolute of it
SOFTMAX = K("L^{4}_{i=0} L^{4096}_{j=0} [ M^{f32,g}_{i} = max(M^{f32,g}_{i}, X^{f32,g}_{i,j}); ];\n"
            "L^{4}_{i=0} L^{4096}_{j=0} [ S^{f32,g}_{i} = S^{f32,g}_{i} + exp(X^{f32,g}_{i,j} - M^{f32,g}_{i}); ];\n"
            "L^{4}_{i=0} L^{4096}_{j=0} [ Y^{f32,g}_{i,j} = exp(X^{f32,g}_{i,j} - M^{f32,g}_{i}) / S^{f32,g}_{i}; ];",
            "X: f32[4, 4096]) -> (Y: f32[4, 4096]", "softmax")
ARGMAX = K("L^{4}_{t=0} L^{7}_{a=0} L^{5}_{c=0} [ D^{f32,g}_{t,c} = max(D^{f32,g}_{t,c}, A^{f32,g}_{t,a,c}); C^{i64,g}_{t,c} = 0; ];\n"
           "L^{4}_{t=0} L^{7}_{a=0} L^{5}_{c=0} [ C^{i64,g}_{t,c} = if_then_else(A^{f32,g}_{t,a,c} >= D^{f32,g}_{t,c}, a, C^{i64,g}_{t,c}); ];",
           "A: f32[4, 7, 5]) -> (C: i64[4, 5]", "argmax")
POSITIVE = K("L^{6}_{i=0} [ Y^{bool,g}_{i} = X^{f32,g}_{i} > 0.0; ];", "X: f32[6]) -> (Y: bool[6]", "pos")


def reference_runner(source: str):
    """A runner computing the *correct* outputs of ``source`` with the interpreter, which
    the adversarial runners below then corrupt."""
    r = check_source(source)
    interp = Interpreter(r)

    def correct(inputs):
        return interp.run(inputs)

    return correct


def runner_from(fn):
    """A runner (run_kernel signature) from fn(inputs, init_outputs, call_index) -> RunResult."""
    calls = []

    def runner(source, inputs, outputs, *, kernel=None, target="llvm", timeout=120.0):
        calls.append(1)
        return fn(inputs, outputs, len(calls) - 1)

    runner.calls = calls
    return runner


def test_interp_vs_interp_is_equal_and_bitwise():
    rep = verify(MATMUL, target="interp")
    assert rep.equal and rep.bitwise, rep.failures
    assert rep.seeds == [0, 1, 2] and rep.dists == ["uniform", "normal", "signed"]
    assert rep.runs == 9
    assert rep.max_abs_err == 0.0 and rep.norm_rel_err == 0.0
    d = rep.to_json()
    assert {"equal", "bitwise", "max_abs_err", "max_rel_err", "norm_rel_err", "seeds", "dists", "failures",
            "per_output"} <= set(d)
    json.dumps(d)


def test_correct_runner_equal():
    correct = reference_runner(MATMUL)
    rep = verify(MATMUL, runner=runner_from(lambda ins, init, k: RunResult(True, correct(ins), ins)))
    assert rep.equal, rep.failures


def test_wrong_program_is_rejected():
    rep = verify(MATMUL_TB, MATMUL, target="interp")
    assert not rep.equal and not rep.bitwise
    assert any("output C: mismatch at" in f for f in rep.failures)
    assert rep.per_output["C"]["ok"] is False


def test_equivalent_program_with_other_accumulation_order_is_equal_not_bitwise():
    # the same matmul with the reduction split in two halves: exact in the reals
    split = K("L^{8}_{i=0} L^{6}_{j=0} L^{8}_{k=0} [ P^{f32,g}_{i,j} = P^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j}; ];\n"
              "L^{8}_{i=0} L^{6}_{j=0} L^{8}_{k=0} [ Q^{f32,g}_{i,j} = Q^{f32,g}_{i,j} + A^{f32,g}_{i,k+8}*B^{f32,g}_{k+8,j}; ];\n"
              "L^{8}_{i=0} L^{6}_{j=0} [ C^{f32,g}_{i,j} = P^{f32,g}_{i,j} + Q^{f32,g}_{i,j}; ];",
              "A: f32[8, 16], B: f32[16, 6]) -> (C: f32[8, 6]", "mm")
    rep = verify(split, MATMUL, target="interp")
    assert rep.equal, rep.failures
    assert 0 < rep.norm_rel_err < 1e-6


def test_all_zero_output_for_tiny_reference_is_rejected():
    zeros = runner_from(lambda ins, init, k: RunResult(True, {"Y": np.zeros((4, 4096), np.float32)}, ins))
    rep = verify(SOFTMAX, runner=zeros, seeds=(0,), dists=("uniform",))
    assert not rep.equal
    assert any("normwise relative error 1 > 1e-05" in f for f in rep.failures), rep.failures
    # plain allclose with an absolute floor would have accepted it
    ref = Interpreter(check_source(SOFTMAX)).run({"X": np.random.default_rng(0).random((4, 4096), dtype=np.float32)})["Y"]
    assert np.allclose(np.zeros_like(ref), ref, atol=1e-3, rtol=1e-3)
    assert not compare_output("Y", np.zeros_like(ref), ref, "f32").ok


def test_input_mutation_is_rejected():
    correct = reference_runner(MATMUL)

    def mutate_in_place(ins, init, k):
        outs = correct(ins)
        ins["A"][0, 0] += 1.0  # the candidate scribbles on its input buffer
        return RunResult(True, outs, None)

    rep = verify(MATMUL, runner=runner_from(mutate_in_place), seeds=(0,), dists=("uniform",))
    assert not rep.equal
    assert any("inputs mutated" in f and "A" in f for f in rep.failures), rep.failures

    def mutated_after(ins, init, k):  # a sandboxed runner reports the inputs after the run
        after = {n: v.copy() for n, v in ins.items()}
        after["B"][...] = 0
        return RunResult(True, correct(ins), after)

    rep = verify(MATMUL, runner=runner_from(mutated_after), seeds=(0,), dists=("uniform",))
    assert any("inputs mutated" in f and "B" in f for f in rep.failures)


def test_output_computed_through_input_buffer_is_rejected():
    # writes the result into A's buffer first and reads it back: correct output, mutated input
    correct = reference_runner(MATMUL)

    def via_input(ins, init, k):
        c = correct(ins)["C"]
        ins["A"][:8, :6] = c
        return RunResult(True, {"C": ins["A"][:8, :6].copy()}, ins)

    rep = verify(MATMUL, runner=runner_from(via_input))
    assert not rep.equal and any("inputs mutated" in f for f in rep.failures)


def test_partial_write_is_rejected():
    correct = reference_runner(MATMUL)

    def partial(ins, init, k):
        out = init["C"].copy()  # poisoned buffer as handed to the kernel
        out[:, :5] = correct(ins)["C"][:, :5]
        return RunResult(True, {"C": out}, ins)

    rep = verify(MATMUL, runner=runner_from(partial), seeds=(0,), dists=("normal",))
    assert not rep.equal
    assert any("output C: 8 of 48 elements never written (first at (0, 5))" in f for f in rep.failures), rep.failures


def test_partial_write_integer_and_bool_outputs_two_pass():
    correct = reference_runner(ARGMAX)

    def partial(ins, init, k):
        out = init["C"].copy()
        out[1:] = correct(ins)["C"][1:]
        return RunResult(True, {"C": out}, ins)

    runner = runner_from(partial)
    rep = verify(ARGMAX, runner=runner, seeds=(0,), dists=("normal",))
    assert any("output C: 5 of 20 elements never written" in f for f in rep.failures), rep.failures
    # a correct integer kernel whose values never hit the sentinel needs no second run
    ok_runner = runner_from(lambda ins, init, k: RunResult(True, correct(ins), ins))
    assert verify(ARGMAX, runner=ok_runner, seeds=(0,), dists=("normal",)).equal
    assert len(ok_runner.calls) == 2  # the run and the final repeat

    pos = reference_runner(POSITIVE)

    def partial_bool(ins, init, k):
        out = init["Y"].copy()  # poison False in the first pass, True in the second
        out[:3] = pos(ins)["Y"][:3]
        return RunResult(True, {"Y": out}, ins)

    rep = verify(POSITIVE, runner=runner_from(partial_bool), seeds=(0,), dists=("normal",))
    assert any("output Y: 3 of 6 elements never written" in f for f in rep.failures), rep.failures
    good = runner_from(lambda ins, init, k: RunResult(True, pos(ins), ins))
    assert verify(POSITIVE, runner=good, seeds=(0,), dists=("normal",)).equal


def test_nan_and_inf_are_rejected():
    correct = reference_runner(MATMUL)

    def with_nan(ins, init, k):
        c = correct(ins)["C"].copy()
        c[2, 3] = np.nan
        c[4, 4] = np.inf
        return RunResult(True, {"C": c}, ins)

    rep = verify(MATMUL, runner=runner_from(with_nan), seeds=(0,), dists=("uniform",))
    assert not rep.equal
    assert any("output C: NaN/Inf at 2 of 48 elements (first at (2, 3)" in f for f in rep.failures), rep.failures


def test_reference_nan_is_reported_distinctly():
    src = K("L^{6}_{i=0} [ Y^{f32,g}_{i} = log(X^{f32,g}_{i}); ];", "X: f32[6]) -> (Y: f32[6]", "lg")
    # log's argument is drawn positive (its inferred domain); a domain given explicitly
    # that admits negative values makes the reference produce NaN, reported as such
    rep = verify(src, target="interp", seeds=(0,), dists=("normal",), domains={"X": (-10, 10)})
    assert not rep.equal
    assert any("the reference has NaN/Inf" in f and "NaN/Inf in the candidate too" in f for f in rep.failures)
    assert verify(src, target="interp", seeds=(0,), dists=("uniform",)).equal
    assert verify(src, target="interp", seeds=(0,), dists=("normal",)).equal


def test_wrong_shape_and_dtype_are_rejected():
    correct = reference_runner(MATMUL)
    rep = verify(MATMUL, runner=runner_from(lambda ins, init, k: RunResult(True, {"C": correct(ins)["C"].astype(np.float64)}, ins)),
                 seeds=(0,), dists=("uniform",))
    assert any("output C: dtype f64, expected f32" in f for f in rep.failures)
    rep = verify(MATMUL, runner=runner_from(lambda ins, init, k: RunResult(True, {"C": correct(ins)["C"].T.copy()}, ins)),
                 seeds=(0,), dists=("uniform",))
    assert any("output C: shape [6, 8], expected [8, 6]" in f for f in rep.failures)
    rep = verify(MATMUL, runner=runner_from(lambda ins, init, k: RunResult(True, {}, ins)), seeds=(0,), dists=("uniform",))
    assert any("output C: missing" in f for f in rep.failures)


def test_crash_timeout_and_raising_runner():
    rep = verify(MATMUL, runner=runner_from(lambda ins, init, k: RunResult(False, error="kernel 'mm' timed out after 1 s",
                                                                           error_kind="timeout")))
    assert not rep.equal
    assert rep.failures == ["candidate failed [timeout] (seed 0, uniform): kernel 'mm' timed out after 1 s"]

    def boom(ins, init, k):
        raise RuntimeError("segfault in the sandbox")

    rep = verify(MATMUL, runner=runner_from(boom))
    assert not rep.equal and "RuntimeError: segfault in the sandbox" in rep.failures[0]


def test_stale_results_and_dependence_on_previous_run():
    correct = reference_runner(MATMUL)
    state = {}

    def stale(ins, init, k):  # returns the result of the previous call (reused buffer)
        prev = state.get("prev")
        state["prev"] = correct(ins)
        return RunResult(True, prev if prev is not None else state["prev"], ins)

    rep = verify(MATMUL, runner=runner_from(stale), seeds=(0, 1), dists=("uniform",))
    assert not rep.equal and any("seed 1, uniform" in f for f in rep.failures)

    acc = {}

    def accumulates(ins, init, k):  # never resets its accumulator between calls
        c = correct(ins)["C"]
        acc["C"] = acc.get("C", 0) + c
        return RunResult(True, {"C": acc["C"].astype(np.float32)}, ins)

    rep = verify(MATMUL, runner=runner_from(accumulates), seeds=(0,), dists=("uniform",))
    assert not rep.equal
    assert any("output depends on previous run" in f for f in rep.failures), rep.failures


def test_signature_mismatch_and_program_errors():
    other = K("L^{8}_{i=0} L^{6}_{j=0} [ C^{f32,g}_{i,j} = A^{f32,g}_{i,j}; ];", "A: f32[8, 16]) -> (C: f32[8, 6]", "mm")
    rep = verify(MATMUL, other, target="interp")
    assert not rep.equal and any("signatures differ" in f for f in rep.failures)
    rep = verify("\\kernel bad(A: f32[4]) -> (Y: f32[4]) { L^{4}_{i=0} [ Y^{f32,g}_{i} = Q^{f32,g}_{i}; ]; }", target="interp")
    assert not rep.equal and rep.failures[0].startswith("candidate:") and "E018" in rep.failures[0]


def test_multi_kernel_file_selects_kernel():
    both = MATMUL + SOFTMAX
    assert verify(both, kernel="softmax", target="interp", seeds=(0,), dists=("normal",)).equal
    rep = verify(both, target="interp")
    assert not rep.equal and "name one" in rep.failures[0]


def test_tolerance_overrides_and_dtypes():
    correct = reference_runner(MATMUL)

    def slightly_off(ins, init, k):
        c = correct(ins)["C"]
        return RunResult(True, {"C": (c * np.float32(1 + 3e-5)).astype(np.float32)}, ins)

    rep = verify(MATMUL, runner=runner_from(slightly_off), seeds=(0,), dists=("uniform",))
    assert not rep.equal and any("normwise" in f for f in rep.failures)
    rep = verify(MATMUL, runner=runner_from(slightly_off), seeds=(0,), dists=("uniform",), norm_tol=1e-4)
    assert rep.equal, rep.failures
    # integer outputs must match exactly
    c = compare_output("C", np.array([1, 2]), np.array([1, 3]), "i64")
    assert not c.ok and "differ" in c.failures[0]


def test_report_types():
    rep = verify(MATMUL, target="interp", seeds=(0,), dists=("uniform",))
    assert isinstance(rep, VerifyReport)
    assert rep.candidate == "mm (interp)" and rep.reference == "mm (interp)"
    res = interp_runner(MATMUL, {"A": np.ones((8, 16), np.float32), "B": np.ones((16, 6), np.float32)},
                        {"C": D.poisoned("f32", (8, 6))})
    assert isinstance(res, RunResult) and res.ok and (res.outputs["C"] == 16).all()
    res = interp_runner("\\kernel x(A: f32[2]) -> (Y: f32[2]) { L^{2}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{i+1}; ]; }",
                        {"A": np.ones(2, np.float32)}, {"Y": D.poisoned("f32", (2,))})
    assert not res.ok and "E030" in res.error


# ---------------------------------------------------------------------------
# the real compiled path (leirc.lower.runner.run_kernel)


def _compiled_runner_available() -> bool:
    try:
        from leirc.lower.runner import run_kernel  # noqa: F401
    except Exception:
        return False
    import importlib.util

    return importlib.util.find_spec("tvm") is not None


needs_tvm = pytest.mark.skipif(not _compiled_runner_available(), reason="leirc.lower.runner / TVM not available")


@needs_tvm
def test_compiled_matmul_equals_interpreter():
    rep = verify(MATMUL, seeds=(0, 1), dists=("normal",), target="llvm", timeout=300)
    assert rep.equal, rep.failures
    assert rep.runs == 2


@needs_tvm
def test_compiled_wrong_program_is_rejected():
    rep = verify(MATMUL_TB, MATMUL, seeds=(0,), dists=("uniform",), target="llvm", timeout=300)
    assert not rep.equal and any("mismatch" in f for f in rep.failures)


@needs_tvm
def test_compiled_crash_is_reported(monkeypatch):
    monkeypatch.setenv("LEIRC_WORKER_TEST_HOOK", "segfault")
    rep = verify(MATMUL, seeds=(0,), dists=("uniform",), target="llvm", timeout=300)
    assert not rep.equal
    assert rep.failures[0].startswith("candidate failed [crash]"), rep.failures


def test_private_tile_keeps_the_arithmetic_tolerance():
    """The error bound's companion program allocates the bound of a private tile privately too:
    without that, the companion has a shared buffer in a P loop (E040) and the verifier falls
    back to the flat tolerance."""
    from test_private_storage import GEMM

    rep = verify(GEMM, target="interp")
    assert rep.equal, rep.failures
    assert rep.tolerance == "arithmetic"


def test_ctrl_c_keeps_a_partial_report():
    """Ctrl-C during the runs ends the verification with the runs made so far, marked
    interrupted (never EQUAL), instead of losing them."""
    src = K("L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i}*2.0;];", "A: f32[8]) -> (C: f32[8]")
    calls = []

    def runner(source, inputs, outputs, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return interp_runner(source, inputs, outputs, **kw)

    rep = verify(src, runner=runner)
    assert rep.interrupted and not rep.equal
    # runs are pipelined, so the interrupted call is the 3rd issued, not necessarily the 3rd planned
    assert 2 <= rep.runs <= 3 and f"interrupted after {rep.runs} of 14 runs" in rep.failures[-1], \
        (rep.runs, rep.failures)
    assert rep.to_json()["interrupted"] is True
