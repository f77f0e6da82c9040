"""The LLM proposers against the scripted OpenAI-compatible server over real HTTP: good
answers become proposals through the engine, every bad one is refused with a counted reason,
and nothing a model or an endpoint does stops the search."""

from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("openai")

from leirc.engine.evaluate import Evaluation
from leirc.engine.program import Program
from leirc.llm import LLMClient, LLMConfig
from leirc.lower.runner import TimingResult
from leirc.search.core import Node, Search, SearchOptions
from leirc.search.llm_proposers import (AutocompProposer, HTAMLLMProposer, LLMSuggestions, StepTPProposer,
                                        build_llm_proposer, llm_suggest, node_history)
from leirc.search.memory import Memory
from leirc.search.proposers import MenuProposer
from leirc.strategies import Step
from llm_server import ScriptedLLMServer, llm_server, ok, server_error  # noqa: F401

SMALL = (r"\kernel k(A:f32[64,32])->(C:f32[64,32]){L^{64}_{i=0}L^{32}_{j=0}"
         r"[C^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2+A^{f32,g}_{i,j}*3;];}")
FOLDED = r"\kernel k(A:f32[64,32])->(C:f32[64,32]){L^{64}_{i=0}L^{32}_{j=0}[C^{f32,g}_{i,j}=A^{f32,g}_{i,j}*5;];}"
PAR = {"strategy": "loop_parallelization", "args": {"loop": "N0.i"}, "rationale": "two cores"}
VEC = {"strategy": "loop_vectorization", "args": {"loop": "N0.j"}, "rationale": "unit stride"}


@pytest.fixture
def root():
    p = Program.from_text(SMALL)
    return Node(0, p, None, None, (), (), "bitwise", p)


def client(server, *, models=("m",), log=None, **kw) -> LLMClient:
    kw.setdefault("max_retries", 0)
    # these tests count one refusal per scripted bad answer; re-asking has its own test below
    kw.setdefault("reasks", 0)
    return LLMClient(LLMConfig(base_url=server.url, models=models, timeout=5.0, **kw), log=log,
                     backoff_base=0.01, backoff_cap=0.02)


def steptp(server, **kw):
    logs: list[str] = []
    c = client(server, log=logs.append, **{k: v for k, v in kw.items() if k in ("models", "weights")})
    return StepTPProposer(c, MenuProposer("llvm", allow_approximate=True), log=logs.append), logs


def answers(*items) -> str:
    return json.dumps({"answers": list(items)})


def user_text(request) -> str:
    return request["json"]["messages"][1]["content"]


def child(parent: Node, step: Step, ms=None, ident=1) -> Node:
    rw = parent.program.apply(step)
    n = Node(ident, rw.program, parent, step, parent.steps + (step,), parent.directions + ("x",), "bitwise",
             parent.root_program)
    if ms is not None:
        n.evaluation = Evaluation(rw.program.fingerprint, True, None, None, TimingResult(True, median_ms=ms), 0.1, 0.2)
    return n


# ---------------------------------------------------------------------------
# Step-TP


def test_good_steps_become_proposals_from_one_call(llm_server, root):
    prop, _ = steptp(llm_server)
    llm_server.push(ok(answers(PAR, VEC)))
    got = prop.propose(root, 4, random.Random(0))
    assert [p.step for p in got] == [Step.from_json(PAR), Step.from_json(VEC)]
    assert all(p.source == "llm:m" for p in got)
    assert got[0].rationale == "LLM m (steptp.v1): two cores" and got[0].direction == "parallelism"
    menu = MenuProposer("llvm")  # the prior is the cost model's predicted speedup of the step
    assert got[0].prior == pytest.approx(menu.estimate(root.program).seconds /
                                         menu.estimate(root.program.apply(got[0].step).program).seconds)
    (req,) = llm_server.chat_requests
    text = user_text(req)
    assert root.program.print("compact") in text and "Propose up to 4 different steps" in text
    s = prop.stats()
    assert (s["mode"], s["calls"], s["proposed"], s["accepted"], s["rejected"]) == ("steptp", 1, 2, 2, {})
    assert s["prompt_tokens"] > 0 and s["completion_tokens"] > 0 and s["template_version"] == "1"
    assert s["by_model"]["m"]["calls"] == 1


