"""No traceback reaches a user: every subcommand driven with bad paths, bad flags, bad values,
binary and empty files exits 1 (the input has errors) or 2 (usage, I/O, environment) with a
one-line reason, never a Python traceback and never an internal error.

In-process through ``leirc.cli.main.main`` (fast); a few through a real subprocess (the
entry point, standard input). No case builds a kernel: each is refused before any work.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest

from leirc.cli.main import COMMANDS, main

GOOD = "\\kernel scale(A: f32[8]) -> (C: f32[8]) {\n  L^{8}_{i=0} [\n    C^{f32,g}_{i} = A^{f32,g}_{i}*2.0;\n  ];\n}\n"
MODEL_RAISES = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        y = x * 2
        raise RuntimeError("boom in forward")


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
'''

#: a file argument per command, where the command takes one (import takes a model)
FILE_COMMANDS = ["check", "fmt", "convert", "build", "run", "verify", "bench", "strategies", "apply", "simplify"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    (d / "good.leir").write_text(GOOD)
    (d / "empty.leir").write_text("")
    (d / "comments.leir").write_text("% only a comment\n\n% and another\n")
    (d / "binary.leir").write_bytes(bytes(range(256)) * 4)
    (d / "latin1.leir").write_bytes(GOOD.replace("scale", "sc\xe4le").encode("latin-1"))
    (d / "garbage.leir").write_text("\\kernel ((((( ]]] ^^^ %%% \\kernel")
    (d / "adir.leir").mkdir()
    (d / "afile").write_text("not a directory\n")
    (d / "empty.jsonl").write_text("")
    (d / "binary.jsonl").write_bytes(bytes(range(256)))
    (d / "badrec.jsonl").write_text('[1, 2]\n{"IR": 3}\n{"IR": "x", "inputs": 5, "outputs": []}\nnot json\n')
    (d / "raises.py").write_text(MODEL_RAISES)
    (d / "binary.py").write_bytes(b"\x00\x01\x02import torch\xff\n")
    (d / "notkb.py").write_text("x = 1\n")
    (d / "bad.trace.json").write_text('{"steps": [{"name": 5}]}')
    return d


def call(argv) -> int:
    try:
        return main([str(a) for a in argv])
    except SystemExit as e:  # argparse: usage errors exit 2
        return e.code if isinstance(e.code, int) else 2


def assert_clean(capsys, argv, allowed=(1, 2)):
    rc = call(argv)
    out, err = capsys.readouterr()
    assert rc in allowed, (argv, rc, out[-400:], err[-800:])
    text = out + err
    assert "Traceback" not in text and "internal error" not in text, (argv, text[-1500:])
    assert err.strip(), (argv, "a failure must say why on stderr")
    return rc, out, err


def test_every_command_is_covered():
    # commands registered later (lsp, dataset, ...) get the flag and --help cases below
    # through COMMANDS; their file cases belong here too
    assert set(FILE_COMMANDS) | {"import"} <= set(COMMANDS)


@pytest.mark.parametrize("command,path", list(itertools.product(
    FILE_COMMANDS, ["missing.leir", "adir.leir", "binary.leir", "latin1.leir", "garbage.leir"])))
def test_bad_files(files, capsys, command, path):
    extra = ["loop_split", "--at", "N0.i", "--arg", "factor=2"] if command == "apply" else []
    rc, _, err = assert_clean(capsys, [command, files / path] + extra)
    if path in ("missing.leir", "adir.leir"):
        assert rc == 2 and ("no such file" in err or "is a directory" in err or "No such file" in err
                            or "Is a directory" in err), err


@pytest.mark.parametrize("command", [c for c in FILE_COMMANDS if c not in ("fmt", "convert", "check")])
@pytest.mark.parametrize("path", ["empty.leir", "comments.leir"])
def test_an_empty_file_is_an_error_for_commands_that_need_a_kernel(files, capsys, command, path):
    extra = ["loop_split", "--at", "N0.i", "--arg", "factor=2"] if command == "apply" else []
    _, _, err = assert_clean(capsys, [command, files / path] + extra)
    assert "no kernel" in err, err


@pytest.mark.parametrize("path", ["empty.leir", "comments.leir"])
def test_an_empty_file_checks_with_a_warning(files, capsys, path):
    assert call(["check", files / path]) == 0
    err = capsys.readouterr().err
    assert "warning[W008]" in err and "defines no kernel" in err and "--signature" in err
    assert call(["check", "-W", files / path]) == 1


@pytest.mark.parametrize("command", COMMANDS)
def test_unknown_flag_and_help(files, capsys, command):
    assert_clean(capsys, [command, "--no-such-flag", files / "good.leir"], allowed=(2,))
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    capsys.readouterr()


@pytest.mark.parametrize("argv", [
    ["bench", "{good}", "--threads", "-3"],
    ["bench", "{good}", "--threads", "0"],
    ["bench", "{good}", "--repeat", "0"],
    ["bench", "{good}", "--warmup", "-1"],
    ["bench", "{good}", "--min-repeat-ms", "nan"],
    ["bench", "{good}", "--timeout", "0"],
    ["bench", "{good}", "--seed", "-2"],
    ["bench", "{good}", "-t", "gpu"],
    ["run", "{good}", "--timeout", "0"],
    ["run", "{good}", "--timeout", "-1"],
    ["run", "{good}", "--threads", "-1"],
    ["run", "{good}", "--memory-limit", "0"],
    ["run", "{good}", "--seed", "x"],
    ["run", "{good}", "-t", "gpu"],
    ["verify", "{good}", "--rtol", "-1"],
    ["verify", "{good}", "--norm-tol", "inf"],
    ["verify", "{good}", "--timeout", "0"],
    ["verify", "{good}", "--seeds", ""],
    ["verify", "{good}", "--seeds", "1,-1"],
    ["verify", "{good}", "--dists", "cauchy"],
    ["verify", "{good}", "--domain", "A=1"],
    ["verify", "{good}", "-t", "gpu"],
    ["verify", "{good}", "--threads", "0"],
    ["verify", "-", "-"],
    ["build", "{good}", "-t", "gpu"],
    ["build", "{good}", "-O", "9"],
    ["build", "{good}", "-O", "fast"],
    ["build", "{good}", "--emit", "asm"],
    ["build", "{good}", "--emit", "cuda"],
    ["build", "{good}", "--arch", "sm_80"],
    ["build", "{good}", "--print-after", "everything"],
    ["build", "{good}", "--threads", "-3"],
    ["build", "{good}", "-o", "{afile}"],
    ["build", "{good}", "-o", "{afile}/sub"],
    ["apply", "{good}"],
    ["apply", "{good}", "no_such_strategy"],
    ["apply", "{good}", "loop_split", "--at", "N9.q", "--arg", "factor=2"],
    ["apply", "{good}", "loop_split", "--at", "N0.i", "--arg", "factor=two"],
    ["apply", "{good}", "loop_split", "--at", "N0.i", "--arg", "factor"],
    ["apply", "{good}", "--trace", "{missing}"],
    ["apply", "{good}", "--trace", "{binary}"],
    ["apply", "{good}", "--trace", "{badtrace}"],
    ["apply", "{good}", "-t", "gpu", "--verify", "loop_split"],
    ["apply", "{good}", "loop_split", "--at", "N0.i", "--arg", "factor=2", "-o", "{afile}/x.leir"],
    ["apply", "{good}", "loop_split", "--at", "N0.i", "--arg", "factor=2", "--save-trace", "{afile}/t.json"],
    ["simplify", "{good}", "-o", "{afile}/x.leir"],
    ["simplify", "{good}", "--kernel", "nope"],
    ["strategies"],
    ["strategies", "{good}", "--kernel", "nope"],
    ["strategies", "{good}", "--only", "nope"],
    ["check", "{good}", "--signature", "{missing}"],
    ["check", "{good}", "--signature", "{binary}"],
    ["check", "{good}", "--signature", "{badrec}"],
    ["fmt", "--check", "-i", "{good}"],
    ["convert", "{empty_jsonl}", "-o", "{afile}"],
    ["convert", "{binary_jsonl}"],
    ["convert", "{badrec}"],
    ["convert", "{missing}"],
    ["run", "{good}", "--inputs", "{missing}"],
    ["run", "{good}", "--inputs", "{binary}"],
    ["run", "{good}", "--kernel", "nope"],
    ["import", "{missing_py}"],
    ["import", "{binary_py}"],
    ["import", "{notkb_py}"],
    ["import", "{raises_py}"],
    ["import", "{raises_py}", "-t", "cuda"],
    ["build", "{raises_py}"],
    ["build", "{raises_py}", "--kernel", "k"],
    ["build", "{raises_py}", "-t", "cuda"],
])
def test_bad_values_and_outputs(files, capsys, argv):
    subst = {"good": files / "good.leir", "afile": files / "afile", "missing": files / "missing.json",
             "binary": files / "binary.leir", "badtrace": files / "bad.trace.json", "badrec": files / "badrec.jsonl",
             "empty_jsonl": files / "empty.jsonl", "binary_jsonl": files / "binary.jsonl",
             "missing_py": files / "missing.py", "binary_py": files / "binary.py", "notkb_py": files / "notkb.py",
             "raises_py": files / "raises.py"}
    assert_clean(capsys, [a.format(**{k: str(v) for k, v in subst.items()}) for a in argv])
    assert not (files / "afile").is_dir() and (files / "afile").read_text() == "not a directory\n"


def test_forward_that_raises_shows_the_users_line_once(files, capsys):
    rc, _, err = assert_clean(capsys, ["import", files / "raises.py"], allowed=(1,))
    line = 8  # `raise RuntimeError(...)` in MODEL_RAISES
    assert f"raises.py:{line}: RuntimeError: boom in forward" in err, err
    assert err.count("boom in forward") == 1 and "torch/fx" not in err and "data-dependent" not in err


def test_data_dependent_control_flow_names_the_line_and_the_limitation(tmp_path, capsys):
    branchy = tmp_path / "branchy.py"
    branchy.write_text(MODEL_RAISES.replace('        raise RuntimeError("boom in forward")',
                                            "        if y.sum() > 0:\n            return y\n        return -y"))
    _, _, err = assert_clean(capsys, ["import", branchy], allowed=(1,))
    assert "branchy.py:8: torch.fx cannot trace Model.forward" in err and "data-dependent control flow" in err


def test_verify_cuda_without_a_gpu_points_to_build(files, capsys):
    from leirc.lower.runner import device_available

    if device_available("cuda")[0]:
        pytest.skip("this machine has a CUDA device: the refusal is for machines without one")
    rc, out, err = assert_clean(capsys, ["verify", files / "good.leir", "-t", "cuda"], allowed=(2,))
    assert "no cuda device" in err and "leirc build -t cuda" in err and "NOT EQUAL" not in out + err
    rc, out, err = assert_clean(capsys, ["run", files / "good.leir", "-t", "cuda"], allowed=(2,))
    assert "leirc build -t cuda" in err


def test_subprocess_entry_point_and_stdin(files):
    for argv, stdin in [(["check", "-"], bytes(range(256))), (["verify", "-", "-t", "interp"], b""),
                        (["build", "-", "-o", str(files / "afile")], GOOD.encode()),
                        (["run", "-", "--inputs", str(files / "binary.leir")], GOOD.encode())]:
        p = subprocess.run([sys.executable, "-m", "leirc.cli.main", *argv], input=stdin, capture_output=True,
                           timeout=120, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        err = p.stderr.decode()
        assert p.returncode in (1, 2), (argv, p.returncode, err)
        assert "Traceback" not in err and "leirc: error" in err or "error[" in err, (argv, err)


def test_a_bare_body_points_to_signature(files, capsys, tmp_path):
    body = tmp_path / "body.leir"
    body.write_text("L^{4}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i};];\n")
    assert call(["check", body]) == 1
    err = capsys.readouterr().err
    assert "error[E018]" in err and "bare Step-TP body" in err and "--signature" in err
