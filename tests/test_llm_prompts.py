"""The prompts: one module for the dataset's Step-TP records and the LLM proposers,
rendered from versioned template files, showing only what applies."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest

from leirc.engine.program import Program
from leirc.lang.printer import print_kernel
from leirc.llm import prompts as P
from leirc.strategies import Step, all_strategies, enumerate_sites, get
from leirc.strategies.base import apply_step
from strategy_harness import kernel_of, stdlib_text

SMALL = r"\kernel k(A:f32[64,32])->(C:f32[64,32]){L^{64}_{i=0}L^{32}_{j=0}[C^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];}"


@pytest.fixture(scope="module")
def matmul():
    return Program.from_text(stdlib_text("matmul_square"))


def user_of(msgs) -> str:
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[0]["content"] == P.SYSTEM
    return msgs[1]["content"]


# ---------------------------------------------------------------------------
# the dataset's record format lives here, and dataset.prompt is the same objects


def test_the_dataset_exports_with_the_one_prompt_module():
    import leirc.dataset.export as E

    assert E.prompt is P
    with pytest.raises(ImportError):
        import leirc.dataset.prompt  # noqa: F401 - there is one definition, in leirc.llm.prompts


def test_record_prompt_text_is_the_step_tp_format():
    text = P.user_prompt("k", "L^{4}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i};];", {"A": ("f32", [4])},
                         {"C": ("bf16", [4, 2])}, "cuda")
    assert text == (
        "The LEIR program below implements the kernel 'k' for the target cuda.\n"
        "Current IR:\n'L^{4}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i};];'\n"
        "Its interface tensors are 'A' with the dtype float32 and shape [4]; 'C' with the dtype bfloat16 and shape "
        "[4, 2] (output). Do not change their names, shapes or dtypes.\n"
        "Apply exactly one optimization strategy to produce a numerically equivalent transformed IR (state whether its "
        "outputs stay bitwise identical). Answer only with JSON with the keys 'transformed_IR', 'applied_strategy' and "
        "'step' (the strategy with its arguments).")
    assert P.SYSTEM == "You are a helpful IR optimization assistant."


def test_record_answer_parses_back_into_its_step():
    from leirc.llm.parse import parse_answer

    step = {"strategy": "loop_split", "args": {"loop": "N0.i", "factor": 4}}
    msg = P.assistant_message("because", "L", "loop_split", step)
    a = parse_answer(msg)
    assert a.step == Step.from_json(step) and a.program_text == "L"


# ---------------------------------------------------------------------------
# templates


def test_every_template_is_a_versioned_package_file():
    folder = resources.files("leirc.llm").joinpath("templates")
    files = sorted(p.name for p in folder.iterdir() if p.name.endswith(".txt"))
    assert files and all(re.fullmatch(rf"[a-z_]+\.v{P.TEMPLATE_VERSION}\.txt", f) for f in files), files
    for name in ("system", "steptp_record", "steptp", "steptp_many", "tried", "autocomp_plan", "autocomp_implement",
                 "htam_rank"):
        assert f"{name}.v{P.TEMPLATE_VERSION}.txt" in files


def test_a_missing_field_is_an_error_not_a_silent_hole():
    with pytest.raises(KeyError):
        P.render("steptp", kernel="k")


def _no_placeholders(text: str) -> None:
    assert not re.search(r"\$[A-Za-z_{]", text), text


def test_proposer_prompts_carry_their_template_version(matmul):
    """The version is part of the messages, hence of the prompt cache's key."""
    prompts = {
        "steptp": user_of(P.steptp_messages(matmul, target="llvm")),
        "autocomp_plan": user_of(P.autocomp_plan_messages(matmul, target="llvm", feedback={}, menu=["loop_split"],
                                                          iteration=1)),
        "autocomp_implement": user_of(P.autocomp_implement_messages(matmul, target="llvm", plan="split N0.i")),
        "htam_rank": user_of(P.htam_rank_messages(matmul, target="llvm", direction="tiling",
                                                  candidates=[Step.make("loop_split", loop="N0.i", factor=4)])),
    }
    for name, text in prompts.items():
        assert text.startswith(f"[leirc prompt {name}.v{P.TEMPLATE_VERSION}]\n"), name
        _no_placeholders(text)


# ---------------------------------------------------------------------------
# Step-TP single step


def test_steptp_shows_the_program_and_its_interface(matmul):
    text = user_of(P.steptp_messages(matmul, target="cuda"))
    assert print_kernel(matmul.kernel, "compact") in text
    assert "- A: f32[512,512] (input)\n- B: f32[512,512] (input)\n- C: f32[512,512] (output)" in text
    assert "faster on cuda" in text and '"leir"' in text and '"strategy"' in text
    assert "(none: this is the original program)" in text


def _site_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith('{"strategy":')]


