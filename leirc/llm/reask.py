"""Re-asking after a refused answer: which answer format each purpose expects, and the
feedback turn that tells the model why its answer was refused.

A model that answers in prose, with malformed JSON or in the wrong shape is asked again (at
most ``LLMConfig.reasks`` times) with the conversation so far, its own answer and the
refusal's reason, as Step-TP and Autocomp re-sample a bad generation. ``LLMClient.chat(...,
check=answer_check(purpose))`` does it; the checks are the parsers the proposers apply
afterwards, so an answer the client accepts is one the proposer can read.
"""

from __future__ import annotations

from typing import Callable, Optional

from .parse import Rejected, parse_answer, parse_answers

#: version of the feedback turn's wording (part of the re-asked prompt, hence of its cache key)
REASK_VERSION = 1

#: the answer format of each purpose the proposers and ``suggest`` ask for
_CHECKS: dict[str, Callable[[str], object]] = {
    "steptp": parse_answers,
    "suggest": parse_answers,
    "autocomp_plan": parse_answer,
    "autocomp_implement": parse_answer,
    "htam_rank": parse_answer,
}

#: what a model answered is echoed back at most this long (the reason matters, not the essay)
ECHO_CHARS = 4000


def answer_check(purpose: str) -> Optional[Callable[[str], object]]:
    """The parser an answer for ``purpose`` must pass (raises :class:`Rejected`), or None
    for a purpose with no fixed format."""
    return _CHECKS.get(purpose)


def feedback_messages(messages: list[dict], answer: str, refusal: Rejected) -> list[dict]:
    """``messages`` plus the refused answer and a user turn that says why and asks again."""
    echoed = answer if len(answer) <= ECHO_CHARS else answer[:ECHO_CHARS] + "\n[... cut]"
    why = f"{refusal.reason}: {refusal.detail}" if refusal.detail else refusal.reason
    return list(messages) + [
        {"role": "assistant", "content": echoed},
        {"role": "user", "content": f"Your answer could not be used ({why}). Answer the same request again, "
                                    "as the JSON the instructions ask for and nothing else."},
    ]


__all__ = ["REASK_VERSION", "Rejected", "answer_check", "feedback_messages"]
