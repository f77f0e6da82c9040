"""Issue #30: the reward-hacking classes KernelBench users met (constant or zero outputs,
outputs left unwritten, stale memory between runs, results that depend on evaluation order)
do not verify. The candidate side is an adversarial runner with ``run_kernel``'s signature
(what a hostile compiled kernel could do to its buffers); the verifier and the reference
are the real ones."""

from __future__ import annotations

import numpy as np

from leirc.verify import RunResult, interp_runner, verify

MM = ("\\kernel mm(A: f32[8, 16], B: f32[16, 6]) -> (C: f32[8, 6]) {\n"
      "  L^{8}_{i=0} L^{6}_{j=0} L^{16}_{k=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j}; ];\n}\n")


def test_constant_and_zero_outputs_fail():
    for value in (0.0, 1.0):
        def const(source, inputs, outputs, **kw):
            return RunResult(True, {n: np.full_like(v, value) for n, v in outputs.items()}, inputs)
        rep = verify(MM, runner=const)
        assert not rep.equal and "mismatch" in rep.failures[0], rep.failures


def test_outputs_left_unwritten_are_poison_on_every_run():
    # a kernel that writes only the elements it found non-poisoned (e.g. reusing the caller's
    # buffer from a previous run): every run starts poisoned, so the rest is "never written"
    def half(source, inputs, outputs, **kw):
        res = interp_runner(source, inputs, outputs)
        c = res.outputs["C"].copy()
        c[:, 3:] = outputs["C"][:, 3:]
        return RunResult(True, {"C": c}, inputs)
    rep = verify(MM, runner=half)
    assert not rep.equal and any("never written" in f for f in rep.failures), rep.failures


def test_stale_results_of_an_earlier_run_fail():
    memo: dict = {}

    def stale(source, inputs, outputs, **kw):  # computes once, then returns what it kept
        if "C" not in memo:
            memo["C"] = interp_runner(source, inputs, outputs).outputs["C"].copy()
        return RunResult(True, {"C": memo["C"].copy()}, inputs)
    rep = verify(MM, runner=stale)
    assert not rep.equal and "mismatch" in " ".join(rep.failures)


def test_state_kept_between_runs_is_caught_by_the_fresh_repeat():
    # correct on every input set, but only because of the state of the run before: the final
    # repeat of the first input set with fresh buffers shows it
    seen: list = []

    def stateful(source, inputs, outputs, **kw):
        res = interp_runner(source, inputs, outputs)
        key = inputs["A"].tobytes()
        c = res.outputs["C"] if key not in seen else res.outputs["C"] * 0
        seen.append(key)
        return RunResult(True, {"C": c}, inputs)
    rep = verify(MM, runner=stateful)
    assert not rep.equal and any("output depends on previous run" in f for f in rep.failures), rep.failures


def test_a_result_that_depends_on_evaluation_order_does_not_verify():
    # a parallel loop racing on one accumulator: its result depends on the order the
    # threads run in; the checker refuses it before any run
    racy = MM.replace("L^{8}_{i=0} L^{6}_{j=0} L^{16}_{k=0}", "L^{8}_{i=0} L^{6}_{j=0} P^{16}_{k=0}")
    rep = verify(racy, MM, target="interp")
    assert not rep.equal and "E040" in rep.failures[0], rep.failures


def test_inputs_modified_by_the_candidate_fail():
    def scribble(source, inputs, outputs, **kw):
        res = interp_runner(source, inputs, outputs)
        after = dict(inputs)
        after["B"] = inputs["B"] * 2
        return RunResult(True, res.outputs, after)
    rep = verify(MM, runner=scribble)
    assert not rep.equal and "inputs mutated" in rep.failures[0]
