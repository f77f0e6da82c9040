"""Multi-step records exported as chat examples: one example per verified step, the
preceding steps (with the speedup measured after each) in the prompt, split by source
kernel; every exported step replays through the engine from its prompt's program to its
answer's program, and the examples chain from the root to the trajectory's final program.

One real trajectory (three steps, real builds, verification and timing through
``leirc dataset trajectory``) is shared by the module."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest

from leirc.cli import cmd_dataset
from leirc.dataset.export import HISTORY_HEADING, SPLITS, export, split_of, trajectory_examples
from leirc.dataset.store import read_jsonl
from leirc.engine.program import Program, apply, replay
from leirc.strategies import Step, trace_to_json

ROWSUM = r"""\kernel rowsum(A: f32[16, 8]) -> (Y: f32[16]) {
  L^{16}_{i=0} L^{8}_{j=0} [ Y^{f32,g}_{i} = Y^{f32,g}_{i} + A^{f32,g}_{i,j}; ];
}
"""
# one real trajectory: a worker start, four builds, verification and timing (~15 s under load)
pytestmark = pytest.mark.slow

STEPS = [Step.make("loop_split", loop="N0.i", factor=4), Step.make("loop_parallelization", loop="N0.io"),
         Step.make("loop_unrolling", loop="N0.j")]


@pytest.fixture(scope="module")
def trajectory(tmp_path_factory):
    d = tmp_path_factory.mktemp("traj")
    src = d / "rowsum.leir"
    src.write_text(ROWSUM)
    trace = d / "search.json"
    trace.write_text(trace_to_json(STEPS, kernel="rowsum"))
    out = d / "traj.jsonl"
    assert cmd_dataset.main(["trajectory", str(src), str(trace), "--out", str(out)]) == 0
    (rec,) = read_jsonl(str(out))
    return d, out, rec


def _user_ir(user: str) -> str:
    m = re.search(r"Current IR:\n'(.*)'\nIts interface", user, re.S)
    assert m, user
    return m.group(1)


def _answer(assistant: str) -> dict:
    return json.loads(assistant.split("<answer>", 1)[1].split("</answer>", 1)[0])


def test_every_exported_step_replays_from_its_prompt_to_its_answer(trajectory):
    d, path, rec = trajectory
    out = d / "chat"
    assert cmd_dataset.main(["export", str(path), "--out", str(out)]) == 0
    rows = [row for sp in SPLITS for row in read_jsonl(str(out / f"{sp}.jsonl"))]
    assert [r["index"] for r in rows] == [0, 1, 2]
    current = Program.from_text(rec["original"]["leir"])
    for i, row in enumerate(rows):
        assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]
        user, asst = row["messages"][1]["content"], row["messages"][2]["content"]
        before = Program.from_text(_user_ir(user))
        assert before.fingerprint == current.fingerprint  # the prompt holds the program after steps 0..i-1
        ans = _answer(asst)
        step = Step.from_json(ans["step"])
        assert step == STEPS[i] and ans["applied_strategy"] == STEPS[i].name
        after = apply(before, step).program
        assert after.fingerprint == Program.from_text(ans["transformed_IR"]).fingerprint
        assert after.fingerprint == rec["steps"][i]["fingerprint"]
        current = after
    assert current.fingerprint == rec["final"] == replay(Program.from_text(ROWSUM), STEPS).fingerprint


def test_the_prompt_lists_the_preceding_steps_with_the_speedup_after_each(trajectory):
    _, _, rec = trajectory
    rows = trajectory_examples(rec, "train")
    for i, row in enumerate(rows):
        user = row["messages"][1]["content"]
        history = user.split(HISTORY_HEADING + "\n", 1)[1]
        lines = history.splitlines()
        if i == 0:
            assert lines == ["(none: this is the original program)"]
            continue
        assert len(lines) == i
        for k, line in enumerate(lines):
            st = rec["steps"][k]
            assert line.startswith(f"{k + 1}. ") and json.dumps(STEPS[k].to_json(), separators=(",", ":")) in line
            assert f"x{st['timing']['speedup_vs_root']:.3g} over the original" in line
            assert f"x{st['timing']['speedup_vs_previous']:.3g} over its parent" in line
        # the example's own numbers are the speedups after its step, and its think block states them
        st = rec["steps"][i]
        assert row["speedup_vs_root"] == st["timing"]["speedup_vs_root"] > 0
        assert row["speedup_vs_previous"] == st["timing"]["speedup_vs_previous"] > 0
        assert "Measured on llvm: equal=True" in row["messages"][2]["content"]
        assert "'A' with the dtype float32 and shape [16, 8]" in user


def test_only_the_verified_prefix_is_exported_and_plain_keeps_the_record(trajectory, tmp_path):
    _, _, rec = trajectory
    broken = json.loads(json.dumps(rec))
    broken["steps"][1]["verification"]["ok"] = False
    assert [r["index"] for r in trajectory_examples(broken, "train")] == [0]
    res = export([broken], str(tmp_path), fmt="plain")
    sp = split_of(rec["source"]["id"])
    assert res[sp] == {"examples": 1, "sources": 1}
    (row,) = read_jsonl(str(tmp_path / f"{sp}.jsonl"))
    assert row["kind"] == "trajectory" and len(row["steps"]) == 1 and row["split"] == sp


def test_trajectories_split_by_source_kernel_with_the_single_step_records(trajectory, tmp_path):
    _, _, rec = trajectory
    recs = []
    for n in range(24):
        r = json.loads(json.dumps(rec))
        r["source"]["id"] = f"kernels/k{n % 8}.leir::rowsum"
        r["id"] = f"{rec['id']}-{n}"
        recs.append(r)
    res = export(recs, str(tmp_path), fmt="chat", seed=3)
    where: dict = defaultdict(set)
    for sp in SPLITS:
        rows = read_jsonl(str(tmp_path / f"{sp}.jsonl"))
        assert res[sp]["examples"] == len(rows)
        for row in rows:
            where[row["source"]].add(sp)
            assert split_of(row["source"], 3) == sp  # the function single-step records split by
    assert len(where) == 8 and all(len(v) == 1 for v in where.values())
    assert sum(res[sp]["examples"] for sp in SPLITS) == 24 * 3


def test_the_source_id_is_the_one_dataset_gen_gives_the_same_file(trajectory):
    from leirc.dataset.sources import discover, load

    d, _, rec = trajectory
    files, problems = discover([str(d / "rowsum.leir")])
    assert not problems
    gen_ids = [s.id for s in load(files[0])[0]]
    assert rec["source"]["id"] in gen_ids and rec["source"]["id"] == "rowsum.leir::rowsum"