def test_prose_around_the_json(llm_server, root):
    prop, _ = steptp(llm_server)
    llm_server.push(ok("The i loop is independent, so I would parallelize it:\n```json\n" + json.dumps(PAR) +
                       "\n```\nThat should use both cores."))
    assert [p.step.name for p in prop.propose(root, 1, random.Random(0))] == ["loop_parallelization"]


def test_malformed_json_is_refused_and_counted(llm_server, root):
    prop, logs = steptp(llm_server)
    llm_server.push(ok('{"strategy": "loop_parallelization", "args": {"loop": "N0.i"},}'))
    assert prop.propose(root, 2, random.Random(0)) == []
    assert prop.stats()["rejected"] == {"malformed_json": 1}
    assert logs == ["llm[steptp] m: rejected (malformed_json): the JSON in the answer does not decode "
                    "(it is not repaired)"]


def test_a_search_proposer_re_asks_after_a_bad_answer_and_uses_the_good_one(llm_server, root):
    """An unreliable endpoint (prose first) does not end the proposer: the client asks again
    with the refusal's reason, and the second answer's step is proposed (#34)."""
    logs: list[str] = []
    c = client(llm_server, log=logs.append, reasks=2)
    prop = StepTPProposer(c, MenuProposer("llvm"), log=logs.append)
    llm_server.push(ok("I would parallelize the outer loop, it is independent."))
    llm_server.push(ok(answers({"strategy": "loop_parallelization", "args": {"loop": "N0.i"}})))
    got = prop.propose(root, 2, random.Random(0))
    assert [p.step.name for p in got] == ["loop_parallelization"]
    st = prop.stats()
    assert st["reasks"] == 1 and sum(st["reask_refusals"].values()) == 1
    second = llm_server.requests[-1]["json"]["messages"]
    assert any("I would parallelize" in m["content"] for m in second)  # its own answer went back with the reason


def test_every_bad_answer_is_refused_with_its_reason(llm_server, root):
    prop, logs = steptp(llm_server)
    bad = [
        {"strategy": "loop_warp_speed", "args": {}},                                  # unknown_strategy
        {"strategy": "loop_split", "args": {"loop": "N0.i", "factor": "four"}},       # illegal_arguments
        {"strategy": "loop_split", "args": {"loop": "N0.i", "size": 4}},              # illegal_arguments
        {"strategy": "loop_split", "args": {"loop": "N0.i", "factor": 3}},            # not_applicable
        {"strategy": "loop_binding", "args": {"loop": "N0.i", "axis": "bx"}},         # not_allowed on llvm
        {"leir": "this is not LEIR"},                                                 # parse_error
        {"leir": FOLDED.replace("A^{f32,g}_{i,j}*5", "A^{f32,g}_{i+1,j}*5")},         # check_error
        {"leir": FOLDED.replace("(C:f32[64,32])", "(D:f32[64,32])").replace("C^{", "D^{")},  # interface_changed
        {"leir": SMALL},                                                              # no_change
        {"strategy": "loop_parallelization", "args": {"loop": "N0.i"}},               # duplicate of the 1st good
        {"thought": "hmm"},                                                           # bad_shape
    ]
    llm_server.push(ok(answers(PAR, *bad, {"leir": FOLDED, "rationale": "fold 2a+3a"})))
    got = prop.propose(root, 8, random.Random(0))
    assert [p.step for p in got] == [Step.from_json(PAR), Step.make("program_rewrite", leir=FOLDED)]
    assert got[1].direction and got[1].source == "llm:m" and "fold 2a+3a" in got[1].rationale
    s = prop.stats()
    assert s["rejected"] == {"unknown_strategy": 1, "illegal_arguments": 2, "not_applicable": 1, "not_allowed": 1,
                             "parse_error": 1, "check_error": 1, "interface_changed": 1, "no_change": 1,
                             "duplicate": 1, "bad_shape": 1}
    assert s["proposed"] == 13 and s["accepted"] == 2
    assert len(logs) == 11 and all(line.startswith("llm[steptp] m: rejected (") for line in logs)
    assert not any("\n" in line or "[leirc prompt" in line for line in logs)  # one line each, never the prompt


def test_a_transformed_program_replays_as_a_step(llm_server, root):
    prop, _ = steptp(llm_server)
    llm_server.push(ok(json.dumps({"leir": FOLDED})))
    (p,) = prop.propose(root, 1, random.Random(0))
    again = Program.from_text(SMALL).apply(Step.from_json(json.loads(json.dumps(p.step.to_json()))))
    assert again.program.fingerprint == Program.from_text(FOLDED).fingerprint and again.numerics == "approximate"


