"""The driver (leirc/driver.py): one list of passes for .leir and .py inputs, options as
values, -O1 on PyTorch models, a ModelNew that runs the optimized kernel."""

from __future__ import annotations

import importlib.util
import json
import textwrap

import pytest

from leirc.driver import PASS_NAMES, BuildOptions, PipelineError, new_build, run_pipeline

pytest.importorskip("tvm")

SCALE = r"""\kernel scale(A: f32[4, 64]) -> (Y: f32[4, 64]) {
  L^{4}_{i=0} L^{64}_{j=0} [ Y^{f32,g}_{i,j} = A^{f32,g}_{i,j} * 2.0 + 1.0; ];
}
"""


def test_pass_list_is_the_documented_one():
    assert PASS_NAMES == ["load", "check", "optimize", "lower", "build", "nvcc", "verify", "time"]


def test_every_pass_can_be_printed(capsys):
    import io

    out = io.StringIO()
    b = run_pipeline(new_build(SCALE, file="k.leir", options=BuildOptions(opt="1", time=True)),
                     print_after=PASS_NAMES, out=out)
    text = out.getvalue()
    for name in PASS_NAMES:
        assert f"// ===== after {name} =====" in text
    j = b.job("scale")
    assert j.optimized and j.verification.equal
    assert "leirc" in j.timing and j.timing["leirc"] > 0
    # the -O1 result is a different program from the original, and the trace records it
    assert j.current.kernel != j.original.kernel and any(s.name == "loop_parallelization" for s in j.steps)


def test_o0_does_not_verify_unless_asked():
    b = run_pipeline(new_build(SCALE, file="k.leir"), until="verify")
    assert b.job("scale").verification is None
    b = run_pipeline(new_build(SCALE, file="k.leir", options=BuildOptions(verify=True)), until="verify")
    assert b.job("scale").verification.equal


def test_check_errors_stop_at_check():
    with pytest.raises(PipelineError) as ei:
        run_pipeline(new_build(SCALE.replace("A^{f32,g}_{i,j} *", "Q^{f32,g}_{i,j} *"), file="k.leir"))
    assert ei.value.pass_name == "check"


MODEL = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.lin = nn.Linear(n, n)

        def forward(self, x):
            return torch.softmax(torch.relu(self.lin(x)), dim=1)

    def get_inputs():
        return [torch.rand(8, 32)]

    def get_init_inputs():
        return [32]
''')


@pytest.fixture
def model_file(tmp_path):
    pytest.importorskip("torch")
    p = tmp_path / "lin_softmax.py"
    p.write_text(MODEL)
    return p


def test_build_model_py_O1_writes_a_modelnew_running_the_optimized_kernel(model_file, tmp_path, capsys):
    import torch

    from leirc.cli.main import main

    out = tmp_path / "out"
    rc = main(["build", str(model_file), "-O1", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "-O1 model:" in err and "verified against PyTorch on 3 seeds (llvm" in err
    optimized = (out / "lin_softmax.O1.leir").read_text()
    trace = json.loads((out / "lin_softmax.trace.json").read_text())
    assert trace["steps"], "the optimizer applied no step"
    rep = json.loads((out / "lin_softmax.report.json").read_text())
    assert rep["verified"] is True and rep["optimizer"] == "-O1" and rep["steps"]

    spec = importlib.util.spec_from_file_location("lin_softmax_leirc", out / "lin_softmax_leirc.py")
    sol = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sol)
    assert sol.LEIR.strip() == optimized.strip()  # the wrapper runs the optimized program
    assert sol.LEIR.strip() != (out / "lin_softmax.leir").read_text().strip()
    init = sol.get_init_inputs()
    torch.manual_seed(42)
    ref = sol._ref.Model(*init)
    torch.manual_seed(42)
    new = sol.ModelNew(*init)
    torch.manual_seed(3)
    x = sol.get_inputs()
    with torch.no_grad():
        a, b = ref(*x), new(*x)
    assert torch.allclose(a, b, rtol=1e-4, atol=1e-5)


def test_model_that_cannot_be_imported_is_a_clear_error(tmp_path, capsys):
    pytest.importorskip("torch")
    from leirc.cli.main import main

    p = tmp_path / "bad.py"
    p.write_text(MODEL.replace("torch.relu(self.lin(x))", "torch.linalg.svd(self.lin(x))[0]"))
    rc = main(["build", str(p), "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.startswith("leirc: error:") and "Traceback" not in err


def test_py_verify_pass_goes_through_the_evaluator_with_the_module_as_a_sandboxed_oracle(model_file):
    b = run_pipeline(new_build(str(model_file), options=BuildOptions(opt="0")))
    j = b.jobs[0]
    rep = j.verification
    assert rep.equal and rep.oracle == "torch" and rep.runs == 3
    assert "f32 rtol 0.0001, normwise 1e-05" in rep.tolerance
    oracle = b.model.oracle
    assert oracle.stats["worker_runs"] == 1 and oracle.last_pid != __import__("os").getpid()
    assert any("verified against PyTorch on 3 seeds (llvm" in n for n in b.notes)


def test_a_module_failing_in_the_oracle_is_a_clear_verify_error(tmp_path, capsys):
    pytest.importorskip("torch")
    from leirc.cli.main import main

    p = tmp_path / "cursed.py"
    # the import draws the inputs of seed 0; the verify pass's worker also asks for seed 2
    src = MODEL.replace("    return [torch.rand(8, 32)]", "    if torch.initial_seed() == 2:\n"
                        "        raise RuntimeError('seed 2 is cursed')\n    return [torch.rand(8, 32)]")
    assert "cursed" in src
    p.write_text(src)
    line = next(k for k, l in enumerate(p.read_text().splitlines(), 1) if "cursed" in l)
    rc = main(["build", str(p), "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "the PyTorch module failed (oracle raised:" in err and "seed 2 is cursed" in err
    assert f"cursed.py:{line}:" in err and "Traceback" not in err
