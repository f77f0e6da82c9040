"""``benchmarks/bench_blocking.py --sweep --workloads``: a workload module becomes a LEIR source,
its own parameters by LEIR name, and the module as the eager column (no timing asserted)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_blocking  # noqa: E402

from leirc.lang.checker import check_text  # noqa: E402
from leirc.lower.session import KernelSession  # noqa: E402


def test_a_workload_row_runs_the_module_and_its_leir_on_the_same_parameters():
    src, weights, eager = bench_blocking.workload_row(REPO / "benchmarks" / "workloads" / "l1_087_pointwise_conv2d.py")
    k = check_text(src).results[0].kernel
    acts = [p for p in k.inputs if p.name not in weights]
    assert weights and acts  # parameters are the module's, the activation is ours
    rng = np.random.default_rng(0)
    x = {p.name: rng.standard_normal(tuple(p.shape), dtype=np.float32) for p in acts}
    with torch.no_grad():
        want = eager(*[torch.from_numpy(x[p.name]) for p in acts]).numpy()
    [o] = k.outputs
    with KernelSession(src, threads=2, timeout=300) as s:
        got = s.run({**x, **weights}, {o.name: np.zeros(tuple(o.shape), dtype=np.float32)})
    assert got.ok, got.error
    np.testing.assert_allclose(got.outputs[o.name], want, rtol=1e-4, atol=1e-4)


def test_input_sets_keep_a_workloads_parameters_out_of_the_eager_call():
    src, weights, _ = bench_blocking.workload_row(REPO / "benchmarks" / "workloads" / "l1_087_pointwise_conv2d.py")
    k = check_text(src).results[0].kernel
    sets, eager_args = bench_blocking.input_sets(k, weights)
    assert len(sets) == len(eager_args) == 3
    for st, args in zip(sets, eager_args):
        assert all(st[n] is a for n, a in weights.items())  # the module's own arrays, not random ones
        assert [a.shape for a in args] == [tuple(p.shape) for p in k.inputs if p.name not in weights]
    assert not np.array_equal(eager_args[0][0], eager_args[1][0])  # each set its own activations
    # a stdlib kernel: every input random, all of them the eager call's arguments
    plain, plain_args = bench_blocking.input_sets(check_text((REPO / "stdlib" / "gemv.leir").read_text()).results[0].kernel)
    assert [list(st) for st in plain] == [["A", "X"]] * 3 and all(len(a) == 2 for a in plain_args)