def test_a_step_tp_record_answer_falls_back_to_its_program(llm_server, root):
    prop, _ = steptp(llm_server)
    llm_server.push(ok(json.dumps({"transformed_IR": FOLDED, "applied_strategy": "loop_split",
                                   "step": {"strategy": "loop_split", "args": {"loop": "N0.i", "factor": 7}}})))
    (p,) = prop.propose(root, 1, random.Random(0))
    assert p.step.name == "program_rewrite" and prop.stats()["rejected"] == {}


def test_an_endpoint_failure_is_counted_and_the_search_goes_on(llm_server, root):
    prop, logs = steptp(llm_server)
    llm_server.set_default(server_error(503))
    assert prop.propose(root, 4, random.Random(0)) == []
    assert prop.stats()["rejected"] == {"llm_error:server": 1} and prop.stats()["failed_calls"] == 1
    assert logs and logs[-1].startswith("llm[steptp]: rejected (llm_error:server)")


def test_an_ensemble_of_two_models_alternates(llm_server, root):
    prop, _ = steptp(llm_server, models=("alpha", "beta"))
    llm_server.responder = lambda req: ok(json.dumps(PAR))
    sources = [prop.propose(root, 1, random.Random(0))[0].source for _ in range(4)]
    assert sources == ["llm:alpha", "llm:beta", "llm:alpha", "llm:beta"]
    assert [r["json"]["model"] for r in llm_server.chat_requests] == ["alpha", "beta", "alpha", "beta"]
    assert set(prop.stats()["by_model"]) == {"alpha", "beta"}


def test_history_and_failures_reach_the_next_prompt(llm_server, root):
    prop, _ = steptp(llm_server)
    root.evaluation = Evaluation(root.fingerprint, True, None, None, TimingResult(True, median_ms=4.0), 0.1, 0.2)
    par = Step.from_json(PAR)
    kid = child(root, par, ms=2.0)
    assert node_history(kid) == [{"step": par, "ms": 2.0, "effect": 2.0, "speedup": 2.0}]
    llm_server.push(ok(json.dumps(VEC)), ok(json.dumps(VEC)))
    (p,) = prop.propose(kid, 1, random.Random(0))
    assert '1. {"strategy":"loop_parallelization","args":{"loop":"N0.i"}}: 2 ms, x2 over its parent' in \
        user_text(llm_server.chat_requests[0])
    # the search tells every proposer how each candidate fared; this one counts its own
    failed = Evaluation("f", False, "mismatch", None, None, 0.1, 0.2)
    prop.observe(kid, p.step, failed)
    prop.observe(kid, Step.make("loop_unrolling", loop="N0.j"), failed)  # not its proposal: not counted
    s = prop.stats()
    assert s["rejected"] == {"verify_failed": 1} and s["failed_evaluations"] == {"mismatch": 1}
    prop.propose(kid, 1, random.Random(0))
    assert '- {"strategy":"loop_vectorization","args":{"loop":"N0.j"}}: failed: mismatch' in \
        user_text(llm_server.chat_requests[1])


def test_a_verified_proposal_is_counted(llm_server, root):
    prop, _ = steptp(llm_server)
    llm_server.push(ok(json.dumps(PAR)))
    (p,) = prop.propose(root, 1, random.Random(0))
    prop.observe(root, p.step, Evaluation("f", True, None, None, TimingResult(True, median_ms=1.0), 0.1, 0.2))
    assert prop.stats()["verified"] == 1 and prop.stats()["rejected"] == {}


def test_the_key_never_reaches_logs_or_stats(llm_server, root, monkeypatch):
    secret = "sk-leirc-test-0123456789-do-not-leak"
    monkeypatch.setenv("LEIRC_TEST_KEY", secret)
    logs: list[str] = []
    c = LLMClient(LLMConfig(base_url=llm_server.url, models=("m",), key_env="LEIRC_TEST_KEY", max_retries=0, reasks=0),
                  log=logs.append)
    prop = StepTPProposer(c, MenuProposer("llvm"), log=logs.append)
    llm_server.push(ok("nothing useful"), server_error(500, text=f"bad key {secret}"))
    prop.propose(root, 1, random.Random(0))
    prop.propose(root, 1, random.Random(0))
    assert llm_server.chat_requests[0]["headers"].get("Authorization") == f"Bearer {secret}"
    assert secret not in "\n".join(logs) and secret not in json.dumps(prop.stats())
    assert prop.stats()["rejected"] == {"no_json": 1, "llm_error:server": 1}


