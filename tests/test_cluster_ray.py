"""Dataset generation and batch tuning on a real two-node Ray cluster on this machine.

One cluster (``ray.cluster_utils.Cluster``: a head and a worker node on this host's address
-- a driver finds its local raylet by that address, so 127.0.0.1 would need it passed to
every ``ray.init`` -- one CPU each, both
offering the timing resource of this host's target fingerprint) serves the module. A test
kills the worker node (its raylet, SIGKILL) while one of its jobs is evaluating a kernel,
and checks that every job is done exactly once -- the lost one retried on the head -- with
records equal to a local run's (measurements and the node stamp aside). Another kills the
driver and resumes. Ray is the optional extra ``leirc[cluster]`` (part of ``[all]``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is the optional extra leirc[cluster]")

from leirc.cluster import ClusterError, RayExecutor, Task, node_resources, target_fingerprint  # noqa: E402
from leirc.cluster.tune import ResultsDB, TuneOptions, tune  # noqa: E402
from leirc.dataset.generate import GenOptions, generate, plan  # noqa: E402
from leirc.dataset.store import Store, stable  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MB = 1 << 20

SCALE = r"""\kernel scale(X: f32[16, 64]) -> (Y: f32[16, 64]) {
  L^{16}_{i=0} L^{64}_{j=0} [
    Y^{f32,g}_{i,j} = X^{f32,g}_{i,j} * 2.0;
  ];
}
"""
SHIFT = r"""\kernel shift(X: f32[16, 64]) -> (Y: f32[16, 64]) {
  L^{16}_{i=0} L^{64}_{j=0} [
    Y^{f32,g}_{i,j} = X^{f32,g}_{i,j} + 1.0;
  ];
}
"""
GEN = GenOptions(seed=5, shapes=1, per_strategy=1, strategies=("loop_split",), repeat=1, compare_compiled=False,
                 verify_seeds=(0,))
TUNE = TuneOptions(budget=1, proposers=("o2",), threads=1)


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    d = tmp_path_factory.mktemp("kernels")
    (d / "scale.leir").write_text(SCALE)
    (d / "shift.leir").write_text(SHIFT)
    return d


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from ray.cluster_utils import Cluster

    # the nodes' evaluation caches (they inherit the environment) apart from the local runs'
    # and from the user's: every evaluation on the cluster is a real one
    cache = tmp_path_factory.mktemp("node-cache")
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)
    res = node_resources("llvm")
    # a dead node is noticed in ~2 s instead of Ray's default 30
    fast = {"health_check_period_ms": 500, "health_check_failure_threshold": 3, "health_check_initial_delay_ms": 0}
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": 100 * MB,
                                                      "include_dashboard": False, "resources": res,
                                                      "_system_config": fast})
    try:
        c.wait_for_nodes()
        yield c
    finally:
        c.shutdown()
        if old is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = old


def _worker_node(c):
    """A second node; a test that kills it gets a fresh one the next time."""
    others = [n for n in c.worker_nodes]
    if others:
        return others[0]
    n = c.add_node(num_cpus=1, object_store_memory=100 * MB, resources=node_resources("llvm"))
    c.wait_for_nodes()
    return n


def _ancestors(pid: int) -> list:
    out = []
    for _ in range(8):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        if pid <= 1:
            break
        out.append(pid)
    return out


class NodeKiller(threading.Thread):
    """Kills ``node`` (SIGKILL of its raylet) as soon as a kernel worker descended from it
    exists: a job is evaluating there."""

    def __init__(self, c, node, timeout: float = 120.0):
        super().__init__(daemon=True)
        self.c, self.node, self.timeout = c, node, timeout
        self.raylet = node.all_processes["raylet"][0].process.pid
        self.killed = False
        self.stop = threading.Event()

    def _busy(self) -> bool:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if b"leirc.lower.worker" in cmd and self.raylet in _ancestors(int(entry)):
                return True
        return False

    def run(self):
        deadline = time.monotonic() + self.timeout
        while not self.stop.is_set() and time.monotonic() < deadline:
            if self._busy():
                self.c.remove_node(self.node, allow_graceful=False)
                self.killed = True
                return
            time.sleep(0.05)


@pytest.mark.slow
def test_dataset_gen_on_two_nodes_survives_a_node_kill_and_equals_a_local_run(cluster, kernels, tmp_path):
    local = generate([str(kernels)], str(tmp_path / "local"), GEN, workers=0)
    assert local["complete"] and local["records"] >= 1
    killer = NodeKiller(cluster, _worker_node(cluster))
    killer.start()
    try:
        got = generate([str(kernels)], str(tmp_path / "ray"), GEN, cluster=cluster.address, progress=False)
    finally:
        killer.stop.set()
        killer.join()
    assert killer.killed, "no job ran on the worker node"
    assert got["complete"] and got["executor"]["retried"] >= 1 and got["executor"]["failed"] == 0
    jobs = {j.key for u in plan([str(kernels)], GEN).units for j in u.jobs}
    rows = list(Store(str(tmp_path / "ray")).records())
    assert sorted(r["job"] for r in rows) == sorted(jobs)  # every job once: none lost, none twice
    fp = target_fingerprint("llvm")
    assert all(r["node"]["target_fingerprint"] == fp and r["node"]["name"] for r in rows)
    # verified anywhere, then timed in tasks of their own on nodes of the target's fingerprint
    timed = [r for r in rows if r["status"] == "ok"]
    assert timed and got["executor"]["jobs"] == got["units"] + len({r["unit"] for r in timed})
    for r in timed:
        assert r["timing"]["target_fingerprint"] == fp and r["timing"]["transformed_ms"] > 0
        assert r["reasoning"]["measured"]["speedup"] == r["timing"]["speedup"]
    want = sorted(json.dumps(stable(r), sort_keys=True) for r in Store(str(tmp_path / "local")).records())
    assert sorted(json.dumps(stable(r), sort_keys=True) for r in rows) == want


def _same(records: list) -> list:
    keep = ("kernel", "fingerprint", "ok", "verified", "steps", "best_fingerprint", "evaluations", "target_fingerprint")
    return sorted(({k: r.get(k) for k in keep} | {"candidates": [(c["fingerprint"], c["ok"], c["error_kind"])
                                                                  for c in r.get("candidates", [])]}
                   for r in records), key=lambda r: r["kernel"])


@pytest.mark.slow
def test_batch_tune_on_two_nodes_survives_a_node_kill_and_equals_a_local_run(cluster, kernels, tmp_path):
    local = tune([str(kernels)], str(tmp_path / "local"), TUNE, workers=0)
    assert local["complete"] and local["failed"] == 0
    killer = NodeKiller(cluster, _worker_node(cluster))
    killer.start()
    try:
        got = tune([str(kernels)], str(tmp_path / "ray"), TUNE, cluster=cluster.address, progress=False)
    finally:
        killer.stop.set()
        killer.join()
    assert killer.killed, "no search ran on the worker node"
    assert got["complete"] and got["executor"]["retried"] >= 1 and got["failed"] == 0
    rows = ResultsDB(str(tmp_path / "ray")).records()
    assert sorted(r["kernel"] for r in rows) == ["scale", "shift"]
    assert all(r["verified"] and r["best_ms"] > 0 for r in rows)
    assert _same(rows) == _same(ResultsDB(str(tmp_path / "local")).records())
    table = (tmp_path / "ray" / "results.md").read_text()
    assert "| scale |" in table and "| shift |" in table and "speedup vs -O2" in table


@pytest.mark.slow
def test_killed_driver_resumes_without_duplicates_or_losses(cluster, kernels, tmp_path):
    # three kernels (the cluster has one or two nodes here): when the first row is stored, at
    # least one search is still to come
    src = tmp_path / "src"
    src.mkdir()
    for f in kernels.iterdir():
        (src / f.name).write_text(f.read_text())
    (src / "neg.leir").write_text(SCALE.replace("scale", "neg").replace("* 2.0", "* -1.0"))
    kernels = src
    out = tmp_path / "resumed"
    cmd = [sys.executable, "-m", "leirc.cli.cmd_tune", str(kernels), "--budget", "1", "--proposer", "o2",
           "--threads", "1", "--cluster", cluster.address, "-o", str(out), "-q"]
    p = subprocess.Popen(cmd, cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    db = out / "tune.sqlite"
    deadline = time.monotonic() + 120
    try:
        while p.poll() is None and time.monotonic() < deadline:
            if db.is_file() and ResultsDB(str(out)).keys():
                break
            time.sleep(0.2)
        assert p.poll() is None, "the run ended before it could be killed"
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    before = ResultsDB(str(out)).records()
    assert 1 <= len(before) < 3
    from leirc.cli import cmd_tune

    # without --resume the directory is refused rather than mixed
    assert cmd_tune.main([str(kernels), "--budget", "1", "--proposer", "o2", "--threads", "1", "-o", str(out),
                          "-q"]) == 2
    rc = cmd_tune.main([str(kernels), "--budget", "1", "--proposer", "o2", "--threads", "1", "--cluster",
                        cluster.address, "-o", str(out), "--resume", "-q"])
    assert rc == 0
    after = ResultsDB(str(out)).records()
    assert sorted(r["kernel"] for r in after) == ["neg", "scale", "shift"]  # each once
    kept = {r["kernel"] for r in before}
    assert [r for r in after if r["kernel"] in kept] == before  # kept, not redone


def test_a_timing_job_never_lands_on_a_node_of_another_fingerprint(cluster):
    ex = RayExecutor(cluster.address, timing_fingerprint="0" * 16)
    try:
        # (a leirc function: the nodes import it by name, as they would a job's)
        ex.submit(Task("anywhere", target_fingerprint, ("cuda",)))  # builds and verification: any node
        with pytest.raises(ClusterError, match="no node of the cluster can time for target fingerprint 0000"):
            ex.submit(Task("timed", target_fingerprint, ("llvm",), times=True))
        (out,) = list(ex.as_completed())
        assert out.ok and out.value == target_fingerprint("cuda") and out.fingerprint == target_fingerprint("llvm")
    finally:
        ex.close()
    # a node that offers the resource of a fingerprint it does not have: the task checks where
    # it lands, refuses to time there, and is retried until it gives up
    liar = cluster.add_node(num_cpus=1, object_store_memory=100 * MB, resources=node_resources("cuda"))
    cluster.wait_for_nodes()
    ex = RayExecutor(cluster.address, timing_fingerprint=target_fingerprint("cuda"))
    try:
        ex.submit(Task("timed", target_fingerprint, ("llvm",), times=True))
        (out,) = list(ex.as_completed())
        assert not out.ok and out.attempts == 3 and ex.retries == 2
        assert f"the timing needs {target_fingerprint('cuda')[:12]}" in out.error
    finally:
        ex.close()
        cluster.remove_node(liar)
