"""The sandboxed runner: kernels run in a worker process; crashes, hangs and runaway
allocations come back as error results and never take the test process down.

Crashes are produced by real kernels where possible (an out-of-range data-dependent
subscript segfaults; a huge intermediate exceeds the address-space limit) and otherwise
through the worker's test hook ``LEIRC_WORKER_TEST_HOOK`` (abort, hang, allocation loop).
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from leirc.lower.runner import RunResult, TimingResult, make_inputs, run_kernel, time_kernel, zero_outputs

GATHER = r"""\kernel gather(A: f32[10], C: i64[4]) -> (Y: f32[4]) {
  L^{4}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{C^{i64,g}_{i}}*2.0; ];
}"""


def _gather_inputs(c):
    return {"A": np.arange(10, dtype=np.float32), "C": np.asarray(c, dtype=np.int64)}


def test_run_ok_returns_outputs_and_inputs_after():
    ins = _gather_inputs([9, 0, 3, 3])
    r = run_kernel(GATHER, ins, {"Y": np.full(4, np.nan, np.float32)})
    assert isinstance(r, RunResult)
    assert r.ok, r.error
    assert r.outputs["Y"].tolist() == [18.0, 0.0, 6.0, 6.0]
    assert set(r.inputs_after) == {"A", "C"}
    np.testing.assert_array_equal(r.inputs_after["A"], ins["A"])
    assert r.threads is not None and r.build_s is not None


def test_threads_are_passed_to_the_worker():
    r = run_kernel(GATHER, _gather_inputs([1, 2, 3, 4]), {"Y": np.zeros(4, np.float32)}, threads=1)
    assert r.ok and r.threads == 1


def test_build_errors_are_reported_as_build():
    bad = GATHER.replace("C^{i64,g}_{i}", "q")
    r = run_kernel(bad, _gather_inputs([1, 2, 3, 4]), {"Y": np.zeros(4, np.float32)}, file="bad.leir")
    assert not r.ok and r.error_kind == "build"
    assert "E012" in r.error and "bad.leir" in r.error


def test_kernel_selection():
    two = GATHER + "\n" + GATHER.replace("gather", "other")
    r = run_kernel(two, _gather_inputs([1, 2, 3, 4]), {"Y": np.zeros(4, np.float32)})
    assert not r.ok and r.error_kind == "build" and "kernels" in r.error
    r = run_kernel(two, _gather_inputs([1, 2, 3, 4]), {"Y": np.zeros(4, np.float32)}, kernel="other")
    assert r.ok and r.outputs["Y"].tolist() == [2.0, 4.0, 6.0, 8.0]


def test_bad_arrays_are_runtime_errors():
    r = run_kernel(GATHER, {"A": np.zeros(11, np.float32), "C": np.zeros(4, np.int64)}, {"Y": np.zeros(4, np.float32)})
    assert not r.ok and r.error_kind == "runtime" and "shape" in r.error
    r = run_kernel(GATHER, {"A": np.zeros(10, np.float64), "C": np.zeros(4, np.int64)}, {"Y": np.zeros(4, np.float32)})
    assert not r.ok and r.error_kind == "runtime" and "dtype" in r.error


def test_segfaulting_kernel_is_a_crash_and_names_the_kernel():
    # an index far outside A: the compiled kernel reads unmapped memory
    r = run_kernel(GATHER, _gather_inputs([1, 2, 3, 10**13]), {"Y": np.zeros(4, np.float32)})
    assert not r.ok and r.error_kind == "crash"
    assert "gather" in r.error and "SIGSEGV" in r.error
    # the parent is fine and can run again
    assert run_kernel(GATHER, _gather_inputs([0, 0, 0, 0]), {"Y": np.zeros(4, np.float32)}).ok


@pytest.mark.parametrize("hook,kind,signame", [("abort", "crash", "SIGABRT"), ("segfault", "crash", "SIGSEGV"),
                                               ("alloc", "memory", None)])
def test_worker_hooks(monkeypatch, hook, kind, signame):
    monkeypatch.setenv("LEIRC_WORKER_TEST_HOOK", hook)
    r = run_kernel(GATHER, _gather_inputs([1, 2, 3, 4]), {"Y": np.zeros(4, np.float32)}, memory_limit_mb=2048)
    assert not r.ok and r.error_kind == kind, r.error
    if signame:
        assert signame in r.error and "gather" in r.error


def test_timeout_is_honored(monkeypatch):
    monkeypatch.setenv("LEIRC_WORKER_TEST_HOOK", "hang")
    t0 = time.monotonic()
    r = run_kernel(GATHER, _gather_inputs([1, 2, 3, 4]), {"Y": np.zeros(4, np.float32)}, timeout=6)
    elapsed = time.monotonic() - t0
    assert not r.ok and r.error_kind == "timeout"
    assert "6 s" in r.error
    assert elapsed < 40


def test_memory_limit_is_honored():
    # a 40000 x 40000 f32 intermediate (6.4 GB) cannot be allocated under a 2 GB limit
    big = r"""\kernel big(A: f32[4]) -> (Y: f32[4]) {
      L^{40000}_{i=0} L^{40000}_{j=0} [ T^{f32,g}_{i,j} = A^{f32,g}_{0}; ];
      L^{4}_{i=0} [ Y^{f32,g}_{i} = T^{f32,g}_{i,i}; ];
    }"""
    r = run_kernel(big, {"A": np.ones(4, np.float32)}, {"Y": np.zeros(4, np.float32)}, memory_limit_mb=2048)
    assert not r.ok and r.error_kind == "memory", r.error


def test_time_kernel_rotates_inputs_and_records_threads():
    src = r"""\kernel k(A: f32[64, 64]) -> (Y: f32[64]) {
      L^{64}_{i=0} L^{64}_{j=0} [ Y^{f32,g}_{i} = Y^{f32,g}_{i} + A^{f32,g}_{i,j}; ];
    }"""
    sets = [{"A": np.random.default_rng(s).random((64, 64), dtype=np.float32)} for s in range(3)]
    tr = time_kernel(src, sets, threads=1, warmup=2, repeat=5, min_repeat_ms=5)
    assert isinstance(tr, TimingResult)
    assert tr.ok, tr.error
    assert len(tr.runs) == 5 and tr.threads == 1 and tr.target == "llvm"
    assert tr.min_ms <= tr.median_ms <= tr.max_ms and tr.median_ms > 0
    assert tr.number >= 1


def test_time_kernel_reports_failures():
    tr = time_kernel(GATHER, [_gather_inputs([1, 2, 3, 10**13])], repeat=2, min_repeat_ms=0)
    assert not tr.ok and tr.error_kind == "crash"


def test_make_inputs_respects_index_extents():
    from leirc.lang.checker import check_text

    k = check_text(GATHER).results[0].kernel
    ins = make_inputs(k, seed=3)
    assert ins["A"].dtype == np.float32 and ins["C"].dtype == np.int64
    assert ins["C"].min() >= 0 and ins["C"].max() < 10
    outs = zero_outputs(k)
    assert outs["Y"].shape == (4,) and outs["Y"].dtype == np.float32
    r = run_kernel(GATHER, ins, outs)
    assert r.ok and np.allclose(r.outputs["Y"], ins["A"][ins["C"]] * 2)


def test_no_stray_environment_leaks():
    # the hook variable must not be set outside the tests that set it
    assert "LEIRC_WORKER_TEST_HOOK" not in os.environ
