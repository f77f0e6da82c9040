"""Reading a model's answer: the JSON in it, and what kind of answer it is.

A model's text is untrusted. It may wrap the JSON in prose, in a ```json fence or in
``<answer>...</answer>`` tags, precede it with a ``<think>`` block, or give several JSON
objects (the first one that is an answer wins). JSON is not repaired: a trailing comma or a
single-quoted key is malformed, and the answer is refused as such. Every refusal is a
:class:`Rejected` with a stable ``reason`` code that callers count:

``empty`` no text · ``too_long`` over :data:`MAX_ANSWER_CHARS` · ``no_json`` no JSON in it ·
``malformed_json`` something that starts like JSON and does not decode · ``bad_shape`` JSON
that is not an answer (no strategy, program, plan or ranking) · ``illegal_arguments`` a
step whose ``args`` is not an object.

The proposers add the reasons of what comes after parsing: ``unknown_strategy``,
``not_applicable``, ``parse_error``, ``check_error``, ``interface_changed``, ``no_change``,
``verify_failed``, ``llm_error:<kind>``.

Answer shapes (:func:`parse_answer`):

* ``{"strategy": name, "args": {...}, "rationale"}`` -> a ``step``;
* ``{"steps": [{"strategy", "args"}, ...]}`` -> a ``step`` with all of them in ``steps``;
* ``{"leir": text}`` (or ``"transformed_IR"``, ``"program"``) -> a ``program``;
* Step-TP's record answer ``{"applied_strategy", "step": {"strategy", "args"},
  "transformed_IR"}`` -> a ``step`` that also carries the program text;
* ``{"plan": text, "option": n}`` -> a ``plan``; ``{"ranking": [n, ...]}`` -> a ``ranking``.

:func:`parse_answers` reads a list of them (``{"answers": [...]}`` or a JSON array).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Optional

from ..strategies import Step

#: a longer answer is refused before any scanning
MAX_ANSWER_CHARS = 400_000
#: rationales are kept to this many characters
MAX_RATIONALE_CHARS = 600

PROGRAM_KEYS = ("leir", "transformed_IR", "transformed_ir", "program")
LIST_KEYS = ("answers", "suggestions", "candidates")
RATIONALE_KEYS = ("rationale", "reason", "reasoning", "explanation", "why")


@dataclass(frozen=True)
class Answer:
    kind: str  # "step" | "program" | "plan" | "ranking"
    step: Optional[Step]
    program_text: Optional[str]
    rationale: str
    raw: dict
    steps: tuple = ()  # every step of a multi-step answer (step is the first)
    plan: str = ""
    option: Optional[int] = None  # the menu number a plan chose
    ranking: tuple = ()  # numbers as the prompt listed them, best first
    notes: dict = field(default_factory=dict)  # per ranked number: the model's reason


class Rejected(Exception):
    """An answer refused for ``reason`` (a stable code); ``detail`` says more."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