# ---------------------------------------------------------------------------
# Autocomp


def test_autocomp_plans_then_implements_each_expansion(llm_server, root):
    c = client(llm_server, models=("planner", "coder"))
    prop = AutocompProposer(c, MenuProposer("llvm"), keep=1.0, plans=1, max_depth=6)
    llm_server.push(ok(json.dumps({"option": 0, "plan": "parallelize N0.i with loop_parallelization"})),
                    ok(json.dumps(PAR)))
    (p,) = prop.propose(root, 4, random.Random(0))
    plan_req, impl_req = llm_server.chat_requests
    assert (plan_req["json"]["model"], impl_req["json"]["model"]) == ("planner", "coder")
    plan_text, impl_text = user_text(plan_req), user_text(impl_req)
    assert plan_text.startswith("[leirc prompt autocomp_plan.v1]") and "phase 1 of 6" in plan_text
    assert "cost model estimate:" in plan_text and "footprint of the interface tensors: 0.01638 MB" in plan_text
    assert "(measured)" not in plan_text  # the root of this test was never timed
    assert impl_text.startswith("[leirc prompt autocomp_implement.v1]")
    assert "parallelize N0.i with loop_parallelization" in impl_text
    assert "(menu option: loop_parallelization)" in impl_text
    # the in-context example is the chosen strategy's own (real, tested) example
    assert "Step: {\"strategy\":\"loop_parallelization\"" in impl_text
    assert p.step == Step.from_json(PAR) and p.source == "llm:coder" and "plan (planner)" in p.rationale
    s = prop.stats()
    assert s["mode"] == "autocomp" and s["calls"] == 2 and s["accepted"] == 1
    assert set(s["by_model"]) == {"planner", "coder"}


def test_autocomp_menu_dropout_comes_from_the_search_rng(llm_server, root):
    c = client(llm_server)
    prop = AutocompProposer(c, MenuProposer("llvm"), keep=0.5, plans=2)
    llm_server.responder = lambda req: ok('{"plan": "no idea"}') if "autocomp_plan" in req["messages"][1]["content"] \
        else ok(json.dumps(PAR))
    full = [o["strategy"] for o in prop.menu_options(root.program)]
    menus = []
    for _ in range(2):
        n0 = len(llm_server.chat_requests)
        prop.propose(root, 2, random.Random(7))
        plans = [user_text(r) for r in llm_server.chat_requests[n0:] if "autocomp_plan" in user_text(r)]
        menus.append([[line.split(". ", 1)[1].split(":")[0] for line in t.splitlines() if line[:1].isdigit()]
                      for t in plans])
    menus = [sorted(m) for m in menus]  # the two plan calls run concurrently: arrival order is not theirs
    assert menus[0] == menus[1]  # the same seed, the same menus
    assert len(menus[0]) == 2
    for m in menus[0]:
        assert m and set(m) <= set(full) and len(m) <= len(full)
    assert menus[0][0] != menus[0][1] or len(full) == 1  # each plan draws its own menu
    # renumbered: no gaps
    plan_text = next(user_text(r) for r in llm_server.chat_requests if "autocomp_plan" in user_text(r))
    nums = [int(line.split(".", 1)[0]) for line in plan_text.splitlines() if line[:1].isdigit()]
    assert nums == list(range(1, len(nums) + 1))


def test_autocomp_bad_plan_and_an_early_implementation(llm_server, root):
    c = client(llm_server)
    prop = AutocompProposer(c, MenuProposer("llvm"), keep=1.0, plans=2)
    llm_server.push(ok("I am not sure"), ok(json.dumps(PAR)))  # two plans; the second skipped ahead to a step
    got = prop.propose(root, 2, random.Random(0))
    assert [p.step for p in got] == [Step.from_json(PAR)] and len(llm_server.chat_requests) == 2
    assert prop.stats()["rejected"] == {"no_json": 1}


# ---------------------------------------------------------------------------
# HTAM + LLM


