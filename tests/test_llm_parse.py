"""Reading a model's answer: JSON wherever it is, never repaired, refusals with stable reasons."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leirc.llm.parse import MAX_ANSWER_CHARS, Answer, Rejected, json_values, parse_answer, parse_answers
from leirc.strategies import Step

STEP = {"strategy": "loop_split", "args": {"loop": "N0.i", "factor": 4}, "rationale": "tile for the cache"}
LEIR = r"\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*5;];}"


def rejected(text, reason: str) -> Rejected:
    with pytest.raises(Rejected) as ei:
        parse_answer(text)
    assert ei.value.reason == reason, ei.value
    return ei.value


def test_a_bare_step():
    a = parse_answer(json.dumps(STEP))
    assert a.kind == "step" and a.step == Step.make("loop_split", loop="N0.i", factor=4)
    assert a.steps == (a.step,) and a.rationale == "tile for the cache" and a.raw == STEP


def test_prose_around_the_json():
    a = parse_answer(f"Sure. The inner loop is long, so:\n{json.dumps(STEP)}\nThis should help.")
    assert a.step.name == "loop_split"


def test_a_json_fence_wins_over_other_fences_and_prose():
    text = ("Before: ```leir\n" + LEIR + "\n```\nMy answer: {\"strategy\": \"decoy\"}\n```json\n" + json.dumps(STEP)
            + "\n```")
    assert parse_answer(text).step.name == "loop_split"


def test_json_in_prose_after_a_fence_of_leir():
    text = "The program:\n```leir\n" + LEIR + "\n```\nMy step: " + json.dumps(STEP)
    assert parse_answer(text).step.name == "loop_split"
    assert len(parse_answers(text)) == 1  # found once, not once per region


def test_an_unlabelled_fence():
    assert parse_answer("```\n" + json.dumps(STEP) + "\n```").step.name == "loop_split"


def test_answer_tags_and_a_think_block_that_is_never_read():
    text = ('<think>maybe {"strategy": "loop_unrolling", "args": {"loop": "N0.k"}}</think>\n'
            f"<answer>{json.dumps(STEP)}</answer>")
    assert parse_answer(text).step.name == "loop_split"


def test_the_first_valid_of_several_objects():
    text = '{"note": "not an answer"} then {"strategy": "a", "args": {}} and {"strategy": "b", "args": {}}'
    assert parse_answer(text).step.name == "a"


def test_a_program_answer_in_any_of_its_spellings():
    for key in ("leir", "transformed_IR", "program"):
        a = parse_answer(json.dumps({key: LEIR, "rationale": "folded constants"}))
        assert a.kind == "program" and a.program_text == LEIR and a.step is None and a.rationale == "folded constants"


def test_the_step_tp_record_answer_carries_step_and_program():
    a = parse_answer(json.dumps({"transformed_IR": LEIR, "applied_strategy": "loop_split",
                                 "step": {"strategy": "loop_split", "args": {"loop": "N0.i", "factor": 2}}}))
    assert a.kind == "step" and a.step == Step.make("loop_split", loop="N0.i", factor=2) and a.program_text == LEIR


def test_several_steps_in_one_answer():
    a = parse_answer(json.dumps({"steps": [STEP, {"strategy": "loop_vectorization", "args": {"loop": "N0.i"}}]}))
    assert [s.name for s in a.steps] == ["loop_split", "loop_vectorization"] and a.step == a.steps[0]


def test_a_plan_and_its_menu_number():
    a = parse_answer('{"option": "3", "plan": "split N0.j by 16 and vectorize", "rationale": "lanes"}')
    assert (a.kind, a.option, a.plan) == ("plan", 3, "split N0.j by 16 and vectorize")
    assert parse_answer('{"plan": "something"}').option is None


def test_a_ranking_with_reasons_by_number_or_in_order():
    a = parse_answer('{"ranking": [2, "1", 3], "rationales": {"2": "vector lanes", "3": "meh"}}')
    assert a.kind == "ranking" and a.ranking == (2, 1, 3) and a.notes == {2: "vector lanes", 3: "meh"}
    b = parse_answer('{"ranking": [3, 1], "rationales": ["best", "second"]}')
    assert b.notes == {3: "best", 1: "second"}
    rejected('{"ranking": [1, "two"]}', "bad_shape")


def test_trailing_commas_are_not_repaired():
    rejected('{"strategy": "loop_split", "args": {"loop": "N0.i", "factor": 4},}', "malformed_json")


def test_single_quotes_are_not_repaired():
    rejected("{'strategy': 'loop_split', 'args': {}}", "malformed_json")


def test_a_malformed_object_is_skipped_whole():
    # the inner object is a valid step, but it belongs to a broken outer one: not an answer
    rejected('{"answers": [{"strategy": "loop_split", "args": {"loop": "N0.i", "factor": 4}}], oops}', "malformed_json")


def test_a_malformed_fence_is_malformed():
    rejected("```json\n{\"strategy\": \"loop_split\", \"args\": }\n```", "malformed_json")


def test_leir_braces_in_prose_are_not_json():
    e = rejected(f"I would rewrite it as {LEIR} which is faster.", "no_json")
    assert "no JSON" in str(e)


def test_leir_in_prose_before_the_json_does_not_hide_it():
    assert parse_answer(f"From {LEIR} we get: {json.dumps(STEP)}").step.name == "loop_split"


@pytest.mark.parametrize("text", ["", "   \n", None])
def test_empty(text):
    rejected(text, "empty")


def test_too_long_before_scanning():
    rejected("x" * (MAX_ANSWER_CHARS + 1), "too_long")


def test_json_that_is_not_an_answer():
    rejected('{"thoughts": "the loop is long"}', "bad_shape")
    rejected('[{"thoughts": 1}]', "bad_shape")
    rejected("[1, 2, 3]", "no_json")  # an array of scalars is not an answer at all


@pytest.mark.parametrize("args", ['"N0.i"', "[1, 2]", '{"loop": {"ref": "N0.i"}}', '{"factor": [{"a": 1}]}'])
def test_arguments_must_be_an_object_of_scalars(args):
    rejected(f'{{"strategy": "loop_split", "args": {args}}}', "illegal_arguments")


def test_a_list_argument_of_scalars_is_kept():
    a = parse_answer('{"strategy": "loop_reorder", "args": {"loop": "N0.i", "order": ["i", "k", "j"]}}')
    assert a.step.kwargs == {"loop": "N0.i", "order": ["i", "k", "j"]}
    hash(a.step)  # a step is data: it hashes (de-duplication, caches)


def test_a_strategy_that_is_not_a_name():
    rejected('{"strategy": 3, "args": {}}', "bad_shape")
    rejected('{"strategy": "  ", "args": {}}', "bad_shape")


def test_the_most_telling_refusal_is_reported():
    # stray JSON first, then something that was meant as a step with bad arguments
    rejected('{"note": 1} {"strategy": "loop_split", "args": 5}', "illegal_arguments")


def test_rationale_is_bounded():
    a = parse_answer(json.dumps({**STEP, "rationale": "r" * 5000}))
    assert 0 < len(a.rationale) <= 600


def test_answers_of_a_ranked_list_each_on_its_own():
    text = json.dumps({"answers": [STEP, {"strategy": "x", "args": 3}, {"leir": LEIR}]})
    got = parse_answers(text)
    assert [type(g) for g in got] == [Answer, Rejected, Answer]
    assert got[1].reason == "illegal_arguments" and got[2].kind == "program"
    assert len(parse_answers(text, limit=2)) == 2


def test_answers_as_an_array_or_as_several_objects():
    assert [a.step.name for a in parse_answers(json.dumps([STEP, STEP]))] == ["loop_split", "loop_split"]
    several = parse_answers(json.dumps(STEP) + "\n\n" + json.dumps({"leir": LEIR}))
    assert [a.kind for a in several] == ["step", "program"]


def test_answers_with_nothing_usable_is_one_refusal():
    with pytest.raises(Rejected) as ei:
        parse_answers('{"answers": [{"strategy": 1}, {"nothing": 2}]}')
    assert ei.value.reason == "bad_shape"
    with pytest.raises(Rejected) as ei:
        parse_answers("no json here")
    assert ei.value.reason == "no_json"


def test_json_values_in_order():
    vals, bad = json_values('a {"x": 1} b [2] c [{"z": 0}] d {"y": ')
    assert vals == [{"x": 1}, [{"z": 0}]] and bad


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list('{}[]":,ab 01\\\n\'') + ["true", "<answer>", "```json\n", "</think>", '"strategy"',
                                                                '"args"', '"leir"']), max_size=40).map("".join))
def test_any_text_is_an_answer_or_a_refusal(text):
    """Nothing a model writes makes the parser raise anything but Rejected."""
    try:
        a = parse_answer(text)
    except Rejected as e:
        assert e.reason in ("empty", "too_long", "no_json", "malformed_json", "bad_shape", "illegal_arguments")
    else:
        assert a.kind in ("step", "program", "plan", "ranking")
    try:
        parse_answers(text)
    except Rejected:
        pass
