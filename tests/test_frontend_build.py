"""The compiled path of the PyTorch frontend: verification with the LLVM target, and
`leirc build MODEL.py` (import -> compile -> verify -> files, including a KernelBench-style
ModelNew wrapper that runs the compiled kernel)."""

from __future__ import annotations

import importlib.util
import json
import re
import textwrap

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from leirc.frontend import import_model, verify_against_torch  # noqa: E402

MODEL = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, c_in, c_out):
            super().__init__()
            self.conv = nn.Conv2d(c_in, c_out, 3, padding=1)
            self.gn = nn.GroupNorm(2, c_out)

        def forward(self, x):
            y = torch.relu(self.gn(self.conv(x)))
            return torch.softmax(y.flatten(1), dim=1)

    def get_inputs():
        return [torch.rand(2, 3, 8, 8)]

    def get_init_inputs():
        return [3, 4]
''')


@pytest.fixture
def model_file(tmp_path):
    p = tmp_path / "small_model.py"
    p.write_text(MODEL)
    return p


def test_verify_compiled_llvm(model_file):
    res = import_model(str(model_file))
    v = verify_against_torch(str(model_file), res.text, res.weights, seeds=(0,), target="llvm")
    assert v.ok, v.summary()
    assert v.target == "llvm"


def test_leirc_build_model_py(model_file, tmp_path, monkeypatch, capsys):
    from leirc.cli.main import main

    monkeypatch.setenv("LEIRC_BUILD_TIME", "0")
    out = tmp_path / "out"
    rc = main(["build", str(model_file), "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "verified against PyTorch on 3 seeds (llvm" in err
    for suffix in (".leir", ".npz", "_leirc.py", ".report.json"):
        assert (out / f"small_model{suffix}").exists(), suffix
    rep = json.loads((out / "small_model.report.json").read_text())
    assert rep["verified"] is True and rep["imported"] and rep["built"]

    # the ModelNew wrapper drops into a KernelBench-style harness: same constructor, same seed, same result
    spec = importlib.util.spec_from_file_location("small_model_leirc", out / "small_model_leirc.py")
    sol = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sol)
    init = sol.get_init_inputs()
    torch.manual_seed(42)
    ref = sol._ref.Model(*init)
    torch.manual_seed(42)
    new = sol.ModelNew(*init)
    torch.manual_seed(7)
    x = sol.get_inputs()
    with torch.no_grad():
        a, b = ref(*x), new(*x)
    assert a.shape == b.shape and a.dtype == b.dtype
    assert torch.allclose(a, b, rtol=1e-4, atol=1e-4 * a.abs().max().item())


def test_leirc_build_model_py_usage_errors(model_file, tmp_path, capsys):
    from leirc.cli.main import main

    assert main(["build", str(model_file), "-t", "cuda", "-o", str(tmp_path)]) == 2
    assert "llvm only" in capsys.readouterr().err
    assert main(["build", str(tmp_path / "missing.py"), "-o", str(tmp_path)]) == 2
    assert "no such file" in capsys.readouterr().err


GEMM_MODEL = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, a, b):
            return torch.relu(torch.matmul(a, b))

    def get_inputs():
        return [torch.rand(64, 48), torch.rand(48, 64)]

    def get_init_inputs():
        return []
''')


def test_leirc_build_model_py_at_O2_blocks_the_gemm_and_verifies(tmp_path, monkeypatch, capsys):
    from leirc.cli.main import main

    src = tmp_path / "gemm_model.py"
    src.write_text(GEMM_MODEL)
    monkeypatch.setenv("LEIRC_BUILD_TIME", "0")
    out = tmp_path / "out"
    rc = main(["build", str(src), "-O", "2", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "verified against PyTorch" in err
    o2 = (out / "gemm_model.O2.leir").read_text()
    # register blocking reached the imported GEMM: a private accumulator tile inside the nest
    assert "\\alloc" in o2 and ",l}" in o2
    assert json.loads((out / "gemm_model.report.json").read_text())["verified"] is True


@pytest.mark.slow
def test_build_model_py_time_prints_the_module_vs_module_figure(model_file, tmp_path, capsys):
    """`--time` prints KernelBench's figure (Model(*inputs) vs ModelNew(*inputs), median
    and spread, the KernelBench allclose check) and keeps the kernel-only figure, labelled
    as such. The numbers themselves are not asserted (a loaded machine gives any)."""
    from leirc.cli.main import main

    out = tmp_path / "out"
    rc = main(["build", str(model_file), "-o", str(out), "--time"])
    err = capsys.readouterr().err
    assert rc == 0, err
    line = next(ln for ln in err.splitlines() if "module vs module as KernelBench times it" in ln)
    assert "eager Model" in line and "leirc ModelNew" in line and "interleaved rounds" in line
    assert "kernel only (pre-made inputs and outputs" in line
    assert re.search(r"KernelBench check \w+: 5/5 seeded inputs allclose\(atol=rtol=0\.01\)", err), err
    rep = json.loads((out / "small_model.report.json").read_text())
    assert rep["eager_ms"] > 0 and rep["leirc_ms"] > 0 and rep["speedup_eager"] > 0