def test_htam_the_memory_picks_the_direction_and_the_llm_ranks_inside_it(llm_server, root):
    menu = MenuProposer("llvm")
    memory = Memory(None, target="llvm")
    prop = HTAMLLMProposer(client(llm_server), menu, memory, temperature=0.5)
    items = [m for m in menu.menu(root.program) if menu.allowed(root, m)]
    dirs = sorted({m.direction for m in items})
    want = memory.choose_direction([], random.Random(3), 0.5, allowed=dirs)
    in_dir = [m for m in items if m.direction == want]
    n = min(len(in_dir), 10)
    ranking = list(range(n, 0, -1)) + [99]  # the model reverses the memory's order, and names a number not listed
    llm_server.push(ok(json.dumps({"ranking": ranking, "rationales": {str(n): "best for this code"}})))
    got = prop.propose(root, 20, random.Random(3))
    assert {p.direction for p in got} == {want}
    text = user_text(llm_server.chat_requests[0])
    assert text.startswith("[leirc prompt htam_rank.v1]") and f'direction "{want}"' in text
    listed = [json.loads(line.split(". ", 1)[1].split(" (predicted")[0]) for line in text.splitlines()
              if line[:1].isdigit() and ". {" in line]
    assert len(listed) == n
    assert [p.step.to_json() for p in got] == [listed[r - 1] for r in range(n, 0, -1)]
    assert got[0].rationale.endswith("best for this code") and got[0].source == "llm:m"
    assert prop.stats()["rejected"] == {"bad_ranking": 1}


def test_htam_without_an_answer_keeps_the_memorys_order(llm_server, root):
    menu = MenuProposer("llvm")
    prop = HTAMLLMProposer(client(llm_server), menu, Memory(None, target="llvm"))
    llm_server.push(ok("[not json"))
    got = prop.propose(root, 3, random.Random(3))
    assert got and all(p.source == "htam" and "not ranked by the LLM" in p.rationale for p in got)
    assert prop.stats()["rejected"] == {"no_json": 1}


# ---------------------------------------------------------------------------
# the search's door and the editor's


@pytest.mark.parametrize("mode,cls", [("steptp", StepTPProposer), ("autocomp", AutocompProposer),
                                      ("htam", HTAMLLMProposer)])
def test_build_llm_proposer_picks_the_mode(llm_server, mode, cls):
    cfg = LLMConfig(base_url=llm_server.url, models=("m",), mode=mode)
    opts = SearchOptions(proposers=("llm",), llm=cfg, keep=0.5)
    p = build_llm_proposer(opts, Memory(None), MenuProposer("llvm"))
    assert type(p) is cls and p.name == "llm" and p.mode == mode
    if mode == "autocomp":
        assert p.keep == 0.5 and p.stats()["keep"] == 0.5
    p.close()


def test_build_llm_proposer_without_an_endpoint_is_a_clear_error():
    from leirc.search.core import SearchError

    with pytest.raises(SearchError, match="needs an endpoint"):
        build_llm_proposer(SearchOptions(proposers=("llm",)), Memory(None), MenuProposer("llvm"))


def test_build_llm_proposer_with_a_missing_key_variable(llm_server, monkeypatch):
    from leirc.search.core import SearchError

    monkeypatch.delenv("LEIRC_NO_SUCH_KEY", raising=False)
    cfg = LLMConfig(base_url=llm_server.url, models=("m",), key_env="LEIRC_NO_SUCH_KEY")
    with pytest.raises(SearchError, match="LEIRC_NO_SUCH_KEY"):
        build_llm_proposer(SearchOptions(proposers=("llm",), llm=cfg), Memory(None), MenuProposer("llvm"))


def test_llm_suggest_ranks_legal_steps_and_counts_the_rest(llm_server):
    p = Program.from_text(SMALL)
    c = client(llm_server)
    llm_server.push(ok(answers(VEC, {"strategy": "loop_split", "args": {"loop": "N0.i", "factor": 5}}, PAR,
                               {"steps": [PAR, VEC]})))
    got = llm_suggest(p, c, k=3)
    assert isinstance(got, LLMSuggestions)
    assert [s.step for s in got] == [Step.from_json(VEC), Step.from_json(PAR)]
    assert [s.score for s in got] == [1.0, 0.5]
    assert got[0].rationale == "LLM (m): unit stride" and got[0].direction == "vectorization"
    assert got.stats["rejected"] == {"not_applicable": 1, "multi_step": 1} and got.stats["accepted"] == 2
    assert "Propose up to 3 different steps" in user_text(llm_server.chat_requests[0])
    for s in got:
        p.apply(s.step)  # every suggestion is legal as it is


