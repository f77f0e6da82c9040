"""Common checks every strategy test module runs (docstring example, golden output,
trace round-trip, numeric equivalence). Import from the per-strategy test modules."""

from __future__ import annotations

import json
import re
from pathlib import Path

from leirc.lang.parser import parse
from leirc.lang.printer import print_kernel, print_module
from leirc.strategies import Step, apply_step, get, replay, trace_from_json, trace_to_json

GOLDEN = Path(__file__).resolve().parent / "golden" / "strategies"
REPO = Path(__file__).resolve().parents[1]


def kernel_of(text: str):
    r = parse(text)
    assert r.ok, r.diagnostics
    return r.module.kernels[0]


def docstring_example(name: str):
    """(before kernel, step, expected after text) from the strategy's docstring lines
    ``Before:``, ``Args:``, ``After:``."""
    doc = type(get(name)).__doc__ or ""
    before = re.search(r"Before:\s*(.*)", doc)
    args = re.search(r"Args:\s*(.*)", doc)
    after = re.search(r"After:\s*(.*)", doc)
    assert before and args is not None and after, f"{name}: docstring lacks Before:/Args:/After: lines"
    kv = {}
    for tok in args.group(1).split():
        k, v = tok.split("=", 1)
        kv[k] = v
    unescape = lambda s: s.strip().replace("\\\\", "\\")  # noqa: E731
    return kernel_of(unescape(before.group(1))), Step.make(name, **kv), unescape(after.group(1))


def check_docstring_example(name: str) -> None:
    k, step, after = docstring_example(name)
    new = apply_step(k, step)
    assert print_kernel(new) == print_kernel(kernel_of(after)), (
        f"{name} docstring example:\n got      {print_kernel(new)}\n expected {after}")


def check_golden(name: str, case: str, kernel, update: bool) -> None:
    """Compare the pretty-printed ``kernel`` with tests/golden/strategies/<name>/<case>.leir."""
    path = GOLDEN / name / f"{case}.leir"
    from leirc.lang import ast as A

    text = print_module(A.Module((kernel,)), "pretty")
    if update or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if not update:
            raise AssertionError(f"golden file {path} did not exist; created it — review and commit it")
        return
    assert text == path.read_text(encoding="utf-8"), f"golden mismatch for {path} (run pytest --update-golden after review)"


def check_trace_roundtrip(source_text: str, steps: list[Step]) -> None:
    """Apply steps, dump the trace to JSON, replay it on a fresh parse: same program."""
    k = kernel_of(source_text)
    direct = replay(k, steps)
    again = replay(kernel_of(source_text), trace_from_json(trace_to_json(steps)))
    assert direct == again
    assert json.loads(trace_to_json(steps))["steps"] == [s.to_json() for s in steps]


def stdlib_text(name: str) -> str:
    return (REPO / "stdlib" / f"{name}.leir").read_text(encoding="utf-8")
