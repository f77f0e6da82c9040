"""Exports of a dataset: chat-template JSONL for supervised fine-tuning, and plain records;
both split into train / validation / test **by source kernel**, so no kernel contributes
shapes to two splits (a model is tested on kernels it never saw at any size).

* ``chat``: ``{"id", "split", "messages": [{"role": "system"}, {"role": "user"},
  {"role": "assistant"}]}`` -- the OpenAI/TRL/MS-Swift ``messages`` layout that chat
  templates (Qwen's included) consume; the user message is the Step-TP single-step prompt
  (:mod:`.prompt`) on the compact LEIR, the assistant message ``<think>`` + ``<answer>``.
* ``plain``: the record's stable fields (ids, source, instance, strategy, level, step,
  original and transformed LEIR, reasoning, verification, measured effect).
"""

from __future__ import annotations

import hashlib
import os
from typing import Iterable

from ..io import write_atomic
from . import prompt
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
        if r.get("status") != "ok":
            continue
        sp = split_of(r["source"]["id"], seed, fractions)
        by_split[sp].append(make(r, sp))
        sources[sp].add(r["source"]["id"])
    os.makedirs(out_dir, exist_ok=True)
    for sp in SPLITS:
        write_atomic(os.path.join(out_dir, f"{sp}.jsonl"), jsonl(by_split[sp]))
    return {sp: {"examples": len(by_split[sp]), "sources": len(sources[sp])} for sp in SPLITS}


__all__ = ["export", "split_of", "chat_example", "plain_example", "FORMATS", "SPLITS"]
