"""program_rewrite: a whole transformed LEIR program (an LLM's answer) as one checked,
replayable step -- parsed, checked, held to the interface, never proven (approximate)."""

from __future__ import annotations

import json

import pytest

import leirc.strategies.program as PR  # registers the strategy until the registry loader lists it
from leirc.engine.program import Program, RewriteCache
from leirc.lang.printer import print_kernel
from leirc.strategies import NotApplicable, Step, enumerate_sites, get, trace_from_json, trace_to_json
from leirc.strategies.base import apply_step
from strategy_harness import check_docstring_example, check_trace_roundtrip, kernel_of, stdlib_text

NAME = "program_rewrite"
SRC = r"\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2+A^{f32,g}_{i}*3;];}"
GOOD = r"\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*5;];}"
SPLIT = (r"\kernel k(A:f32[8])->(C:f32[8]){L^{2}_{io=0}L^{4}_{i=0}"
         r"[C^{f32,g}_{io*4+i}=A^{f32,g}_{io*4+i}*2+A^{f32,g}_{io*4+i}*3;];}")


def rewrite(src: str, leir) -> object:
    return apply_step(kernel_of(src), Step.make(NAME, leir=leir))


def refused(src: str, leir, match: str, code) -> NotApplicable:
    with pytest.raises(NotApplicable, match=match) as ei:
        rewrite(src, leir)
    assert PR.rejection_code(ei.value) == code
    return ei.value


def test_docstring_example():
    check_docstring_example(NAME)


def test_registry_entry():
    s = get(NAME)
    assert s.numerics == "approximate" and s.level == "operator"
    assert [(a.name, a.kind) for a in s.args] == [("leir", "leir")]
    assert s.creates == ()


def test_applies_a_hand_split_loop():
    k = rewrite(SRC, SPLIT)
    assert print_kernel(k) == print_kernel(kernel_of(SPLIT))


def test_the_rewrite_is_approximate_and_touches_what_changed():
    p = Program.from_text(SRC)
    rw = p.apply(Step.make(NAME, leir=GOOD), cache=RewriteCache())
    assert rw.numerics == "approximate"
    assert rw.touched == ((0,),) and rw.produced == ((0,),)
    assert rw.program.fingerprint == Program.from_text(GOOD).fingerprint


def test_a_bare_step_tp_body_takes_the_programs_signature():
    k = rewrite(SRC, r"L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*5;];")
    assert k.declared and k.name == "k"
    assert print_kernel(k) == print_kernel(kernel_of(GOOD))


def test_comments_and_layout_of_the_answer_do_not_matter():
    pretty = "% the model's own layout\n" + GOOD.replace("{L", "{\n  L").replace(";];}", ";\n  ];\n}")
    assert print_kernel(rewrite(SRC, pretty)) == print_kernel(kernel_of(GOOD))


def test_refuses_text_that_does_not_parse_with_the_position():
    e = refused(SRC, r"\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*;];}",
                r"does not parse: 1:\d+: E001", "parse_error")
    assert "program_rewrite" in str(e)


def test_refuses_prose():
    refused(SRC, "Here is the optimized kernel: it is faster.", "does not parse", "parse_error")


def test_refuses_two_kernels():
    refused(SRC, GOOD + "\n" + GOOD.replace(r"\kernel k", r"\kernel k2"), "expected one kernel, found 2",
            "parse_error")


def test_refuses_a_program_that_does_not_check():
    # reads A out of bounds: parses, but the checker proves nothing about A_{i+1} at i = 7
    refused(SRC, r"\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i+1}*5;];}",
            r"does not check: 1:\d+: E\d+", "check_error")


def test_refuses_an_undefined_tensor():
    refused(SRC, r"\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=Q^{f32,g}_{i}*5;];}",
            "does not check", "check_error")


@pytest.mark.parametrize("leir,match", [
    (GOOD.replace(r"\kernel k(", r"\kernel fast(", 1), "the kernel is named 'fast', expected 'k'"),
    (GOOD.replace("A:f32[8]", "B:f32[8]").replace("A^{f32,g}", "B^{f32,g}"), r"inputs \(B\), expected \(A\)"),
    (GOOD.replace("(A:f32[8])", "(A:f64[8])").replace("A^{f32,g}", "A^{f64,g}").replace("*5", "*5.0"),
     r"input A: f64\[8\], expected A: f32\[8\]"),
    (r"\kernel k(A:f32[4])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i//2}*5;];}",
     r"input A: f32\[4\], expected A: f32\[8\]"),
    (r"\kernel k(A:f32[8])->(C:f32[8],D:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*5;"
     r"D^{f32,g}_{i}=A^{f32,g}_{i};];}",
     r"outputs \(C, D\), expected \(C\)"),
])
def test_refuses_an_interface_change(leir, match):
    refused(SRC, leir, "changes the interface: " + match, "interface_changed")


def test_refuses_the_same_program_even_under_other_loop_names():
    refused(SRC, SRC, "leaves the program unchanged", "no_change")
    refused(SRC, SRC.replace("_{i=0}", "_{q=0}").replace("_{i}", "_{q}"), "leaves the program unchanged", "no_change")


def test_refuses_a_runaway_answer_before_parsing():
    refused(SRC, "L" * (PR.MAX_LEIR_CHARS + 1), "is too long", "too_long")


@pytest.mark.parametrize("value", [5, "", None, ["a"]])
def test_the_argument_must_be_text(value):
    with pytest.raises(NotApplicable, match="argument 'leir' of program_rewrite") as ei:
        rewrite(SRC, value)
    assert PR.rejection_code(ei.value) is None  # an argument error, not a refusal of the program


def test_the_code_survives_the_engines_rewrite_cache():
    p = Program.from_text(SRC)
    cache = RewriteCache()
    codes = []
    for _ in range(2):  # the second raise is re-made from the cached refusal
        with pytest.raises(NotApplicable) as ei:
            p.apply(Step.make(NAME, leir=SRC), cache=cache)
        codes.append(PR.rejection_code(ei.value))
    assert codes == ["no_change", "no_change"] and cache.hits == 1


def test_rejection_code_ignores_other_strategies():
    assert PR.rejection_code(NotApplicable("loop_split", "does not parse: whatever")) is None
    assert PR.rejection_code("changes the interface: x") == "interface_changed"


@pytest.mark.parametrize("kernel", ["relu", "softmax", "matmul_square", "layernorm"])
def test_never_listed_as_a_site(kernel):
    k = kernel_of(stdlib_text(kernel))
    assert enumerate_sites(k, [NAME]) == []


def test_trace_roundtrip():
    check_trace_roundtrip(SRC, [Step.make(NAME, leir=SPLIT), Step.make("loop_unrolling", loop="N0.i")])


def test_trace_json_carries_the_program_text():
    steps = trace_from_json(trace_to_json([Step.make(NAME, leir=GOOD)]))
    assert json.loads(trace_to_json(steps))["steps"][0] == {"strategy": NAME, "args": {"leir": GOOD}}


def test_numerics_the_verifier_decides():
    """Checking proves nothing about the values: a right rewrite verifies, a wrong one
    that checks clean is accepted by the step and caught by the verifier."""
    from leirc.verify import verify

    src = print_kernel(kernel_of(SRC), "pretty")
    right = print_kernel(rewrite(SRC, GOOD), "pretty")
    wrong = print_kernel(rewrite(SRC, GOOD.replace("*5", "*6")), "pretty")
    assert verify(right, src, target="interp", seeds=(0,), dists=("normal",)).equal
    assert not verify(wrong, src, target="interp", seeds=(0,), dists=("normal",)).equal
