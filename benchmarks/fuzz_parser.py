#!/usr/bin/env python3
"""Fuzz the LEIR parser with N random inputs (default 100000) and report what happened.

Inputs are a mix of arbitrary bytes, arbitrary Unicode text (surrogates and control
characters included), text over the LEIR alphabet, soups of grammar tokens, and programs
from stdlib/ and ../shared/compat with 1-5 random character/token edits (the majority).

For every input ``parse`` must not raise and must only return diagnostics whose code is in
``leirc.lang.diagnostics.CODES``, whose span is None or 1-based, and which ``render`` can
display. Inputs that parse cleanly are also printed in both layouts and re-parsed; the tree
must come back equal.

    python benchmarks/fuzz_parser.py                 # 100000 inputs, seed 0
    python benchmarks/fuzz_parser.py --n 5000 --seed 7 --jobs 2

Prints counts of inputs by kind, outcomes, diagnostics by code, crashes (with a repro) and
the elapsed time. Exit status 1 if anything crashed or broke the contract.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from leirc.lang.diagnostics import CODES, render  # noqa: E402
from leirc.lang.parser import parse  # noqa: E402
from leirc.lang.printer import print_module  # noqa: E402

COMPAT = ROOT.parent / "shared" / "compat"
STDLIB = ROOT / "stdlib"

TOKENS = [
    "\\kernel", "L^{4}_{i=0}", "B_{tx=0}^{16}", "P^{2}_{j=-1}", "V^{8}_{v=0}", "U^{3}_{u=0}", "[", "]", "];", ";",
    "[^{ap_0}", "]^{ap_0};", "]^{bd_0};", "^{", "_{", "{", "}", "(", ")", ",", "=", ":", "->", "align(0,4,5)", "align",
    "A^{f32,g}", "C^{i64,s}_{i}", "A^{f33,g}", "A^{c64,g}", "A^{f32,q}", "tx", "a", "i", "inf", "-inf", "\\infty",
    "0", "1", "1.5", "1e-05", "1.0e-5", "2.5E+3", "1e999", "123456789012345678901234567890", ".5", "1.",
    "+", "-", "*", "/", "//", "%", "**", "<", "<=", ">", ">=", "==", "!=", "&", "|", "&&", "||",
    "exp(", "max(", "if_then_else(", "f32(", "nope(", "\\exp", "\\frac{", "\\sqrt{", "\\cdot", "\\times",
    "\\le", "\\geq", "\\neq", "\\land", "\\lor", "\\max", "\\ln", "\\left(", "\\right)", "\\foo",
    " ", "\n", "\t", "% comment\n", "%", "\x00", "\ufeff", "\u00e9", "\ud800", "\U0001F600",
]
TOKEN_RE = re.compile(r"\\[A-Za-z]+\(?|[LPVUB]\^\{\d+\}_\{[A-Za-z0-9]+=-?\d+\}|[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*"
                      r"|\d+\.\d*(?:[eE][-+]?\d+)?|\d+|->|\^\{|_\{|\*\*|//|[<>=!]=|&&|\|\||\s+|\S")
LEIR_CHARS = "LPVUBAtxai^_{}[]();=,+-*/%<>!&|.0123456789eE\\ \n"
KINDS = ["bytes", "text", "leir_chars", "token_soup", "mutant"]
WEIGHTS = [1, 1, 1, 2, 10]


def load_corpus() -> list[str]:
    progs = [p.read_text(encoding="utf-8") for p in sorted(STDLIB.rglob("*.leir"))] if STDLIB.is_dir() else []
    for name, fields in (("steptp_emitted_level1.jsonl", ("IR",)), ("steptp_strategy_outputs.jsonl", ("original", "transformed"))):
        f = COMPAT / name
        if not f.is_file():
            continue
        for line in f.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            rec = json.loads(line)
            for fld in fields:
                v = rec.get(fld)
                for t in (v if isinstance(v, list) else [v]):
                    if isinstance(t, str) and t.strip():
                        progs.append(t)
    if not progs:
        progs = ["B^{512}_{tx=0}L^{768}_{a=0}L^{1024}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];"]
    return progs


def rand_char(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.6:
        return rng.choice(LEIR_CHARS)
    if r < 0.8:
        return chr(rng.randrange(0, 128))
    return chr(rng.randrange(0, 0x110000))  # any code point, surrogates included


def mutate(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(1, 5)):
        op = rng.choice(["insert_char", "delete_chars", "replace_char", "insert_token", "delete_token",
                         "replace_token", "duplicate", "truncate", "swap_tokens"])
        n = len(text)
        pos = rng.randint(0, n)
        if op == "insert_char":
            text = text[:pos] + rand_char(rng) + text[pos:]
        elif op == "delete_chars" and n:
            text = text[:pos] + text[min(n, pos + rng.randint(1, 8)):]
        elif op == "replace_char" and pos < n:
            text = text[:pos] + rand_char(rng) + text[pos + 1:]
        elif op == "insert_token":
            text = text[:pos] + rng.choice(TOKENS) + text[pos:]
        elif op == "duplicate" and n:
            end = min(n, pos + rng.randint(1, 40))
            text = text[:end] + text[pos:end] + text[end:]
        elif op == "truncate":
            text = text[:pos]
        elif op in ("delete_token", "replace_token", "swap_tokens"):
            toks = TOKEN_RE.findall(text)
            if not toks:
                continue
            i = rng.randrange(len(toks))
            if op == "delete_token":
                del toks[i]
            elif op == "replace_token":
                toks[i] = rng.choice(TOKENS)
            else:
                j = rng.randrange(len(toks))
                toks[i], toks[j] = toks[j], toks[i]
            text = "".join(toks)
    return text


def make_input(rng: random.Random, kind: str, corpus: list[str]):
    if kind == "bytes":
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
    if kind == "text":
        return "".join(rand_char(rng) for _ in range(rng.randint(0, 300)))
    if kind == "leir_chars":
        return "".join(rng.choice(LEIR_CHARS) for _ in range(rng.randint(0, 200)))
    if kind == "token_soup":
        return "".join(rng.choice(TOKENS) for _ in range(rng.randint(0, 40)))
    text = mutate(rng, rng.choice(corpus))
    if rng.random() < 0.1:  # sometimes as bytes (lone surrogates become invalid UTF-8)
        return text.encode("utf-8", "surrogatepass")
    return text


def check(data) -> tuple[str, list[str], str | None]:
    """(outcome, diagnostic codes, problem or None). Outcome: ok / diagnostics / crash /
    contract / roundtrip / known."""
    try:
        res = parse(data)
    except BaseException as e:  # noqa: BLE001 - the point is to catch anything
        if isinstance(e, KeyboardInterrupt):
            raise
        return "crash", [], "parse raised " + "".join(traceback.format_exception_only(type(e), e)).strip()
    codes = [d.code for d in res.diagnostics]
    try:
        for d in res.diagnostics:
            if d.code not in CODES:
                return "contract", codes, f"unknown code {d.code}"
            if d.span is not None and (d.span.line < 1 or d.span.col < 1):
                return "contract", codes, f"bad span {d.span} for {d.code}"
            render(d, res.source)
        if res.module is None and not any(d.is_error for d in res.diagnostics):
            return "contract", codes, "no module and no error"
    except Exception as e:  # noqa: BLE001
        return "contract", codes, "render raised " + repr(e)
    if not res.ok:
        return "diagnostics", codes, None
    for layout in ("compact", "pretty"):
        try:
            printed = print_module(res.module, layout)
            again = parse(printed)
            if not again.ok or again.module != res.module:
                return "roundtrip", codes, f"{layout} print does not re-parse to the same tree"
        except Exception as e:  # noqa: BLE001
            src = res.source
            if "\\left(" in src and isinstance(e, TypeError):
                return "known", codes, "known bug: \\left( ... \\right) leaves a lark Tree in the AST"
            return "roundtrip", codes, f"{layout} print raised {e!r}"[:300]
    return "ok", codes, None


def run(seed: int, n: int, corpus: list[str]):
    rng = random.Random(seed)
    kinds, outcomes, codes = Counter(), Counter(), Counter()
    problems: list[tuple[str, str, str]] = []
    for _ in range(n):
        kind = rng.choices(KINDS, WEIGHTS)[0]
        data = make_input(rng, kind, corpus)
        kinds[kind] += 1
        outcome, cs, problem = check(data)
        outcomes[outcome] += 1
        codes.update(set(cs))
        if problem is not None and len(problems) < 20:
            problems.append((outcome, problem, repr(data)[:500]))
    return kinds, outcomes, codes, problems


def _worker(args):
    seed, n = args
    return run(seed, n, load_corpus())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100000, help="number of inputs (default 100000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    args = ap.parse_args(argv)

    corpus = load_corpus()
    t0 = time.perf_counter()
    if args.jobs <= 1:
        results = [run(args.seed, args.n, corpus)]
    else:
        from multiprocessing import Pool

        per = [args.n // args.jobs + (1 if i < args.n % args.jobs else 0) for i in range(args.jobs)]
        with Pool(args.jobs) as pool:
            results = pool.map(_worker, [(args.seed * 1000 + i, k) for i, k in enumerate(per)])
    elapsed = time.perf_counter() - t0

    kinds, outcomes, codes = Counter(), Counter(), Counter()
    problems = []
    for k, o, c, p in results:
        kinds += k
        outcomes += o
        codes += c
        problems += p
    total = sum(kinds.values())
    print(f"fuzz_parser: {total} inputs, seed {args.seed}, {args.jobs} job(s), corpus {len(corpus)} programs, "
          f"python {sys.version.split()[0]}, cpus {os.cpu_count()}")
    print("inputs by kind:     " + ", ".join(f"{k} {kinds[k]}" for k in KINDS))
    print("outcomes:           " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
    print("inputs with code:   " + (", ".join(f"{k} {codes[k]}" for k in sorted(codes)) or "-"))
    bad = outcomes["crash"] + outcomes["contract"] + outcomes["roundtrip"]
    print(f"crashes:            {outcomes['crash']} (parse raised), {outcomes['contract']} (diagnostic contract), "
          f"{outcomes['roundtrip']} (print/re-parse), {outcomes['known']} known (\\left( bug)")
    for outcome, problem, data in problems[:10]:
        print(f"  [{outcome}] {problem}\n      input: {data}")
    print(f"elapsed:            {elapsed:.1f} s ({1e6 * elapsed / max(1, total):.0f} us/input)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
