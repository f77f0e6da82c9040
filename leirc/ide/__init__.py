"""Editor services over LEIR text, pure Python (the language server wraps them).

* :func:`diagnostics` — every diagnostic of a file, also when one kernel is broken;
* :func:`code_actions` — strategy applications anchored at a position;
* :func:`apply_edits` / :func:`apply_text` — a step as minimal text edits: only the
  top-level items it changed are rewritten, comments and spelling elsewhere stay;
* :func:`evaluate_kernel` — inline verification through the engine's Evaluator;
* :class:`Document` — a document analyzed kernel by kernel with a per-kernel cache (an
  edit re-parses and re-checks one kernel), the base of :mod:`.features` (hover,
  navigation, rename, symbols, tokens, completion, formatting...), :mod:`.assists`
  (cursor-restricted strategy actions, listed without planning, planned on resolve) and
  :mod:`.suggestions` (the search's ranking, or an LLM's) that the language server wraps.

Positions are 1-based (line, column), end-exclusive, as in :class:`leirc.lang.ast.Span`.
"""

from .actions import Action, FileReport, analyze, code_actions, diagnostics, strategy_doc
from .anchors import anchor_node, anchor_span
from .edits import TextEdit, apply_edits, apply_text, apply_to_text, kernel_edits
from .document import Document
from .inline import evaluate_kernel, lens_title, outcome, run_device, summary

__all__ = ["Action", "FileReport", "TextEdit", "analyze", "diagnostics", "code_actions", "apply_edits", "apply_text", "apply_to_text",
           "kernel_edits", "anchor_node", "anchor_span", "strategy_doc", "evaluate_kernel", "summary", "Document", "outcome",
           "lens_title", "run_device"]