def test_every_listed_site_is_a_step_that_applies(matmul):
    lines = _site_lines(user_of(P.steptp_messages(matmul, target="llvm")))
    assert len(lines) > 10
    for e in lines:
        st = Step.make(e["strategy"], **e["args"], **{k: v[-1] for k, v in e.get("domains", {}).items()})
        matmul.apply(st)  # raises NotApplicable if the prompt offered an illegal step
    assert P.PROGRAM_STRATEGY not in {e["strategy"] for e in lines}


def test_the_listing_keeps_to_the_given_strategies(matmul):
    lines = _site_lines(user_of(P.steptp_messages(matmul, target="llvm", strategies=["loop_split", "loop_reorder"])))
    assert {e["strategy"] for e in lines} == {"loop_split", "loop_reorder"}
    split = [e for e in lines if e["strategy"] == "loop_split"]
    assert {e["args"]["loop"] for e in split} == {"N0.i", "N0.j", "N0.k"}
    # domains are thinned (both ends kept), not cut
    full = next(s for s in enumerate_sites(matmul.kernel, ["loop_split"]) if s.fixed == {"loop": "N0.i"})
    full = full.domains["factor"]
    thin = next(e for e in P.site_entries(matmul, ["loop_split"], values=3) if e["args"] == {"loop": "N0.i"})
    assert len(full) > 3 and thin["domains"]["factor"] == [full[0], full[len(full) // 2], full[-1]]


def test_the_listing_stays_within_its_budget_and_says_what_it_left_out(matmul):
    entries = P.site_entries(matmul)
    text, left = P.sites_text(entries, budget=600)
    body = [line for line in text.splitlines() if line.startswith("{")]
    assert sum(len(line) + 1 for line in body) <= 600
    assert left == len(entries) - len(body) > 0 and text.endswith(f"(and {left} more sites not shown)")
    # round-robin over strategies: a small budget still shows several of them
    assert len({json.loads(b)["strategy"] for b in body}) == len(body)
    full, none_left = P.sites_text(entries, budget=10 ** 6)
    assert none_left == 0 and len(_site_lines(full)) == len(entries)


def test_history_shows_the_steps_and_their_measured_effect(matmul):
    hist = [{"step": Step.make("loop_reorder", loop="N0.i", order="i,k,j"), "ms": 12.5, "effect": 2.0, "speedup": 2.0},
            {"step": Step.make("program_rewrite", leir="\\kernel k() -> () {}" * 50), "ms": 10.0, "effect": 1.25},
            {"step": Step.make("loop_split", loop="N0.j", factor=8), "outcome": "not timed alone"}]
    text = user_of(P.steptp_messages(matmul, target="llvm", history=hist))
    assert '1. {"strategy":"loop_reorder","args":{"loop":"N0.i","order":"i,k,j"}}: 12.5 ms, x2 over its parent, ' \
           'x2 over the original' in text
    assert '2. {"strategy":"program_rewrite","args":{"leir":"<a transformed program>"}}: 10 ms, x1.25' in text
    assert "3. " in text and "not timed alone" in text
    long = P.history_text([{"step": f"s{i}"} for i in range(20)])
    assert long.splitlines()[0] == f"({20 - P.HISTORY_STEPS} earlier steps not shown)"
    assert long.splitlines()[-1] == "20. s19"


def test_several_answers_and_tried_steps(matmul):
    one = user_of(P.steptp_messages(matmul, target="llvm"))
    many = user_of(P.steptp_messages(matmul, target="llvm", k=3,
                                     tried=[(Step.make("loop_unrolling", loop="N0.k"), "failed: mismatch")]))
    assert '"answers"' not in one and "Propose up to 3 different steps" in many
    assert '- {"strategy":"loop_unrolling","args":{"loop":"N0.k"}}: failed: mismatch' in many
    assert "do not propose them again" in many and "do not propose them again" not in one


# ---------------------------------------------------------------------------
# Autocomp and HTAM


def test_autocomp_plan_has_feedback_menu_and_phase(matmul):
    fb = {"ms": 4.0, "gops": 33.5, "peak_gops": 48.0, "compute_util": 0.698, "gbs": 2.0, "peak_gbs": 20.0,
          "bandwidth_util": 0.1, "footprint_bytes": 3.1e6, "bound": "compute", "extra": 7}
    menu = [{"strategy": "loop_split", "description": "split a loop"}, "loop_reorder",
            {"strategy": "loop_tiling", "args": {"loop": "N0.i"}}]
    text = user_of(P.autocomp_plan_messages(matmul, target="llvm", feedback=fb, menu=menu, iteration=3, iterations=8))
    for line in ("- latency: 4 ms (measured)", "- achieved: 33.5 GFLOP/s", "- compute peak: 48 GFLOP/s",
                 "- compute utilization: 69.8%", "- bandwidth utilization: 10.0%",
                 "- footprint of the interface tensors: 3.1 MB", "- bound: compute", "- extra: 7",
                 "1. loop_split: split a loop", "2. loop_reorder", "3. loop_tiling at loop=N0.i"):
        assert line in text.splitlines(), line
    assert "phase 3 of 8" in text and '"option"' in text
    empty = user_of(P.autocomp_plan_messages(matmul, target="llvm", feedback=None, menu=[], iteration=1))
    assert "(no measurement yet)" in empty and "(empty menu)" in empty


def test_autocomp_implement_shows_plan_examples_and_sites(matmul):
    ex = P.docstring_example("loop_split")
    text = user_of(P.autocomp_implement_messages(matmul, target="llvm", plan="split N0.j by 16", examples=[ex],
                                                 strategies=["loop_split"]))
    assert "split N0.j by 16" in text
    assert f"Before: {ex['before']}" in text and f"After: {ex['after']}" in text
    assert {e["strategy"] for e in _site_lines(text)} == {"loop_split"}
    assert '"steps"' in text


@pytest.mark.parametrize("name", [s.name for s in all_strategies()])
def test_docstring_examples_are_real_steps(name):
    ex = P.docstring_example(name)
    assert ex is not None, name
    got = apply_step(kernel_of(ex["before"]), ex["step"])
    assert print_kernel(got) == print_kernel(kernel_of(ex["after"]))
    # typed as the registry types them (an int argument is an int, not the docstring's text)
    for a in get(name).args:
        if a.kind == "int" and a.name in ex["step"].kwargs:
            assert isinstance(ex["step"].kwargs[a.name], int)


def test_htam_rank_numbers_candidates_from_one(matmul):
    cands = [{"step": Step.make("loop_split", loop="N0.i", factor=4), "predicted": 1.5, "note": "enabler"},
             Step.make("loop_unrolling", loop="N0.k")]
    text = user_of(P.htam_rank_messages(matmul, target="llvm", direction="tiling", direction_doc="splits and tiles",
                                        candidates=cands))
    assert '1. {"strategy":"loop_split","args":{"factor":4,"loop":"N0.i"}} (predicted x1.5; enabler)' in text
    assert '2. {"strategy":"loop_unrolling","args":{"loop":"N0.k"}}' in text
    assert 'direction "tiling" (splits and tiles)' in text and '"ranking"' in text


# ---------------------------------------------------------------------------
# the registry as a JSON schema


def test_strategy_schema_types_every_argument():
    sch = P.strategy_schema()
    by_name = {v["properties"]["strategy"]["const"]: v for v in sch["oneOf"]}
    assert set(by_name) == {s.name for s in all_strategies()}
    for s in all_strategies():
        props = by_name[s.name]["properties"]["args"]["properties"]
        assert set(props) == {a.name for a in s.args}
        for a in s.args:
            if a.kind == "choice":
                assert props[a.name]["enum"] == list(a.choices)
            elif a.kind == "int":
                assert props[a.name]["type"] == "integer"
        assert set(by_name[s.name]["properties"]["args"]["required"]) == {a.name for a in s.args if a.default is None}
    json.dumps(sch)  # serializable as it is
    assert [v["properties"]["strategy"]["const"] for v in P.strategy_schema(["loop_split"])["oneOf"]] == ["loop_split"]


def test_loop_and_stmt_patterns_match_real_references(matmul):
    sch = {v["properties"]["strategy"]["const"]: v for v in P.strategy_schema()["oneOf"]}
    loop_pat = sch["loop_split"]["properties"]["args"]["properties"]["loop"]["pattern"]
    stmt_pat = sch["vectorized_partial_sums"]["properties"]["args"]["properties"]["stmt"]["pattern"]
    for ref, _ in matmul.loops():
        assert re.match(loop_pat, ref), ref
    for ref, _ in matmul.stmts():
        assert re.match(stmt_pat, ref), ref


def test_small_kernel_prompt_is_small():
    p = Program.from_text(SMALL)
    text = user_of(P.steptp_messages(p, target="llvm"))
    assert len(text) < 5000  # a tiny kernel's prompt is a few hundred tokens, not the whole registry


def test_the_command_line_prints_the_messages(tmp_path, capsys):
    f = tmp_path / "k.leir"
    f.write_text(SMALL, encoding="utf-8")
    assert P.main([str(f), "--target", "cuda", "-k", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--- system ---\n" + P.SYSTEM + "\n--- user ---\n[leirc prompt steptp.v1]")
    assert "faster on cuda" in out and "Propose up to 2 different steps" in out
    bad = tmp_path / "bad.leir"
    bad.write_text("\\kernel k(", encoding="utf-8")
    assert P.main([str(bad)]) == 1
    assert "bad.leir:1:" in capsys.readouterr().err
    assert P.main([str(tmp_path / "missing.leir")]) == 2
