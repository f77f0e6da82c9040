"""Every program of the Step-TP compat corpus (../shared/compat) parses, round-trips through
both printer layouts, and prints canonically.

* ``steptp_emitted_level1.jsonl``: level-1 root programs with their signatures; also parsed
  with ``parse_body`` + ``signature_from_record``.
* ``steptp_strategy_outputs.jsonl``: strategy applications (original + transformed).

The compact printer reproduces almost every program byte-for-byte; the only differences are
the spelling of float literals (``1.0e-5`` prints as ``1e-05``) and redundant parentheses
(``(F/x*y)/2097152`` prints as ``F/x*y/2097152``). Both are checked explicitly.
"""

from __future__ import annotations

import re

import pytest

import strategies_ast as S
from leirc.lang import ast as A
from leirc.lang.parser import parse, parse_body, parse_record, signature_from_record
from leirc.lang.printer import COMPACT, PRETTY, format_const, print_body, print_module

pytestmark = pytest.mark.skipif(not S.compat_available(), reason=S.COMPAT_SKIP_REASON)

PROGRAMS = S.compat_programs()
EMITTED = S.load_emitted() if S.compat_available() else []


def _ok_kernel(text: str) -> A.Kernel:
    res = parse(text)
    assert res.diagnostics == [], res.diagnostics
    assert S.ill_typed_parts(res.module) == []
    (k,) = res.module.kernels
    assert not k.declared
    return k


def test_corpus_is_present_and_nonempty():
    assert len(EMITTED) >= 50
    assert len(PROGRAMS) > len(EMITTED)


@pytest.mark.parametrize("layout", [COMPACT, PRETTY])
def test_every_program_parses_and_round_trips(layout):
    for pid, text in PROGRAMS:
        k = _ok_kernel(text)
        assert bool(k.body) == bool(text.strip()), pid  # a few strategy outputs are empty strings
        # the bare body and the whole module both re-parse to the same items
        k2 = _ok_kernel(print_body(k, layout))
        assert k2.body == k.body, pid
        assert S.typed(k2.body) == S.typed(k.body), pid
        assert parse(print_module(parse(text).module, layout)).module.kernels[0].body == k.body, pid


@pytest.mark.parametrize("layout", [COMPACT, PRETTY])
def test_printing_is_a_fixed_point(layout):
    for pid, text in PROGRAMS:
        once = print_body(_ok_kernel(text), layout)
        assert print_body(_ok_kernel(once), layout) == once, pid


def _name(model: str) -> str:
    # model names such as conv_standard_3D__square_input are not LEIR names ('__')
    return re.sub(r"_+", "_", model)


def test_emitted_programs_with_record_signatures():
    for rec in EMITTED:
        ins, outs = signature_from_record(rec)
        res = parse_body(rec["IR"], ins, outs, name=_name(rec["model"]))
        assert res.ok, (rec["model"], res.diagnostics)
        (k,) = res.module.kernels
        assert k.name == _name(rec["model"]) and not k.declared
        assert [p.name for p in k.outputs] == list(rec["outputs"][0])
        assert [p.name for p in k.inputs][: len(rec["inputs"][0])] == list(rec["inputs"][0])
        assert all(p.dtype in A.DTYPES for p in k.inputs + k.outputs)
        assert k.body == _ok_kernel(rec["IR"]).body
        # with a signature the module prints in the declared form and re-parses to it
        declared = parse(print_module(res.module, COMPACT)).module
        assert declared.kernels[0].body == k.body
        assert declared.kernels[0].inputs == k.inputs and declared.kernels[0].outputs == k.outputs


def test_emitted_programs_with_parse_record():
    """parse_record derives a valid kernel name from the model and output dtypes the
    record omits from the program; the declared print re-parses to the same kernel."""
    for rec in EMITTED:
        res = parse_record(rec)
        assert res.ok, (rec["model"], res.diagnostics)
        (k,) = res.module.kernels
        for layout in (COMPACT, PRETTY):
            again = parse(print_module(res.module, layout))
            assert again.ok, (rec["model"], again.diagnostics)
            (k2,) = again.module.kernels
            assert (k2.name, k2.inputs, k2.outputs, k2.body) == (k.name, k.inputs, k.outputs, k.body)


_FLOAT = re.compile(r"(?<![A-Za-z0-9_.])(\d+\.\d*|\.\d+)([eE][-+]?\d+)?(?![A-Za-z0-9_.])|(?<![A-Za-z0-9_.])\d+[eE][-+]?\d+")


def _canonical_floats(text: str) -> str:
    """Respell every float literal the way the printer does (1.0e-5 -> 1e-05)."""
    return _FLOAT.sub(lambda m: format_const(float(m.group(0))), text)


def test_compact_print_is_byte_identical_up_to_literals_and_parentheses(record_property):
    identical = literal_only = parens = 0
    for pid, text in PROGRAMS:
        printed = print_body(_ok_kernel(text), COMPACT)
        if printed == text:
            identical += 1
            continue
        canon = _canonical_floats(text)
        if printed == canon:
            literal_only += 1
            continue
        # any remaining difference must be parentheses only
        assert canon.replace("(", "").replace(")", "") == printed.replace("(", "").replace(")", ""), pid
        assert len(printed) < len(canon), pid  # the printer only ever drops parentheses here
        parens += 1
    record_property("compat_programs", len(PROGRAMS))
    record_property("byte_identical", identical)
    print(f"\ncompat: {len(PROGRAMS)} programs, {identical} print byte-identically in compact layout, "
          f"{literal_only} differ only in float spelling, {parens} (also) in redundant parentheses")
    assert identical >= 0.9 * len(PROGRAMS)


def test_compat_programs_use_many_features():
    """Guard against a silently shrinking corpus: the features the parser must handle occur."""
    seen = set()
    for _, text in PROGRAMS:
        for n in A.walk(_ok_kernel(text)):
            seen.add(type(n).__name__)
            if isinstance(n, A.Loop):
                seen.add("loop:" + n.kind)
            if isinstance(n, A.Compare) and len(n.ops) > 1:
                seen.add("chain")
            if isinstance(n, A.Access) and any(isinstance(i, A.Access) for i in n.indices):
                seen.add("nested access")
    for feature in ["Loop", "Assign", "Access", "BinOp", "Neg", "Compare", "Call", "Const", "Var",
                    "loop:B", "loop:L", "chain", "nested access"]:
        assert feature in seen, feature
