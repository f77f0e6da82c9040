"""``leirc build``, ``leirc run`` and ``leirc bench`` (called through ``leirc.cli.main.main``)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from leirc.cli.main import main

SRC = r"""\kernel scale(A: f32[4, 8]) -> (Y: f32[4, 8]) {
  B^{4}_{tx=0} L^{8}_{j=0} [ Y^{f32,g}_{tx,j} = A^{f32,g}_{tx,j}*2.0 + 1.0; ];
}
"""

TWO = SRC + r"""\kernel shift(A: f32[4]) -> (Y: f32[4]) { L^{4}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{i} - 1.0; ]; }
"""


@pytest.fixture
def src(tmp_path):
    p = tmp_path / "k.leir"
    p.write_text(SRC)
    return p


def test_build_llvm_writes_tir_and_library(src, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["build", str(src), "-o", str(out)]) == 0
    tir = (out / "k.scale.tir.py").read_text()
    assert "def scale(" in tir and "T.Buffer((4, 8)" in tir
    assert (out / "k.scale.so").stat().st_size > 0
    assert not (out / "k.scale.cu").exists()


def test_build_cuda_writes_source_and_checks_it(src, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["build", str(src), "-t", "cuda", "-o", str(out), "--emit", "tir,cuda", "--arch", "sm_90"]) == 0
    cu = (out / "k.scale.cu").read_text()
    assert "__global__" in cu and "threadIdx.x" in cu
    assert not (out / "k.scale.so").exists()
    err = capsys.readouterr().err
    if shutil.which("nvcc") is None:
        assert "nvcc not found" in err


def test_print_after_passes(src, tmp_path, capsys):
    assert main(["build", str(src), "-o", str(tmp_path), "--emit", "tir", "--print-after=parse,lower"]) == 0
    out = capsys.readouterr().out
    assert "after parse" in out and "\\kernel scale" in out
    assert "after lower" in out and "@T.prim_func" in out and "for tx, j in T.grid(4, 8)" in out


def test_print_after_build_cuda(src, tmp_path, capsys):
    assert main(["build", str(src), "-t", "cuda", "-o", str(tmp_path), "--emit", "cuda", "--print-after", "build"]) == 0
    assert "__global__" in capsys.readouterr().out


def test_opt_levels(src, tmp_path, capsys):
    assert main(["build", str(src), "-O0", "-o", str(tmp_path), "--emit", "tir"]) == 0
    assert main(["build", str(src), "-O3", "-o", str(tmp_path)]) == 2
    assert "choose -O0 or -O1 or -O2 or -Osearch" in capsys.readouterr().err


@pytest.mark.parametrize("argv,code", [
    (["--emit", "bogus"], 2),
    (["--emit", "cuda"], 2),
    (["--print-after", "bogus"], 2),
    (["--kernel", "nope"], 2),
])
def test_build_usage_errors(src, tmp_path, argv, code, capsys):
    assert main(["build", str(src), "-o", str(tmp_path)] + argv) == code


def test_build_missing_file_is_io_error(tmp_path):
    assert main(["build", str(tmp_path / "none.leir")]) == 2


def test_build_reports_check_errors_with_exit_1(tmp_path, capsys):
    p = tmp_path / "bad.leir"
    p.write_text(SRC.replace("A^{f32,g}_{tx,j}", "A^{f32,g}_{tx,q}"))
    assert main(["build", str(p), "-o", str(tmp_path)]) == 1
    assert "E012" in capsys.readouterr().err


def test_build_reports_lowering_errors_as_diagnostics(tmp_path, capsys):
    p = tmp_path / "neg.leir"
    p.write_text("\\kernel neg(M: bool[4]) -> (Y: bool[4]) {\n  L^{4}_{i=0} [ Y^{bool,g}_{i} = -M^{bool,g}_{i}; ];\n}\n")
    assert main(["build", str(p), "-o", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "error[E050]" in err and f"{p}:2:" in err and "Traceback" not in err


def test_build_selects_kernel(tmp_path):
    p = tmp_path / "two.leir"
    p.write_text(TWO)
    assert main(["build", str(p), "-o", str(tmp_path), "--emit", "tir", "--kernel", "shift"]) == 0
    assert (tmp_path / "two.shift.tir.py").exists() and not (tmp_path / "two.scale.tir.py").exists()
    assert main(["build", str(p), "-o", str(tmp_path / "all"), "--emit", "tir"]) == 0
    assert (tmp_path / "all" / "two.scale.tir.py").exists() and (tmp_path / "all" / "two.shift.tir.py").exists()


def test_run_with_inputs_and_out(src, tmp_path, capsys):
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    np.savez(tmp_path / "in.npz", A=a)
    out = tmp_path / "out.npz"
    assert main(["run", str(src), "--inputs", str(tmp_path / "in.npz"), "--out", str(out), "--threads", "1"]) == 0
    with np.load(out) as z:
        np.testing.assert_allclose(z["Y"], a * 2 + 1)
    text = capsys.readouterr().out
    assert "Y: f32[4, 8]" in text and "max 63" in text and "1 thread" in text


def test_run_random_inputs_and_errors(src, tmp_path, capsys):
    assert main(["run", str(src), "--seed", "3"]) == 0
    assert "mean" in capsys.readouterr().out
    np.savez(tmp_path / "bad.npz", B=np.zeros(3))
    assert main(["run", str(src), "--inputs", str(tmp_path / "bad.npz")]) == 2
    p = tmp_path / "two.leir"
    p.write_text(TWO)
    assert main(["run", str(p)]) == 2
    assert main(["run", str(p), "--kernel", "shift"]) == 0


def test_run_reports_crashes_with_exit_1(tmp_path, capsys):
    p = tmp_path / "g.leir"
    p.write_text(r"\kernel g(A: f32[4], C: i64[4]) -> (Y: f32[4]) { L^{4}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{C^{i64,g}_{i}}; ]; }")
    np.savez(tmp_path / "in.npz", A=np.zeros(4, np.float32), C=np.array([0, 1, 2, 10**13]))
    assert main(["run", str(p), "--inputs", str(tmp_path / "in.npz")]) == 1
    err = capsys.readouterr().err
    assert "crash" in err and "'g'" in err


def test_bench_text_and_json(src, capsys):
    assert main(["bench", str(src), "--repeat", "3", "--threads", "1", "--min-repeat-ms", "1", "--sets", "2"]) == 0
    out = capsys.readouterr().out
    assert "median" in out and "threads 1" in out and "target llvm" in out
    assert main(["bench", str(src), "--repeat", "2", "--threads", "2", "--min-repeat-ms", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["ok"] and d["threads"] == 2 and len(d["runs_ms"]) == 2 and d["median_ms"] > 0 and d["target"] == "llvm"
