"""``leirc apply`` edits only what a step changes (issue #34): applied to one kernel of a file
with two, the other kernel's text — its comments, layout and spellings such as ``\\cdot`` —
stays byte for byte, as the language server's minimal edits keep it."""

from __future__ import annotations

import json

from leirc.cli.main import main
from leirc.lang.checker import check_text

TWO = r"""% two kernels; apply touches only the first
\kernel first(A: f32[64]) -> (C: f32[64]) {
  % double it
  L^{64}_{i=0} [
    C^{f32,g}_{i} = A^{f32,g}_{i}*2.0;
  ];
}

% the second one is written by hand, in its own style
\kernel second(A: f32[8]) -> (C: f32[8]) {
  L^{8}_{i=0} [ C^{f32,g}_{i} = A^{f32,g}_{i} \cdot 3.0;   % x3
  ];
}
"""
SECOND = TWO[TWO.index("% the second one"):]


def test_apply_to_one_kernel_leaves_the_other_byte_identical(tmp_path, capsys):
    f = tmp_path / "two.leir"
    f.write_text(TWO)
    assert main(["apply", str(f), "loop_split", "--at", "N0.i", "--arg", "factor=16", "--kernel", "first"]) == 0
    out = capsys.readouterr().out
    assert out.endswith(SECOND)  # the untouched kernel, as written
    assert out.startswith("% two kernels; apply touches only the first\n\\kernel first(A: f32[64]) -> (C: f32[64]) {\n"
                          "  % double it\n  L^{4}_{io=0} L^{16}_{i=0} [")
    cf = check_text(out)
    assert cf.ok and [r.kernel.name for r in cf.results] == ["first", "second"]


def test_a_replayed_trace_and_output_file_keep_the_other_kernel_too(tmp_path, capsys):
    f, trace, o = tmp_path / "two.leir", tmp_path / "t.json", tmp_path / "out.leir"
    f.write_text(TWO)
    assert main(["apply", str(f), "loop_split", "--at", "N0.i", "--arg", "factor=16", "--kernel", "first",
                 "--save-trace", str(trace)]) == 0
    capsys.readouterr()
    steps = json.loads(trace.read_text())["steps"]
    steps.append({"strategy": "loop_parallelization", "args": {"loop": "N0.io"}})
    trace.write_text(json.dumps({"kernel": "first", "steps": steps}))
    assert main(["apply", str(f), "--trace", str(trace), "--kernel", "first", "-o", str(o)]) == 0
    text = o.read_text()
    assert text.endswith(SECOND) and "P^{4}_{io=0} L^{16}_{i=0}" in text


def test_compact_still_reprints_the_whole_file(tmp_path, capsys):
    f = tmp_path / "two.leir"
    f.write_text(TWO)
    assert main(["apply", str(f), "loop_split", "--at", "N0.i", "--arg", "factor=16", "--kernel", "first",
                 "--compact"]) == 0
    out = capsys.readouterr().out
    assert "\\cdot" not in out and len(out.strip().splitlines()) == 2  # one line per kernel, as asked


SCALE = "\\kernel scale(A: f32[64]) -> (C: f32[64]) {\n  L^{64}_{i=0} [\n    C^{f32,g}_{i} = exp(A^{f32,g}_{i})*2.0;\n  ];\n}\n"


def test_verify_of_a_bitwise_step_compares_with_the_original_build_bit_for_bit(tmp_path, capsys):
    f = tmp_path / "scale.leir"
    f.write_text(SCALE)
    assert main(["apply", str(f), "loop_split", "--at", "N0.i", "--arg", "factor=16", "--verify"]) == 0
    err = capsys.readouterr().err
    assert "[operator, bitwise]" in err
    assert "verify on llvm: equal, bitwise identical to the original program's build (11 runs)" in err, err
    assert "max_abs_err" not in err  # no comparison with the interpreter's rounding


def test_the_bitwise_comparison_finds_a_different_bit():
    from leirc.cli.bitwise import compare_builds

    other = SCALE.replace("*2.0", "*2.0000002")  # one ulp of f32 away at most elements
    rep = compare_builds(SCALE, other, kernel="scale", target="llvm", threads=1, seeds=(0,))
    assert not rep.identical and rep.runs == 1
    (name, label, n, err), = rep.differences
    assert name == "C" and label == "seed 0, uniform" and n > 0 and 0 < err < 1e-5
    assert "NOT bitwise identical" in rep.line("llvm") and "output C differs" in rep.line("llvm")
    assert compare_builds(SCALE, SCALE, kernel="scale", target="llvm", threads=1, seeds=(0,)).identical