def test_llm_suggest_when_the_endpoint_fails(llm_server):
    llm_server.set_default(server_error(500))
    got = llm_suggest(Program.from_text(SMALL), client(llm_server), k=2)
    assert got == [] and got.stats["rejected"] == {"llm_error:server": 1} and "error" in got.stats


@pytest.mark.slow
def test_a_search_applies_good_answers_and_replays_offline_from_the_cache(tmp_path):
    """The issue's end-to-end: a search with the LLM proposer against the scripted server
    finishes, takes the good answers, refuses the bad ones by reason, and the same search
    runs again offline from the prompt cache with the server gone."""
    cache = str(tmp_path / "llm.sqlite")
    src = Program.from_text(SMALL)

    def run(cfg):
        opts = SearchOptions(algo="greedy", budget=2, proposers=("llm",), llm=cfg, branch=2, patience=0, allow_approximate=True,
                             max_depth=2, threads=1, cache_dir=str(tmp_path / "eval"))
        return Search(src, opts).run()

    with ScriptedLLMServer() as server:
        server.responder = lambda req: ok(answers({"leir": FOLDED, "rationale": "fold"}, {"strategy": "nope"}, PAR))
        first = run(LLMConfig(base_url=server.url, models=("m",), cache=cache, max_retries=0))
        n_requests = len(server.chat_requests)
    s = first.proposer_stats["llm"]
    assert first.evaluations >= 1 and n_requests >= 1 and s["calls"] == n_requests
    assert s["rejected"].get("unknown_strategy", 0) >= 1 and s["accepted"] >= 1
    tried = {c["step"] for c in first.to_json()["candidates"] if c["step"]}
    assert any(t.startswith("program_rewrite(") for t in tried)
    again = run(LLMConfig(base_url="http://127.0.0.1:9/v1", models=("m",), cache=cache, offline=True))
    assert again.proposer_stats["llm"]["cached_calls"] == again.proposer_stats["llm"]["calls"] == s["calls"]
    assert [x["step"] for x in again.to_json()["candidates"]] == [x["step"] for x in first.to_json()["candidates"]]
    # The replay proposes and builds the same programs; which of them is fastest is a
    # measurement (a 64x32 kernel, timed under CI's load), so only the trajectory is compared.
    evaluated = lambda r: [n.fingerprint for n in r.nodes if n.evaluation is not None]  # noqa: E731
    assert evaluated(again) == evaluated(first)
    assert again.best.fingerprint in evaluated(first) and again.best.ok


def test_a_refused_step_is_named_in_the_next_prompt_at_that_node(llm_server, root):
    prop, _ = steptp(llm_server)
    bad = {"strategy": "loop_split", "args": {"loop": "N0.i", "factor": 3}}
    llm_server.push(ok(json.dumps(bad)), ok(json.dumps(PAR)))
    assert prop.propose(root, 1, random.Random(0)) == []
    assert [p.step for p in prop.propose(root, 1, random.Random(0))] == [Step.from_json(PAR)]
    first, second = (user_text(r) for r in llm_server.chat_requests)
    line = '- {"strategy":"loop_split","args":{"factor":3,"loop":"N0.i"}}: refused: not_applicable'
    assert line not in first and line in second


def test_autocomp_feedback_of_a_timed_node_is_measured(llm_server, root):
    prop = AutocompProposer(client(llm_server), MenuProposer("llvm"), keep=1.0, plans=1)
    root.evaluation = Evaluation(root.fingerprint, True, None, None, TimingResult(True, median_ms=0.5), 0.1, 0.2)
    fb = prop.feedback(root)
    assert fb["ms"] == 0.5 and fb["gops"] > 0 and 0 < fb["compute_util"] < 1 and fb["peak_gbs"] > 0
    llm_server.push(ok('{"plan": "x"}'), ok(json.dumps(PAR)))
    prop.propose(root, 1, random.Random(0))
    text = user_text(llm_server.chat_requests[0])
    assert "- latency: 0.5 ms (measured)" in text and "GFLOP/s" in text and "GB/s" in text
