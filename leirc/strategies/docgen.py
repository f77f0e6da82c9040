"""Generate docs/strategies.md from the registry, so the documentation cannot drift
(a test compares the file with this output). Run: ``python -m leirc.strategies.docgen``."""

from __future__ import annotations

import inspect
import re
import sys

from .base import LEVELS, all_strategies

HEADER = """# Strategies

Generated from the registry by `python -m leirc.strategies.docgen > docs/strategies.md`;
`tests/test_strategy_docs.py` fails if this file is out of date. Each strategy is an atomic,
legality-checked rewrite of a checked kernel (`leirc strategies FILE` lists where they apply,
`leirc apply FILE NAME --at SITE --arg k=v` applies one). Numerics: **bitwise** = the same
floating-point operations in the same order; **exact-in-reals** = mathematically equal, rounding may
differ (the verifier's tolerance applies); **approximate** = equal in the reals at most, but the
floating-point result may overflow, become NaN or cancel catastrophically where the original does not
(e.g. `exp(x - m)` split into `exp(x) * exp(-m)` overflows at logits near 100), or not equal at all.

Loop references are `N<i>.<index>` (top-level item i, the loop with that index; `#k` for the k-th
repeat), statement references `N<i>.S<k>` (k-th statement of item i in pre-order).
"""


def _doc_parts(cls) -> tuple[str, str]:
    doc = inspect.cleandoc(cls.__doc__ or "")
    lines = doc.splitlines()
    example = [ln for ln in lines if re.match(r"(Before|Args|After):", ln)]
    body = [ln for ln in lines if not re.match(r"(Before|Args|After):", ln)]
    return "\n".join(body).strip(), "\n".join(example)


def render() -> str:
    out = [HEADER]
    strategies = all_strategies()
    out.append("| Strategy | Level | Numerics | Arguments |\n|---|---|---|---|")
    for s in strategies:
        args = ", ".join(f"`{a.name}` ({a.kind})" for a in s.args) or "—"
        out.append(f"| [`{s.name}`](#{s.name}) | {s.level} | {s.numerics} | {args} |")
    for level in LEVELS:
        group = [s for s in strategies if s.level == level]
        if not group:
            continue
        out.append(f"\n## {level.capitalize()} level\n")
        for s in group:
            body, example = _doc_parts(type(s))
            out.append(f"### {s.name}\n")
            out.append(f"*{s.level} level, numerics: {s.numerics}*\n")
            out.append(body + "\n")
            if s.args:
                out.append("Arguments:\n")
                for a in s.args:
                    extra = f" (one of {', '.join(map(str, a.choices))})" if a.choices else ""
                    dflt = f" (default {a.default})" if a.default is not None else ""
                    out.append(f"- `{a.name}` ({a.kind}): {a.doc}{extra}{dflt}")
                out.append("")
            if example:
                out.append("Example:\n\n```\n" + example.replace("\\\\", "\\") + "\n```\n")
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":  # pragma: no cover
    sys.stdout.write(render())
