"""End to end: the softmax -> online softmax and sdpa -> flash attention (without tiling)
trajectories through ``leirc apply`` in a subprocess, verified with ``--verify -t interp``.

``leirc apply`` prints one line per step to stderr, ``applied <step> [level, numerics]``,
and the verifier's verdict; the tests check both. The numeric runs use the stdlib kernels
with smaller extents (the full-size stdlib kernels are verified in the library-level tests
test_math_online_softmax.py / test_math_flash_attention.py)."""

import json
import subprocess
import sys
from pathlib import Path

from leirc.lang import ast as A
from leirc.lang.printer import print_module
from leirc.strategies import Step, trace_to_json
from test_math_helpers import run, small, stdlib

REPO = Path(__file__).resolve().parents[2]


def leirc(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "leirc.cli.main", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd or REPO, timeout=300)


def write(tmp_path, name, kernel):
    p = tmp_path / f"{name}.leir"
    p.write_text(print_module(A.Module((kernel,)), "pretty"), encoding="utf-8")
    return p


def test_softmax_to_online_softmax(tmp_path):
    src = write(tmp_path, "softmax_small", small("softmax", {"256": "8", "24576": "128"}))
    trace = tmp_path / "trace.json"
    r = leirc("apply", src, "online_softmax", "--at", "N0.S0", "--verify", "-t", "interp", "--save-trace", trace)
    assert r.returncode == 0, r.stderr
    assert "applied online_softmax(stmt=N0.S0) [math, exact-in-reals]" in r.stderr
    assert "verify on interp: equal" in r.stderr  # the line names its target (#11)
    assert "Rsum^{f32,g}_{i} = if_then_else(" in r.stdout
    steps = json.loads(trace.read_text())["steps"]
    assert steps == [{"strategy": "online_softmax", "args": {"stmt": "N0.S0"}}]


def test_softmax_trajectory_on_the_stdlib_kernel(tmp_path):
    steps = [Step.make("online_softmax", stmt="N0.S0"), Step.make("loop_parallelization", loop="N1.i")]
    trace = tmp_path / "t.json"
    trace.write_text(trace_to_json(steps), encoding="utf-8")
    r = leirc("apply", REPO / "stdlib" / "softmax.leir", "--trace", trace)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("applied ") == 2
    expected = run(stdlib("softmax"), *steps)
    assert r.stdout.endswith(print_module(A.Module((expected,)), "pretty"))


def test_sdpa_to_flash_attention(tmp_path):
    src = write(tmp_path, "sdpa_small", small("sdpa", {"128": "16", "256": "8"}))
    r = leirc("apply", src, "flashattention_wo_tiling", "--at", "N2.S0", "--verify", "-t", "interp")
    assert r.returncode == 0, r.stderr
    assert "applied flashattention_wo_tiling(stmt=N2.S0) [math, exact-in-reals]" in r.stderr
    assert "verify on interp: equal" in r.stderr  # the line names its target (#11)


def test_sdpa_two_step_trajectory(tmp_path):
    src = write(tmp_path, "sdpa_small", small("sdpa", {"128": "16", "256": "8"}))
    trace = tmp_path / "t.json"
    trace.write_text(trace_to_json([Step.make("online_softmax", stmt="N2.S0"),
                                    Step.make("normal_matmul_to_prefix_matmul_based_on_online_softmax", stmt="N5.S0")]))
    r = leirc("apply", src, "--trace", trace, "--verify", "-t", "interp")
    assert r.returncode == 0, r.stderr
    assert "applied online_softmax(stmt=N2.S0) [math, exact-in-reals]" in r.stderr
    assert "applied normal_matmul_to_prefix_matmul_based_on_online_softmax(stmt=N5.S0)" in r.stderr
    assert "verify on interp: equal" in r.stderr  # the line names its target (#11)
    assert "P^{" not in r.stdout


def test_not_applicable_is_reported(tmp_path):
    r = leirc("apply", REPO / "stdlib" / "layernorm.leir", "online_softmax", "--at", "N0.S0")
    assert r.returncode == 1
    assert "online_softmax: N0.S0 is not a max reduction" in r.stderr
