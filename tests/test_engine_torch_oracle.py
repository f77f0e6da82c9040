"""The PyTorch module as an oracle of the Evaluator (leirc/engine/oracles.py): run in a
worker process with a timeout, its reference outputs cached per (model, weights, seed), the
comparison of ``leirc verify`` with the tolerance of the output's dtype."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from leirc.engine.evaluate import Evaluator  # noqa: E402
from leirc.engine.oracles import OracleError, TorchOracle, check_against_module, summary, verify_model  # noqa: E402
from leirc.frontend import import_model, verify_against_torch  # noqa: E402
from leirc.lang.load import load_kernel  # noqa: E402
from leirc.verify import interp_runner  # noqa: E402

WORKLOADS = Path(__file__).resolve().parents[1] / "benchmarks" / "workloads"

SMALL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, 8)

    def forward(self, x):
        return torch.softmax(self.lin(x), dim=1)


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [16]
"""


def _write(tmp_path, name: str, body: str) -> str:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return str(p)


def _variant(tmp_path, name: str, forward_body: str) -> str:
    """SMALL with another forward (same signature, so the import of SMALL fits it)."""
    src = SMALL.replace("        return torch.softmax(self.lin(x), dim=1)\n", textwrap.indent(
        textwrap.dedent(forward_body), " " * 8))
    return _write(tmp_path, name, src)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("small")
    path = _write(d, "small.py", SMALL)
    return path, import_model(path)


def test_the_module_runs_in_a_worker_process_and_gives_the_in_process_outputs(small):
    path, res = small
    oracle = TorchOracle.from_import(path, res, timeout=120)
    refs = oracle.references([0, 1])
    assert oracle.last_pid is not None and oracle.last_pid != os.getpid()
    assert oracle.stats == {"worker_runs": 1, "seed_runs": 2}
    # the same inputs and outputs as running the module here (KernelBench seeding)
    from leirc.frontend import load_model
    from leirc.frontend.verify import torch_reference

    loaded = load_model(path)
    for seed in (0, 1):
        inputs, outs = torch_reference(loaded, seed)
        assert np.array_equal(refs[seed][0][0], inputs[0].numpy())
        assert np.allclose(refs[seed][1][0], outs[0], rtol=0, atol=1e-6)


def test_a_hanging_module_times_out_and_its_process_is_gone(tmp_path, small):
    _, res = small
    pidfile = tmp_path / "pid"
    path = _variant(tmp_path, "hang.py", f"""
        import os, time
        open({str(pidfile)!r}, "w").write(str(os.getpid()))
        while True:
            time.sleep(0.05)
        """)
    oracle = TorchOracle.from_import(path, res, timeout=2)
    with pytest.raises(OracleError) as ei:
        oracle.references([0])
    assert ei.value.kind == "timeout"
    assert "did not finish" in str(ei.value) and "hang.py" in str(ei.value)
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_raising_module_reports_its_message_at_the_user_frame(tmp_path, small):
    _, res = small
    path = _variant(tmp_path, "boom.py", """
        y = self.lin(x)
        raise ValueError(f"boom {y.shape[0]}")
        """)
    line = next(k for k, l in enumerate(Path(path).read_text().splitlines(), 1) if "raise ValueError" in l)
    oracle = TorchOracle.from_import(path, res, timeout=120)
    with pytest.raises(OracleError) as ei:
        oracle.references([0])
    assert ei.value.kind == "raised"
    msg = str(ei.value)
    assert f"{path}:{line}: in forward" in msg and "ValueError: boom 4" in msg


@pytest.mark.slow
def test_a_crashing_module_is_a_crash_with_the_signal(tmp_path, small):
    _, res = small
    path = _variant(tmp_path, "crash.py", """
        import os, signal
        os.kill(os.getpid(), signal.SIGSEGV)
        """)
    with pytest.raises(OracleError) as ei:
        TorchOracle.from_import(path, res, timeout=120).references([0])
    assert ei.value.kind == "crash" and "SIGSEGV" in str(ei.value)


def test_the_evaluator_reports_an_oracle_failure_as_its_own_kind_and_does_not_cache_it(tmp_path, small):
    _, res = small
    path = _variant(tmp_path, "boom2.py", 'raise RuntimeError("no")\n')
    oracle = TorchOracle.from_import(path, res, timeout=120)
    with Evaluator("llvm", seeds=(0,), time=False, prestart=False, cache_dir=str(tmp_path / "c")) as ev:
        e = ev.evaluate(res.text, oracle=oracle)
        assert not e.ok and e.error_kind == "oracle" and e.oracle == "torch"
        assert "RuntimeError: no" in e.error
        assert ev.cache is not None and len(ev.cache) == 0