_THINK_END = re.compile(r"</think\s*>", re.I)
_ANSWER_TAG = re.compile(r"<answer\s*>(.*?)(?:</answer\s*>|$)", re.I | re.S)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n?(.*?)(?:```|$)", re.S)
#: where a JSON object or array plausibly starts (a LEIR body such as ``{L^{8}...`` does not)
_JSON_START = re.compile(r"\{\s*(?:[\"'}]|[A-Za-z_][A-Za-z0-9_]*\s*:)|\[\s*(?:[\"'\]{\[]|-?\d|true|false|null)")


def _regions(text: str) -> list[str]:
    """Where to look, most specific first: <answer> tags (only them, when there are any),
    else fenced blocks (json ones first), then the prose around them. A <think> block is
    never read."""
    m = list(_THINK_END.finditer(text))
    if m:
        text = text[m[-1].end():]
    tags = [g for g in _ANSWER_TAG.findall(text) if g.strip()]
    if tags:
        return tags
    fences = [(lang.lower(), body) for lang, body in _FENCE.findall(text) if body.strip()]
    prose = _FENCE.sub("\n", text)
    return [b for lang, b in fences if lang == "json"] + [b for lang, b in fences if lang != "json"] + [prose]


def _skip_balanced(text: str, i: int) -> int:
    """The index after the bracket that closes the one at ``i`` (strings respected), or
    the end of the text: a malformed object is skipped whole, its insides never read as
    answers of their own."""
    stack, j, n = [], i, len(text)
    in_str = esc = False
    pairs = {"{": "}", "[": "]"}
    while j < n:
        c = text[j]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in pairs:
            stack.append(pairs[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return j + 1
        j += 1
    return n


def json_values(text: str) -> tuple[list, bool]:
    """The top-level JSON objects (and arrays holding objects) in ``text`` in order, and
    whether something that looked like JSON failed to decode."""
    dec = json.JSONDecoder()
    values, malformed = [], False
    for region in _regions(text):
        i, n = 0, len(region)
        while i < n:
            c = region[i]
            if c not in "{[":
                i += 1
                continue
            try:
                v, end = dec.raw_decode(region, i)
            except json.JSONDecodeError:
                if _JSON_START.match(region, i):
                    malformed = True
                i = _skip_balanced(region, i) if c == "{" or _JSON_START.match(region, i) else i + 1
                continue
            # an array of scalars is not an answer (``f32[8]`` in prose decodes as one)
            if isinstance(v, dict) or (isinstance(v, list) and any(isinstance(x, dict) for x in v)):
                values.append(v)
            i = end
    return values, malformed


def _rationale(d: dict) -> str:
    for k in RATIONALE_KEYS:
        v = d.get(k)
        if isinstance(v, str) and v.strip():
            return v.strip()[:MAX_RATIONALE_CHARS]
    return ""


def _step_of(d, where: str = "step") -> Step:
    name = d.get("strategy") if isinstance(d, dict) else None
    if not isinstance(name, str) or not name.strip():
        raise Rejected("bad_shape", f"the {where} has no strategy name")
    args = d.get("args", d.get("arguments", {}))
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise Rejected("illegal_arguments", f"the arguments of {name} are not a JSON object")
    for k, v in args.items():
        # a step is data that hashes (traces, de-duplication): scalars and lists of scalars only
        if not (_scalar(v) or (isinstance(v, list) and all(_scalar(x) for x in v))):
            raise Rejected("illegal_arguments", f"argument '{k}' of {name} is not a scalar or a list of scalars")
    return Step.make(name.strip(), **args)


def _scalar(v) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _int(v) -> Optional[int]:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v.strip())
    return None


def answer_of(d) -> Answer:
    """The answer one decoded JSON value is, or Rejected."""
    if not isinstance(d, dict):
        raise Rejected("bad_shape", "the JSON is not an object")
    why = _rationale(d)
    program = next((d[k] for k in PROGRAM_KEYS if isinstance(d.get(k), str) and d[k].strip()), None)
    if isinstance(d.get("steps"), list) and d["steps"]:
        steps = tuple(_step_of(s, "step") for s in d["steps"])
        return Answer("step", steps[0], program, why, d, steps=steps)
    if "strategy" in d:
        st = _step_of(d)
        return Answer("step", st, program, why, d, steps=(st,))
    if isinstance(d.get("step"), dict):  # Step-TP's record answer: the step replays, the text is a fallback
        st = _step_of(d["step"])
        return Answer("step", st, program, why, d, steps=(st,))
    if program is not None:
        return Answer("program", None, program, why, d)
    if isinstance(d.get("plan"), str) and d["plan"].strip():
        return Answer("plan", None, None, why, d, plan=d["plan"].strip(), option=_int(d.get("option")))
    if isinstance(d.get("ranking"), list):
        ranks = [_int(x) for x in d["ranking"]]
        if not ranks or any(r is None for r in ranks):
            raise Rejected("bad_shape", "the ranking is not a list of numbers")
        notes = {}
        raw_notes = d.get("rationales")
        if isinstance(raw_notes, dict):
            notes = {_int(k): str(v)[:MAX_RATIONALE_CHARS] for k, v in raw_notes.items() if _int(k) is not None}
        elif isinstance(raw_notes, list):
            notes = {r: str(v)[:MAX_RATIONALE_CHARS] for r, v in zip(ranks, raw_notes)}
        return Answer("ranking", None, None, why, d, ranking=tuple(ranks), notes=notes)
    raise Rejected("bad_shape", "the JSON has none of the keys strategy, steps, leir, plan, ranking")


def _check_text(text) -> None:
    if not isinstance(text, str) or not text.strip():
        raise Rejected("empty", "the model answered nothing")
    if len(text) > MAX_ANSWER_CHARS:
        raise Rejected("too_long", f"{len(text)} characters (at most {MAX_ANSWER_CHARS})")


def _no_answer(values: list, malformed: bool, first_error: Optional[Rejected]) -> Rejected:
    if first_error is not None and not malformed:
        return first_error
    if malformed:
        return Rejected("malformed_json", "the JSON in the answer does not decode (it is not repaired)")
    if values:
        return Rejected("bad_shape", "the JSON in the answer is not an answer")
    return Rejected("no_json", "no JSON object in the answer")


def parse_answer(text: str) -> Answer:
    """The first answer in ``text``; raises :class:`Rejected`."""
    _check_text(text)
    values, malformed = json_values(text)
    first_error: Optional[Rejected] = None
    for v in values:
        if isinstance(v, list) or (isinstance(v, dict) and any(isinstance(v.get(k), list) for k in LIST_KEYS)):
            items = v if isinstance(v, list) else next(v[k] for k in LIST_KEYS if isinstance(v.get(k), list))
            candidates = items
        else:
            candidates = [v]
        for c in candidates:
            try:
                return answer_of(c)
            except Rejected as e:  # one that looked like an answer says more than stray JSON
                if first_error is None or first_error.reason == "bad_shape":
                    first_error = e
    raise _no_answer(values, malformed, first_error)


def parse_answers(text: str, limit: Optional[int] = None) -> list:
    """Every answer of a ranked list (``{"answers": [...]}``, a JSON array, or several
    objects), best first, as :class:`Answer` or :class:`Rejected` per item (a bad item does
    not spoil the others). Raises :class:`Rejected` when the text holds no answer at all."""
    _check_text(text)
    values, malformed = json_values(text)
    items: list = []
    for v in values:
        if isinstance(v, list):
            items.extend(v)
        elif isinstance(v, dict) and any(isinstance(v.get(k), list) for k in LIST_KEYS):
            items.extend(next(v[k] for k in LIST_KEYS if isinstance(v.get(k), list)))
        else:
            items.append(v)
    out: list = []
    for it in items:
        try:
            out.append(answer_of(it))
        except Rejected as e:
            out.append(e)
    if not any(isinstance(x, Answer) for x in out):
        raise _no_answer(values, malformed, next((x for x in out if isinstance(x, Rejected)), None))
    return out[:limit] if limit is not None else out


__all__ = ["Answer", "MAX_ANSWER_CHARS", "Rejected", "answer_of", "json_values", "parse_answer", "parse_answers"]
