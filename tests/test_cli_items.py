"""Regression tests for the smaller items of the CLI hardening issue: each is a reproduction
that used to give a silent wrong result."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys

import numpy as np
import pytest

from leirc.cli.main import main
from leirc.cli.common import DEFAULT_THREADS

SCALE = "\\kernel scale(A: f32[8]) -> (C: f32[8]) {\n  L^{8}_{i=0} [\n    C^{f32,g}_{i} = A^{f32,g}_{i}*2.0;\n  ];\n}\n"
SHIFT = "\\kernel shift(A: f32[6]) -> (C: f32[6]) {\n  L^{6}_{i=0} [\n    C^{f32,g}_{i} = A^{f32,g}_{i}+1.0;\n  ];\n}\n"
REC = {"IR": "L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i}*2.0;];", "inputs": [["A"], [[8]], ["torch.float32"]],
       "outputs": [["C"], [[8]]], "model": "scale"}


def jsonl(path, *records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


# -- convert ---------------------------------------------------------------------------

def test_convert_does_not_overwrite_a_record_of_the_same_name(tmp_path, capsys):
    other = dict(REC, IR=REC["IR"].replace("*2.0", "*3.0"))
    rec = jsonl(tmp_path / "r.jsonl", REC, other)
    assert main(["convert", str(rec), "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    first, second = (tmp_path / "out" / "scale.leir").read_text(), (tmp_path / "out" / "scale-2.leir").read_text()
    assert "*2.0" in first and "*3.0" in second
    assert "written by an earlier record" in err and "scale-2.leir" in err


def test_convert_refuses_a_record_that_does_not_check(tmp_path, capsys):
    bad = dict(REC, IR="L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i+1};];", model="oob")
    rec = jsonl(tmp_path / "r.jsonl", REC, bad)
    assert main(["convert", str(rec), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "error[E030]" in err and "r.jsonl:2" in err and "not converted" in err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["scale.leir"]


def test_convert_infers_the_shape_of_a_tensor_constant(tmp_path, capsys):
    # a causal mask: a Step-TP record lists constants by name only
    masked = {"IR": "L^{4}_{i=0}L^{4}_{j=0}[C^{f32,g}_{i,j} = A^{f32,g}_{i,j}*Mask^{f32,g}_{i,j};];",
              "inputs": [["A"], [[4, 4]], ["torch.float32"]], "outputs": [["C"], [[4, 4]]],
              "constants": [["Mask"]], "model": "masked"}
    rec = jsonl(tmp_path / "r.jsonl", masked)
    assert main(["convert", str(rec), "-o", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "masked.leir").read_text()
    assert "Mask: f32[4, 4]" in text
    assert main(["check", str(tmp_path / "out" / "masked.leir")]) == 0
    capsys.readouterr()


def test_convert_says_which_constant_has_no_shape(tmp_path, capsys):
    odd = {"IR": "L^{4}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i}*W^{f32,g}_{i*2};];",
           "inputs": [["A"], [[4]], ["torch.float32"]], "outputs": [["C"], [[4]]], "constants": [["W"]], "model": "odd"}
    rec = jsonl(tmp_path / "r.jsonl", odd)
    assert main(["convert", str(rec)]) == 1
    err = capsys.readouterr().err
    assert "constant 'W'" in err and "no shape" in err and "E016" not in err


# -- apply --trace -----------------------------------------------------------------------

def test_a_trace_from_another_kernel_warns_and_names_the_failing_step(tmp_path, capsys):
    (tmp_path / "scale.leir").write_text(SCALE)
    (tmp_path / "shift.leir").write_text(SHIFT)
    trace = tmp_path / "t.json"
    assert main(["apply", str(tmp_path / "scale.leir"), "loop_split", "--at", "N0.i", "--arg", "factor=4",
                 "--save-trace", str(trace), "-o", str(tmp_path / "s1.leir")]) == 0
    steps = json.loads(trace.read_text())
    assert steps["kernel"] == "scale" and steps["fingerprint"]
    # a second step, so that the failure has a number
    steps["steps"].append({"strategy": "loop_split", "args": {"loop": "N0.i", "factor": 4}})
    trace.write_text(json.dumps(steps))
    capsys.readouterr()
    assert main(["apply", str(tmp_path / "shift.leir"), "--trace", str(trace)]) == 1
    err = capsys.readouterr().err
    assert "recorded on kernel 'scale', replaying it on 'shift'" in err
    assert "step 1/2 (loop_split(" in err  # 4 does not divide 6


# -- build MODEL.py --------------------------------------------------------------------

MODEL = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.lin(x))


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8]
'''


@pytest.mark.parametrize("flags,msg", [(["--kernel", "k"], "--kernel does not apply"),
                                       (["--arch", "sm_80"], "--arch sm_80 applies to -t cuda only"),
                                       (["--emit", "tir"], "keep 'lib' in --emit"),
                                       (["-t", "cuda"], "built for -t llvm only")])
def test_build_model_py_rejects_flags_it_cannot_honour(tmp_path, capsys, flags, msg):
    pytest.importorskip("torch")
    (tmp_path / "m.py").write_text(MODEL)
    assert main(["build", str(tmp_path / "m.py"), "-o", str(tmp_path / "out")] + flags) == 2
    assert msg in capsys.readouterr().err


@pytest.mark.slow
def test_the_modelnew_wrapper_is_relative_and_loads_the_library_beside_it(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    a = tmp_path / "a"
    a.mkdir()
    (a / "m.py").write_text(MODEL)
    assert main(["build", str(a / "m.py"), "-o", str(a / "out"), "--emit", "tir,lib"]) == 0, capsys.readouterr().err
    assert (a / "out" / "m.tir.py").exists()  # --emit is honoured for a model too
    b = tmp_path / "b"
    shutil.copytree(a, b)
    shutil.rmtree(a)  # nothing may point back to where it was built
    spec = importlib.util.spec_from_file_location("m_leirc_moved", b / "out" / "m_leirc.py")
    sol = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = sol
    spec.loader.exec_module(sol)
    torch.manual_seed(42)
    new = sol.ModelNew(*sol.get_init_inputs())
    torch.manual_seed(42)
    ref = sol._ref.Model(*sol.get_init_inputs())
    x = sol.get_inputs()[0]
    np.testing.assert_allclose(new(x).numpy(), ref(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    from leirc.lower.runner import Library

    assert isinstance(sol._built(), Library) and sol._built().path.startswith(str(b / "out"))


# -- build output names, run with weights, one thread default ---------------------------

def test_two_files_with_a_same_named_kernel_do_not_overwrite_each_other(tmp_path, capsys):
    (tmp_path / "one.leir").write_text(SCALE)
    (tmp_path / "two.leir").write_text(SCALE.replace("*2.0", "*3.0"))
    (tmp_path / "scale.leir").write_text(SCALE)
    out = tmp_path / "out"
    for f in ("one", "two", "scale"):
        assert main(["build", str(tmp_path / f"{f}.leir"), "-o", str(out), "--emit", "tir"]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["one.scale.tir.py", "scale.tir.py", "two.scale.tir.py"]
    assert "3.0" in (out / "two.scale.tir.py").read_text() and "3.0" not in (out / "one.scale.tir.py").read_text()
    capsys.readouterr()


def test_run_combines_saved_weights_with_runtime_inputs(tmp_path, capsys):
    k = tmp_path / "lin.leir"
    k.write_text("\\kernel lin(X: f32[4], W: f32[4]) -> (Y: f32[4]) {\n  L^{4}_{i=0} [\n"
                 "    Y^{f32,g}_{i} = X^{f32,g}_{i}*W^{f32,g}_{i};\n  ];\n}\n")
    np.savez(tmp_path / "w.npz", W=np.full(4, 2.0, np.float32))
    np.savez(tmp_path / "x.npz", X=np.arange(4, dtype=np.float32))
    out = tmp_path / "y.npz"
    assert main(["run", str(k), "--inputs", str(tmp_path / "w.npz"), "--inputs", str(tmp_path / "x.npz"),
                 "--out", str(out), "--threads", "1"]) == 0
    with np.load(out) as z:
        np.testing.assert_array_equal(z["Y"], [0.0, 2.0, 4.0, 6.0])
    # the weights alone: the runtime input is drawn, and the command says so
    assert main(["run", str(k), "--inputs", str(tmp_path / "w.npz"), "--threads", "1"]) == 0
    assert "input(s) X drawn at random (seed 0)" in capsys.readouterr().err
    # an array that is no input of the kernel is a mistake (a wrong file), not something to ignore
    np.savez(tmp_path / "bad.npz", Q=np.zeros(4, np.float32))
    assert main(["run", str(k), "--inputs", str(tmp_path / "bad.npz")]) == 2
    assert "not inputs of kernel 'lin'" in capsys.readouterr().err


def test_one_thread_default_for_every_command():
    from leirc.cli.main import build_parser

    ap = build_parser()
    for argv in (["run", "k.leir"], ["bench", "k.leir"], ["build", "k.leir"], ["verify", "k.leir"],
                 ["apply", "k.leir", "x"]):
        assert ap.parse_args(argv).threads == DEFAULT_THREADS, argv


def test_strategies_shows_a_loop_order_as_one_value(tmp_path, capsys):
    k = tmp_path / "mm.leir"
    k.write_text("\\kernel mm(A: f32[4, 4], B: f32[4, 4]) -> (C: f32[4, 4]) {\n  L^{4}_{i=0} L^{4}_{j=0} "
                 "L^{4}_{k=0} [\n    C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j};\n  ];\n}\n")
    assert main(["strategies", str(k), "--only", "loop_reorder"]) == 0
    out = capsys.readouterr().out
    assert "order∈{" in out and " | " in out and "j,i,k,k" not in out


def test_cuda_build_of_a_kernel_without_b_loop_warns(tmp_path, capsys):
    (tmp_path / "scale.leir").write_text(SCALE)
    assert main(["build", str(tmp_path / "scale.leir"), "-t", "cuda", "--emit", "cuda", "-o", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "warning[W051]" in err and "single thread" in err
