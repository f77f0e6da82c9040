"""Issue #30, item 5: f16/bf16 sums. The oracle accumulates like the language (an f16/bf16
accumulator is rounded after every term, as compiled code does bit for bit), and the bound
follows the precision the program actually accumulates in."""

from __future__ import annotations

import numpy as np

from leirc.interp import Interpreter, check_source
from leirc.interp.dtypes import np_dtype
from leirc.verify import RunResult, verify
from leirc.verify.core import NARROW_LITERAL_LIMIT, narrow_accumulations, uses_literal


def rowsum(dt: str, rows: int = 8, n: int = 300) -> str:
    return (f"\\kernel s(X: {dt}[{rows}, {n}]) -> (S: {dt}[{rows}]) {{\n"
            f"  L^{{{rows}}}_{{i=0}} L^{{{n}}}_{{k=0}} [ S^{{{dt},g}}_{{i}} = S^{{{dt},g}}_{{i}} + X^{{{dt},g}}_{{i,k}}; ];\n}}\n")


def rowsum_f32_acc(dt: str, n: int = 300) -> str:
    return (f"\\kernel s(X: {dt}[8, 300]) -> (S: {dt}[8]) {{\n"
            f"  L^{{8}}_{{i=0}} L^{{{n}}}_{{k=0}} [ A^{{f32,g}}_{{i}} = A^{{f32,g}}_{{i}} + f32(X^{{{dt},g}}_{{i,k}}); ];\n"
            f"  L^{{8}}_{{i=0}} [ S^{{{dt},g}}_{{i}} = {dt}(A^{{f32,g}}_{{i}}); ];\n}}\n")


def literal_runner(source, inputs, outputs, **kw):
    """A candidate that computes exactly what the text says: the literal interpreter."""
    outs = Interpreter(check_source(source), vectorize=False).run(inputs, outputs=outputs)
    return RunResult(True, outs, inputs)


def test_the_oracle_rounds_a_bf16_accumulator_after_every_term():
    src = rowsum("bf16")
    r = check_source(src)
    assert narrow_accumulations(r) == ["S"] and uses_literal(r)
    # the vectorized interpreter sums in float64: percents away from the semantics
    x = {"X": np.random.default_rng(0).random((8, 300)).astype(np_dtype("bf16"))}
    lit = Interpreter(r, vectorize=False).run(x)["S"].astype(np.float64)
    vec = Interpreter(r).run(x)["S"].astype(np.float64)
    assert np.linalg.norm(lit - vec) / np.linalg.norm(lit) > 1e-3
    # a candidate that computes the semantics is bit-identical to the oracle on every run
    rep = verify(src, runner=literal_runner, seeds=(0,), dists=("uniform", "normal"))
    assert rep.equal and rep.bitwise and rep.oracle == "literal", rep.failures
    assert any(n.startswith("oracle: literal, because S") for n in rep.probe_notes)


def test_large_narrow_sums_keep_the_vectorized_oracle_and_say_so():
    big = rowsum("f16", rows=128, n=256)
    assert 128 * 256 > NARROW_LITERAL_LIMIT and not uses_literal(check_source(big))
    rep = verify(big, target="interp", seeds=(0,), dists=("uniform",))
    assert rep.equal and rep.oracle == "vectorized"
    assert any("exceed" in n for n in rep.probe_notes), rep.probe_notes


def test_a_dropped_term_of_a_bf16_sum_accumulated_in_f32_is_caught():
    # bf16 data, f32 accumulator, bf16 result: the bound uses the accumulator's precision
    # (sqrt(300) * 2^-24 per term) plus one bf16 rounding of the result, so one of 300
    # terms (about 6 % of a sum of signed terms) is far outside it
    for dt in ("bf16", "f16"):
        rep = verify(rowsum_f32_acc(dt, 299), rowsum_f32_acc(dt), target="interp", seeds=(0,))
        assert not rep.equal and "arithmetic" in rep.tolerance, (dt, rep.failures)
        assert verify(rowsum_f32_acc(dt), target="interp", seeds=(0,)).equal


def test_the_worst_case_sum_bound_never_exceeds_the_terms_it_adds():
    # n*u = 300 * 2^-8 = 1.17 for bf16: a bound above sum |t| admits more than any rounding can do
    from leirc.verify import ErrorBound

    r = check_source(rowsum("bf16"))
    x = {"X": np.random.default_rng(1).standard_normal((8, 300)).astype(np_dtype("bf16"))}
    e = ErrorBound(r, worst_case=True).run(x)["S"]
    total = np.abs(x["X"].astype(np.float64)).sum(axis=1)
    assert (e <= total * (1 + 1e-6)).all() and (e > 0.5 * total).all()
