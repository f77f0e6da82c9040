"""benchmarks/kb_harness.py and the KernelBench-conformant protocol under it
(leirc.frontend.bench.time_modules, kb_correctness): it runs and records what it
measured. No timing is asserted (a loaded CI machine gives any number)."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import textwrap

import pytest

torch = pytest.importorskip("torch")

ROOT = pathlib.Path(__file__).resolve().parents[1]

TINY = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.scale = nn.Parameter(torch.rand(n))

        def forward(self, x):
            return torch.relu(x * self.scale)

    def get_inputs():
        return [torch.rand(4, 32)]

    def get_init_inputs():
        return [32]
''')


class _Scale(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * self.k


def test_time_modules_interleaves_rounds_and_records_the_load():
    from leirc.frontend.bench import time_modules

    sets = [[torch.rand(8, 8)] for _ in range(3)]
    calls = []

    class Counting(_Scale):
        def forward(self, x):
            calls.append(self.k)
            return super().forward(x)

    mt = time_modules({"a": Counting(1.0), "b": Counting(2.0)}, sets, rounds=3, warmup=1, min_block_ms=0.0,
                      threads=1)
    assert mt.ok and set(mt.sides) == {"a", "b"}
    for st in mt.sides.values():
        assert len(st.runs) == 3 and st.min_ms <= st.median_ms <= st.max_ms and st.number == 1
    # warm-up and calibration per side, then one call per side per round, order rotating
    assert calls[4:] == [1.0, 2.0, 2.0, 1.0, 1.0, 2.0]
    d = mt.as_dict()
    assert d["threads_torch"] == 1 and "load_before" in d and d["sides"]["a"]["runs"]
    flushed = time_modules({"a": _Scale(1.0)}, sets, rounds=2, warmup=1, l2_flush_mb=1, min_block_ms=50.0)
    assert flushed.ok and flushed.sides["a"].number == 1  # with a flush each call is timed alone


def test_time_modules_reports_a_failing_module():
    from leirc.frontend.bench import time_modules

    class Broken(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("boom")

    mt = time_modules({"x": Broken()}, [[torch.rand(2)]], rounds=1, warmup=1)
    assert not mt.ok and "boom" in mt.error


def test_kb_correctness_is_kernelbench_allclose_on_seeded_inputs():
    from leirc.frontend.bench import kb_correctness, kb_trial_seeds

    seeds = kb_trial_seeds(5)
    assert seeds == kb_trial_seeds(5) and len(set(seeds)) == 5  # derived from 42, as KernelBench does

    def get_inputs(seed):
        g = torch.Generator().manual_seed(seed)
        return [torch.rand(16, generator=g)]

    ok = kb_correctness(_Scale(1.0), _Scale(1.0 + 1e-3), get_inputs)
    assert ok["ok"] and ok["passed"] == 5 and 0 < ok["max_abs_diff"] < 1e-2
    bad = kb_correctness(_Scale(1.0), _Scale(1.1), get_inputs)
    assert not bad["ok"] and bad["passed"] == 0 and "allclose" in bad["error"]

    class Wrong(torch.nn.Module):
        def forward(self, x):
            return x[:-1]

    shape = kb_correctness(_Scale(1.0), Wrong(), get_inputs, trials=2)
    assert not shape["ok"] and "shape" in shape["error"]


@pytest.mark.slow
def test_kb_harness_runs_one_tiny_module_and_writes_its_json(tmp_path, capsys):
    pytest.importorskip("tvm")
    spec = importlib.util.spec_from_file_location("kb_harness_under_test", ROOT / "benchmarks" / "kb_harness.py")
    kb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kb)
    model = tmp_path / "tiny_scale.py"
    model.write_text(TINY)
    out_json, out_md = tmp_path / "kb.json", tmp_path / "kb.md"
    rc = kb.main(["--model", str(model), "-O", "0", "--rounds", "2", "--warmup", "1", "--min-block-ms", "1",
                  "--pause-ms", "0", "--kb-trials", "2", "--overhead", "--out", str(tmp_path / "builds"),
                  "--json", str(out_json), "--md", str(out_md)])
    assert rc == 0
    doc = json.loads(out_json.read_text())
    (row,) = doc["rows"]
    assert row.get("error") is None, row.get("error")
    assert row["kb_check"]["ok"] and row["kb_check"]["passed"] == 2 and row["kb_check"]["tol"] == 1e-2
    assert row["verified"] is True  # leirc's own verification, from the build's report
    sides = row["timing"]["sides"]
    assert set(sides) == {"eager", "leirc", "kernel", "kernel_alloc"} and all(len(s["runs"]) == 2 for s in sides.values())
    assert row["timing"]["threads_torch"] == 2 and row["timing"]["threads_tvm"] == 2
    assert row["eager_ms"] > 0 and row["leirc_ms"] > 0 and row["overhead_us"] is not None
    assert row["fresh_output_us"] is not None
    assert doc["summary"]["rows"] == 1 and doc["summary"]["kb_correct"] == 1
    assert doc["meta"]["versions"]["torch"] and doc["meta"]["load_start"] is not None
    md = out_md.read_text()
    assert "| tiny_scale | ✓ 2/2 | ✓ |" in md and "Command: `" in md
