"""Exports of a dataset: chat-template JSONL for supervised fine-tuning, and plain records;
both split into train / validation / test **by source kernel**, so no kernel contributes
shapes to two splits (a model is tested on kernels it never saw at any size).

* ``chat``: ``{"id", "split", "messages": [{"role": "system"}, {"role": "user"},
  {"role": "assistant"}]}`` -- the OpenAI/TRL/MS-Swift ``messages`` layout that chat
  templates (Qwen's included) consume; the user message is the Step-TP single-step prompt
  (:mod:`.prompt`) on the compact LEIR, the assistant message ``<think>`` + ``<answer>``.
* ``plain``: the record's stable fields (ids, source, instance, strategy, level, step,
  original and transformed LEIR, reasoning, verification, measured effect).

Multi-step records (``leirc dataset trajectory``, ``kind == "trajectory"``) are exported
**one example per verified step, with the preceding steps in the prompt**, not as one
conversation of user/assistant turn pairs: Step-TP's multi-step searches call the model
afresh at every node with the current IR, its measured speedup and the steps that led to it
(``swift_*_optimization.py``; ``../shared/notes/leir-reference-notation.md`` d.4), so a
training example is exactly one such call. Example ``i`` is the single-step record format
above on the program after steps ``0..i-1``, followed by those steps with the speedup
measured after each (over its parent and over the root: the history block of the search's
LLM proposer, :func:`leirc.llm.prompts.history_text`); its answer is step ``i``, whose
``<think>`` states step ``i``'s own measured effect. The example's ``speedup_vs_root`` and
``speedup_vs_previous`` are the speedups after step ``i``. Only the verified prefix of a
trajectory is exported; ``plain`` writes the trajectory record itself. Splits follow the
source id, as for single-step records, so one kernel's single steps and trajectories land
in the same split.
"""

from __future__ import annotations

import hashlib
import os
from typing import Iterable

from ..io import write_atomic
from ..llm.prompts import history_text
from ..llm import prompts as prompt  # the one prompt module (the LLM proposers ask in this format)
from .reasoning import render
from .store import jsonl

FORMATS = ("chat", "plain")
SPLITS = ("train", "validation", "test")
DEFAULT_FRACTIONS = (0.8, 0.1, 0.1)


def split_of(source_id: str, seed: int = 0, fractions=DEFAULT_FRACTIONS) -> str:
    u = int.from_bytes(hashlib.sha256(f"{seed}:split:{source_id}".encode()).digest()[:8], "big") / 2.0 ** 64
    acc = 0.0
    for name, f in zip(SPLITS, fractions):
        acc += f
        if u < acc:
            return name
    return SPLITS[-1]


def _text(side: dict) -> str:
    return side.get("leir_compact") or side["leir"]


def chat_example(r: dict, split: str) -> dict:
    inst = r["instance"]
    user = prompt.user_prompt(r["source"]["kernel"], _text(r["original"]), inst.get("inputs", {}),
                              inst.get("outputs", {}), r.get("generator", {}).get("target", "llvm"))
    reasoning = dict(r["reasoning"])
    think = render(reasoning, r["strategy"])
    return {"id": r["id"], "split": split, "source": r["source"]["id"], "strategy": r["strategy"], "level": r["level"],
            "messages": [{"role": "system", "content": prompt.SYSTEM}, {"role": "user", "content": user},
                         {"role": "assistant", "content": prompt.assistant_message(
                             think, _text(r["transformed"]), r["strategy"], r["step"])}]}


#: the heading of the history block (the wording of the search proposer's Step-TP prompt)
HISTORY_HEADING = "Steps that produced this program, with their measured effect:"


def _signature(r: dict) -> dict:
    sig = r.get("signature")
    if sig is None:  # a record written before trajectories carried their interface
        from ..engine.program import Program

        k = Program.from_text(r["original"]["leir"]).kernel
        sig = {"inputs": {p.name: [p.dtype, list(p.shape)] for p in k.inputs},
               "outputs": {p.name: [p.dtype, list(p.shape)] for p in k.outputs}}
    return sig


def verified_steps(r: dict) -> list:
    """The states of a trajectory record up to (not including) the first that failed."""
    out = []
    for s in r.get("steps", []):
        if not (s.get("verification") or {}).get("ok"):
            break
        out.append(s)
    return out


def trajectory_examples(r: dict, split: str) -> list[dict]:
    """One chat example per verified step of trajectory record ``r`` (see the module docstring)."""
    from ..strategies import Step

    sig = _signature(r)
    target = r.get("generator", {}).get("target", "llvm")
    kernel = r["source"]["kernel"]
    out, history, current = [], [], _text(r["original"])
    for s in verified_steps(r):
        t = s.get("timing") or {}
        user = prompt.user_prompt(kernel, current, sig["inputs"], sig["outputs"], target)
        user += f"\n{HISTORY_HEADING}\n{history_text(history)}"
        after = s.get("leir_compact") or s["leir"]
        think = render(s["reasoning"], s["strategy"])
        out.append({"id": f"{r['id']}.{s['index']}", "split": split, "source": r["source"]["id"],
                    "trajectory": r["id"], "index": s["index"], "strategy": s["strategy"], "level": s["level"],
                    "numerics": s.get("numerics"), "speedup_vs_root": t.get("speedup_vs_root"),
                    "speedup_vs_previous": t.get("speedup_vs_previous"),
                    "messages": [{"role": "system", "content": prompt.SYSTEM}, {"role": "user", "content": user},
                                 {"role": "assistant", "content": prompt.assistant_message(
                                     think, after, s["strategy"], s["step"])}]})
        history.append({"step": Step.from_json(s["step"]), "ms": t.get("ms"), "effect": t.get("speedup_vs_previous"),
                        "speedup": t.get("speedup_vs_root")})
        current = after
    return out


def plain_example(r: dict, split: str) -> dict:
    keys = ("id", "source", "instance", "strategy", "level", "numerics", "step", "site", "original", "transformed",
            "reasoning", "verification", "timing", "tokens")
    return {"split": split, **{k: r.get(k) for k in keys if k in r}}


def export(records: Iterable[dict], out_dir: str, *, fmt: str = "chat", seed: int = 0,
           fractions=DEFAULT_FRACTIONS) -> dict:
    """Write ``out_dir/{train,validation,test}.jsonl``; returns counts per split (and sources)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r} (expected {' or '.join(FORMATS)})")
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-6:
        raise ValueError(f"split fractions must be three non-negative numbers summing to 1, got {list(fractions)}")
    make = chat_example if fmt == "chat" else plain_example
    by_split: dict = {s: [] for s in SPLITS}
    sources: dict = {s: set() for s in SPLITS}
    for r in records:
        sp = split_of(r["source"]["id"], seed, fractions)
        if r.get("kind") == "trajectory":
            got = (trajectory_examples(r, sp) if fmt == "chat"
                   else [dict(r, split=sp, steps=verified_steps(r))] if verified_steps(r) else [])
        elif r.get("status") == "ok":
            got = [make(r, sp)]
        else:
            continue
        by_split[sp].extend(got)
        if got:
            sources[sp].add(r["source"]["id"])
    os.makedirs(out_dir, exist_ok=True)
    for sp in SPLITS:
        write_atomic(os.path.join(out_dir, f"{sp}.jsonl"), jsonl(by_split[sp]))
    return {sp: {"examples": len(by_split[sp]), "sources": len(sources[sp])} for sp in SPLITS}


__all__ = ["export", "split_of", "chat_example", "plain_example", "trajectory_examples", "verified_steps",
           "FORMATS", "SPLITS", "HISTORY_HEADING"]