def test_reference_outputs_are_computed_once_and_cached_in_memory_and_on_disk(tmp_path, small):
    path, res = small
    cache = str(tmp_path / "refs")
    oracle = TorchOracle.from_import(path, res, timeout=120, cache_dir=cache)
    evals = str(tmp_path / "evals")
    with Evaluator("llvm", seeds=(0, 1), time=False, prestart=False, cache_dir=evals) as ev:
        first = ev.evaluate(res.text, oracle=oracle)
        again = ev.evaluate(res.text, oracle=oracle, cache=False)  # evaluated again, not served
    assert first.ok and again.ok, (first.error, again.error)
    assert first.oracle == again.oracle == "torch" and not again.cached
    assert oracle.stats["worker_runs"] == 1 and oracle.stats["seed_runs"] == 2
    assert oracle.refs.hits >= 2
    # the evaluation itself is on disk, keyed by the oracle: served without a build or a run
    with Evaluator("llvm", seeds=(0, 1), time=False, prestart=False, cache_dir=evals) as ev2:
        served = ev2.evaluate(res.text, oracle=oracle)
        assert served.cached and served.ok and served.oracle == "torch" and ev2.stats["sessions"] == 0
        # the same candidate against the interpreter is another evaluation
        assert ev2.key(load_kernel(res.text).kernel, None, oracle="torch:" + oracle.key()) != \
            ev2.key(load_kernel(res.text).kernel, load_kernel(res.text).kernel)
    assert oracle.stats["worker_runs"] == 1
    # a new oracle (another process, say) finds the runs on disk: no torch run at all
    other = TorchOracle.from_import(path, res, timeout=120, cache_dir=cache)
    got = other.references([0, 1])
    assert other.stats["worker_runs"] == 0 and other.refs.disk_hits == 2
    assert np.array_equal(got[1][1][0], oracle.references([1])[1][1][0])
    # another model file is another key
    changed = _write(tmp_path, "small2.py", SMALL + "\n# a comment changes the file\n")
    assert TorchOracle.from_import(changed, res, cache_dir=cache).key() != oracle.key()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["l1_019_relu", "l1_023_softmax", "l1_040_layernorm", "l1_094_mse_loss"])
def test_verdicts_equal_the_in_process_path_on_workloads(name):
    path = str(WORKLOADS / f"{name}.py")
    res = import_model(path)
    k = load_kernel(res.text).kernel
    # a wrong kernel too: the output scaled by 1.001 in its last nest
    out = k.outputs[0].name
    wrong = re.sub(rf"(\n\s*{out}\^\{{f32,g\}}(?:_\{{[^}}]*\}})? = )([^;]*);", r"\1(\2)*1.001;", res.text, count=1)
    assert wrong != res.text
    oracle = TorchOracle.from_import(path, res, timeout=300)
    for text in (res.text, wrong):
        old = verify_against_torch(path, text, res.weights, seeds=(0, 1, 2))
        new = verify_model(path, text, res, seeds=(0, 1, 2), oracle=oracle)
        assert old.ok == new.equal, (old.summary(), summary(new))
    assert oracle.stats["worker_runs"] == 1  # both kernels against one set of reference runs


F64_MODEL = """
import torch
import torch.nn as nn

N = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(N).double()

    def forward(self, x):
        return torch.softmax(self.ln(x), dim=1) + x.mean(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(2, N, dtype=torch.float64) * 3 + 1]


def get_init_inputs():
    return []
"""


def _as_f32_accumulators(text: str) -> str:
    """The kernel with every intermediate (not X, Y or the weights) in f32: what the
    frontend emitted before it kept f64 statistics in f64."""
    return re.sub(r"\b(?!X\b|Y\b|Ln_weight\b|Ln_bias\b)([A-Z]\w*)\^\{f64", r"\1^{f32", text)


def test_f64_model_keeps_f64_statistics_and_verifies_with_the_f64_tolerance(tmp_path):
    path = _write(tmp_path, "f64_model.py", F64_MODEL)
    res = import_model(path)
    assert "f32" not in res.text.split("\\kernel", 1)[1]  # accumulators and statistics stay f64
    oracle = TorchOracle.from_import(path, res, timeout=300)
    cr = load_kernel(res.text)
    rep = check_against_module(oracle, res.text, cr.kernel, interp_runner, seeds=(0, 1), target="interp", timeout=300)
    assert rep.equal, summary(rep)
    assert "f64 rtol 1e-09, normwise 1e-12" in rep.tolerance and rep.oracle == "torch"
    # the check can fail: the same kernel accumulating in f32 is caught by the f64 tolerance ...
    bad = _as_f32_accumulators(res.text)
    assert "Ln_sum^{f32,g}" in bad and "Mean_sum^{f32,g}" in bad
    bad_cr = load_kernel(bad)
    rep32 = check_against_module(oracle, bad, bad_cr.kernel, interp_runner, seeds=(0,), target="interp", timeout=300)
    assert not rep32.equal and "normwise relative error" in " ".join(rep32.failures)
    # ... that f32's tolerance would have let through
    loose = check_against_module(oracle, bad, bad_cr.kernel, interp_runner, seeds=(0,), target="interp", timeout=300,
                                 rtol=1e-4, norm_tol=1e-5)
    assert loose.equal, summary(loose)
    # the in-process frontend verifier (leirc import --verify) applies the same dtype rule
    assert verify_against_torch(path, res.text, res.weights, seeds=(0,)).ok
    assert not verify_against_torch(path, bad, res.weights, seeds=(0,)).ok
    assert oracle.stats["worker_runs"] == 1


def test_a_prefetch_computes_the_references_in_the_background_once(small):
    path, res = small
    oracle = TorchOracle.from_import(path, res, timeout=120)
    oracle.prefetch([0, 1])
    got = oracle.references([0, 1])  # waits for the prefetch's worker, does not start another
    assert set(got) == {0, 1} and oracle.stats["worker_runs"] == 1


def test_a_failed_prefetch_is_raised_not_run_again(tmp_path, small):
    _, res = small
    path = _variant(tmp_path, "boom3.py", 'raise RuntimeError("prefetched failure")\n')
    oracle = TorchOracle.from_import(path, res, timeout=120)
    oracle.prefetch([0])
    assert oracle.wait_prefetch(300)
    with pytest.raises(OracleError, match="prefetched failure"):
        oracle.references([0])
    assert oracle.stats["worker_runs"] == 1
