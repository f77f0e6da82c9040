"""leirc dataset gen: records re-verify when replayed, runs are deterministic, a SIGKILLed run
resumes without losing finished records, and shards merge to the unsharded set.

One small real generation (two stdlib kernels at one tiny shape, two strategies, one step
each: real sandboxed builds, real verification and timing) is shared by the module."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leirc.cli import cmd_dataset
from leirc.dataset.generate import GenOptions, generate, plan
from leirc.dataset.store import Store, read_jsonl, stable
from leirc.engine.evaluate import Evaluator
from leirc.engine.program import Program, apply
from leirc.strategies import Step

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [str(ROOT / "stdlib" / "relu.leir"), str(ROOT / "stdlib" / "gemv.leir")]
STRATEGIES = ("loop_reorder", "loop_split")
# the compiled-vs-compiled comparison has its own test below; here it would only add builds
OPTS = GenOptions(seed=3, shapes=1, per_strategy=1, strategies=STRATEGIES, repeat=1, compare_compiled=False)
CLI_ARGS = ["--seed", "3", "--shapes", "1", "--per-strategy", "1", "--strategies", ",".join(STRATEGIES),
            "--repeat", "1", "--no-compare-compiled"]


def _stable_set(records):
    return sorted((json.dumps(stable(r), sort_keys=True) for r in records))


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    out = tmp_path_factory.mktemp("ds") / "base"
    summary = generate(SOURCES, str(out), OPTS, workers=0)
    return out, summary


@pytest.mark.slow
def test_generation_writes_verified_records(base):
    out, summary = base
    assert summary["problems"] == []
    assert summary["units"] == 2 and summary["jobs"] == 4
    records = read_jsonl(str(out / "records.jsonl"))
    rejected = read_jsonl(str(out / "rejected.jsonl"))
    assert len(records) + len(rejected) == 4 == len(Store(str(out)))
    assert records, "no step verified"
    for r in records:
        assert r["status"] == "ok" and r["verification"]["equal"]
        assert r["strategy"] in STRATEGIES and r["level"] == "operator"
        assert r["source"]["id"] in ("relu.leir::relu", "gemv.leir::gemv")
        assert r["original"]["fingerprint"] != r["transformed"]["fingerprint"]
        # the trace is about this program: the loops it names exist before and after
        pre, ch = r["reasoning"]["precondition"], r["reasoning"]["changes"]
        orig = Program.from_text(r["original"]["leir"])
        loop_ref = r["step"]["args"]["loop"]
        assert pre["facts"][0]["ref"] == loop_ref
        assert pre["facts"][0]["loop"].endswith("_{%s}" % orig.loop_at(loop_ref).var)
        assert ch["loops_before"] != ch["loops_after"]
        assert r["timing"]["transformed_ms"] > 0 and r["timing"]["original_ms"] > 0
        assert r["reasoning"]["measured"]["speedup"] == r["timing"]["speedup"]


@pytest.mark.slow
def test_every_record_replays_to_its_transformed_program(base):
    out, _ = base
    records = read_jsonl(str(out / "records.jsonl"))
    for r in records:
        orig = Program.from_text(r["original"]["leir"])
        assert orig.fingerprint == r["original"]["fingerprint"]
        rw = apply(orig, Step.from_json(r["step"]))
        assert rw.program.fingerprint == r["transformed"]["fingerprint"]
        assert Program.from_text(r["transformed"]["leir"]).fingerprint == r["transformed"]["fingerprint"]
        assert Program.from_text(r["transformed"]["leir_compact"]).fingerprint == r["transformed"]["fingerprint"]
    # re-evaluate one record from scratch (no cache): the verdicts are reproduced
    r = records[0]
    with Evaluator("llvm", seeds=OPTS.verify_seeds, time=False, threads=1,
                   verify_options={"oracle": OPTS.oracle}) as ev:
        e = ev.evaluate(r["transformed"]["leir"], reference=r["original"]["leir"], numerics=r["numerics"])
    assert e.ok and e.verify.equal
    assert e.verify.bitwise == r["verification"]["bitwise"]
    assert e.verify.max_abs_err == r["verification"]["max_abs_err"]


def _count_jobs(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        c = sqlite3.connect(str(db), timeout=1.0)
        try:
            return int(c.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])
        finally:
            c.close()
    except sqlite3.Error:
        return 0


def _workers_under(d: Path) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "leirc.lower.worker" in cmd and str(d) in cmd:
                pids.append(int(entry))
    return pids


def _wait_no_workers_under(d: Path, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while _workers_under(d) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = _workers_under(d)
    for pid in left:  # only the workers of the run this test started (their command names its directory)
        os.kill(pid, signal.SIGKILL)
    return left


@pytest.mark.slow
def test_sigkill_loses_no_finished_record_and_resume_completes_deterministically(base, tmp_path):
    out, _ = base
    run = tmp_path / "killed"
    cmd = [sys.executable, "-m", "leirc.cli.cmd_dataset", "gen", "--sources", *SOURCES, "--out", str(run),
           "--workers", "1", "-q", *CLI_ARGS]
    # the killed run's session directories (it cannot clean up after SIGKILL) land here
    shm = tmp_path / "sessions"
    shm.mkdir()
    env = dict(os.environ, LEIRC_TMPDIR=str(shm))
    p = subprocess.Popen(cmd, cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, env=env)
    db = run / "dataset.sqlite"
    deadline = time.monotonic() + 300
    try:
        while _count_jobs(db) < 1 and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert p.poll() is None, "the run finished before it could be killed"
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    # the kernel workers of the killed run see their pipes close and exit on their own
    assert _wait_no_workers_under(shm, 60) == []
    before = {r["job"]: r for r in Store(str(run)).records()}
    assert 1 <= len(before) < 4
    rc = cmd_dataset.main(["gen", "--sources", *SOURCES, "--out", str(run), "--workers", "0", "-q", *CLI_ARGS])
    assert rc == 0
    after = {r["job"]: r for r in Store(str(run)).records()}
    assert len(after) == 4
    for job, r in before.items():  # finished records survive the kill unchanged
        assert after[job] == r
    # an independent run of the same options gives the same records, measurements aside
    assert _stable_set(after.values()) == _stable_set(Store(str(out)).records())


@pytest.mark.slow
def test_shards_merge_to_the_unsharded_set(base, tmp_path):
    out, _ = base
    dirs = []
    for i in range(2):
        d = tmp_path / f"shard{i}"
        # the shards reuse the base run's evaluations: this test is about the partition and the merge
        shutil.copytree(out / "evalcache", d / "evalcache")
        rc = cmd_dataset.main(["gen", "--sources", *SOURCES, "--out", str(d), "--workers", "0", "-q",
                               "--shard", f"{i}/2", *CLI_ARGS])
        assert rc == 0
        dirs.append(str(d))
    n0, n1 = len(Store(dirs[0])), len(Store(dirs[1]))
    assert n0 + n1 == 4 and n0 and n1  # the two units hash to different shards under this seed
    merged = tmp_path / "merged"
    assert cmd_dataset.main(["merge", *dirs, "--out", str(merged)]) == 0
    assert _stable_set(Store(str(merged)).records()) == _stable_set(Store(str(out)).records())
    assert _stable_set(read_jsonl(str(merged / "records.jsonl"))) == _stable_set(read_jsonl(str(out / "records.jsonl")))


def test_a_directory_of_another_generation_is_refused(tmp_path, capsys):
    d = tmp_path / "ds"
    Store(str(d)).claim(GenOptions(seed=1).to_json())
    rc = cmd_dataset.main(["gen", "--sources", SOURCES[0], "--out", str(d), "--seed", "2", "--limit", "1"])
    assert rc == 2
    assert "other options" in capsys.readouterr().err


def test_usage_errors_are_one_line_messages(tmp_path, capsys):
    for bad in (["--shard", "2/2"], ["--shard", "x"], ["--strategies", "loop_splat"], ["--target", "interp"],
                ["--verify-seeds", "a"]):
        rc = cmd_dataset.main(["gen", "--sources", SOURCES[0], "--out", str(tmp_path / "x"), *bad])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("leirc dataset: error:") and "Traceback" not in err, (bad, err)


def test_plan_is_deterministic_and_shards_partition_it():
    full = plan(SOURCES, OPTS)
    again = plan(SOURCES, OPTS)
    keys = [j.key for u in full.units for j in u.jobs]
    assert keys == [j.key for u in again.units for j in u.jobs] and len(set(keys)) == len(keys) == 4
    parts = [plan(SOURCES, GenOptions(**{**OPTS.__dict__, "shard": (i, 3)})) for i in range(3)]
    part_keys = [[j.key for u in p.units for j in u.jobs] for p in parts]
    assert sorted(k for ks in part_keys for k in ks) == sorted(keys)
    assert sum(len(ks) for ks in part_keys) == len(keys)
    # all strategies: each draws its steps independently, so restricting the set keeps the draws
    wide = plan(SOURCES[:1], GenOptions(seed=3, shapes=1, per_strategy=1))
    narrow = plan(SOURCES[:1], GenOptions(seed=3, shapes=1, per_strategy=1, strategies=("loop_split",)))
    steps = {json.dumps(j.step, sort_keys=True) for u in wide.units for j in u.jobs}
    assert all(json.dumps(j.step, sort_keys=True) in steps for u in narrow.units for j in u.jobs)
    assert len(steps) > 4


def test_missing_and_broken_sources_are_reported_not_raised(tmp_path):
    bad = tmp_path / "bad.leir"
    bad.write_text("\\kernel k(A: f32[4]) -> (B: f32[4]) { L^{4}_{i=0} [ B^{f32,g}_{i} = C^{f32,g}_{i}; ]; }\n")
    p = plan([str(bad), str(tmp_path / "nope.leir")], OPTS)
    assert p.units == []
    assert any("nope.leir: no such file" in m for m in p.problems)
    assert any(m.startswith(f"{bad}:1:") for m in p.problems), p.problems


def test_pytorch_sources_go_through_the_frontend():
    pytest.importorskip("torch")
    src = str(ROOT / "benchmarks" / "workloads" / "l1_019_relu.py")
    p = plan([src], GenOptions(seed=0, shapes=2, per_strategy=1, strategies=("loop_split",)))
    assert p.problems == [] and p.sources == ["l1_019_relu.py::model"]
    assert len(p.units) == 2 and all(u.jobs for u in p.units)
    sizes = [tuple(tuple(v[1]) for v in u.instance["inputs"].values()) for u in p.units]
    assert len(set(sizes)) == 2


@pytest.mark.slow
def test_compare_compiled_decides_whether_a_step_keeps_the_compiled_bits(tmp_path):
    opts = GenOptions(seed=0, shapes=1, per_strategy=1, strategies=("loop_split", "reduction_factorization"),
                      repeat=1, time=False)
    generate([SOURCES[1]], str(tmp_path / "cc"), opts, workers=0)
    recs = {r["strategy"]: r for r in Store(str(tmp_path / "cc")).records("ok")}
    assert set(recs) == {"loop_split", "reduction_factorization"}
    for r in recs.values():
        assert r["verification"]["bitwise_compiled"] in (True, False)
        assert r["verification"]["bitwise_vs_original"] == r["verification"]["bitwise_compiled"]
        assert "timing" not in r or r["timing"]["transformed_ms"] is None
    # a split loop runs the same operations in the same order; a split reduction does not
    assert recs["loop_split"]["numerics"] == "bitwise" and recs["loop_split"]["verification"]["bitwise_compiled"]
    assert recs["reduction_factorization"]["numerics"] == "exact-in-reals"
    # both are legal by construction, and each record says what its verification covered
    assert all(r["evidence"] == "proven" and r["verification"]["passed_on"].startswith("seeds ") for r in recs.values())


ROWSUM = r"""\kernel rowsum(A: f32[16, 8]) -> (Y: f32[16]) {
  L^{16}_{i=0} L^{8}_{j=0} [ Y^{f32,g}_{i} = Y^{f32,g}_{i} + A^{f32,g}_{i,j}; ];
}
"""


@pytest.mark.slow
def test_trajectory_records_verify_every_state(tmp_path, capsys):
    from leirc.engine.program import replay
    from leirc.strategies import trace_to_json

    src = tmp_path / "rowsum.leir"
    src.write_text(ROWSUM)
    steps = [Step.make("loop_split", loop="N0.i", factor=4), Step.make("loop_parallelization", loop="N0.io")]
    good = tmp_path / "good.json"
    good.write_text(trace_to_json(steps, kernel="rowsum"))
    bad = tmp_path / "bad.json"
    bad.write_text(trace_to_json([steps[0], Step.make("loop_split", loop="N0.nope", factor=2)], kernel="rowsum"))
    out = tmp_path / "traj.jsonl"
    rc = cmd_dataset.main(["trajectory", str(src), str(good), str(bad), "--out", str(out), "--no-time"])
    assert rc == 1  # the bad trace stops early
    g, b = read_jsonl(str(out))
    assert g["verified_steps"] == 2 and g["stopped"] is None and g["trace"] == "good.json"
    assert g["final"] == replay(Program.from_text(ROWSUM), steps).fingerprint
    assert [s["strategy"] for s in g["steps"]] == ["loop_split", "loop_parallelization"]
    assert all(s["verification"]["equal"] for s in g["steps"])
    assert g["steps"][1]["reasoning"]["precondition"]["facts"][0]["ref"] == "N0.io"
    assert b["verified_steps"] == 1 and "does not apply" in b["stopped"]
    assert "1/2 steps verified" in capsys.readouterr().err


def test_dtype_instances_retype_every_float_tensor(capsys):
    p = plan([SOURCES[1]], GenOptions(seed=0, shapes=1, per_strategy=1, strategies=("loop_split",),
                                      dtypes=("f16", "f64", "f32")))
    assert [u.instance["dtype"] for u in p.units] == ["f16", "f64", "f32"] and p.problems == []
    for u in p.units:
        dt = u.instance["dtype"]
        assert {v[0] for v in u.instance["inputs"].values()} == {dt}
        prog = Program.from_text(u.text)
        assert {x.dtype for x in prog.kernel.inputs + prog.kernel.outputs} == {dt}
        assert u.jobs
    assert len({u.key for u in p.units}) == 3
    # the stdlib's f32 gemv at f32 is the as-written unit: same key
    plain = plan([SOURCES[1]], GenOptions(seed=0, shapes=1, per_strategy=1, strategies=("loop_split",)))
    assert plain.units[0].key == p.units[2].key
    assert cmd_dataset.main(["gen", "--sources", SOURCES[1], "--out", "/nonexistent/x", "--dtypes", "i32"]) == 2
    assert "--dtypes expects floating-point dtypes" in capsys.readouterr().err


def test_per_unit_caps_the_strategies_of_an_instance_and_keeps_the_hard_ones():
    from leirc.dataset.filtering import HARD

    src = [str(ROOT / "stdlib" / "softmax.leir")]
    full = plan(src, GenOptions(seed=0, shapes=2, per_strategy=1))
    capped = plan(src, GenOptions(seed=0, shapes=2, per_strategy=1, per_unit=3))
    assert capped.to_json() == plan(src, GenOptions(seed=0, shapes=2, per_strategy=1, per_unit=3)).to_json()
    assert [u.key for u in capped.units] == [u.key for u in full.units]
    for u, f in zip(capped.units, full.units):
        names = {j.step["strategy"] for j in u.jobs}
        all_names = {j.step["strategy"] for j in f.jobs}
        assert len(names) == min(3, len(all_names)) and names <= all_names
        hard = sorted(all_names & HARD)
        assert set(hard[:3]) <= names  # softmax's streaming rewrites are never crowded out
        # a capped unit's jobs are the full plan's jobs of those strategies (same draws, same keys)
        assert {j.key for j in u.jobs} == {j.key for j in f.jobs if j.step["strategy"] in names}
    assert any(set(j.step["strategy"] for j in u.jobs) & HARD for u in capped.units)
    assert "per_unit" not in GenOptions().to_json() and GenOptions(per_unit=3).to_json()["per_unit"] == 3


def test_units_run_breadth_first_and_a_budget_stops_the_run_resumably(tmp_path):
    from leirc.dataset.generate import run_order

    p = plan(SOURCES, GenOptions(seed=3, shapes=2, per_strategy=1, strategies=STRATEGIES))
    order = run_order(p.units)
    idx = [u.instance["index"] for u in order]
    assert idx == sorted(idx) and sorted(u.key for u in order) == sorted(u.key for u in p.units)
    first = [u.source["id"] for u in order if u.instance["index"] == 0]
    assert sorted(set(first)) == sorted({u.source["id"] for u in p.units})  # every source before any second shape
    out = tmp_path / "budget"
    s = generate(SOURCES, str(out), OPTS, workers=0, budget_s=0)
    assert s["ran"] == {} and not s["complete"] and s["jobs_left"] == s["jobs"] > 0
    assert len(Store(str(out), create=False)) == 0


def test_gen_cli_budget_per_unit_and_rpc_flags(tmp_path, capsys):
    src = str(ROOT / "stdlib" / "relu.leir")
    out = tmp_path / "b"
    assert cmd_dataset.main(["gen", "--sources", src, "--out", str(out), "--strategies", "loop_split",
                             "--per-unit", "1", "--budget", "0.001", "-q"]) == 0
    assert "stopped by --budget" in capsys.readouterr().err and len(Store(str(out), create=False)) == 0
    for bad, msg in ((["--rpc", "nowhere", "--key", "k"], "not a tracker address"),
                     (["--key", "k"], "--key needs the tracker"),
                     (["--rpc", "127.0.0.1:9190"], "device key"), (["--per-unit", "0"], "--per-unit")):
        assert cmd_dataset.main(["gen", "--sources", src, "--out", str(tmp_path / "x"), *bad]) == 2
        err = capsys.readouterr().err
        assert msg in err and "Traceback" not in err and err.count("\n") == 1
