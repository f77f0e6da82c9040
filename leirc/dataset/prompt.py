"""The Step-TP single-step record format, for the dataset's chat export.

The one definition lives in :mod:`leirc.llm.prompts` (the search's LLM proposers use the
same module, so a training record and a proposer's prompt are one format); this module
re-exports it for the dataset's importers.

The user message follows the reference implementation's ``handle_dataset_v2.py`` prompt
(paraphrased there, restated in ``leirc/llm/templates/steptp_record.v1.txt``): the kernel,
the current IR, each interface tensor with its dtype and shape and the instruction not to
rename, reshape or retype it, and the request for one equivalent transformed IR plus the
applied strategy, as JSON. leirc adds the strategy's arguments (``step``), so an answer can
be replayed through the engine instead of being trusted as text. The assistant message is
``<think>`` (the grounded reasoning, :func:`leirc.dataset.reasoning.render`) followed by
``<answer>`` (the JSON).
"""

from __future__ import annotations

from ..llm.prompts import SYSTEM, answer, assistant_message, user_prompt

__all__ = ["SYSTEM", "user_prompt", "answer", "assistant_message"]
