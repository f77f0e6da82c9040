"""Schedule reuse (Autocomp): traces that won on similar kernels, replayed and adapted.

A kernel's *signature* is what the strategies care about: per top-level nest the loop
structure (depth, kinds, statement kinds and reduction operators), the aspect ratios of its
extents (log2, rounded) and their divisibility (largest power of two dividing each, up to
64). The *structure* (signature without sizes) must match exactly for a trace to be
considered; the distance between sizes ranks the matches.

Traces are stored *portable*: every loop or statement argument is also written as its path
(body indices), which names the same place in any kernel of the same structure whatever its
index names; integer factors that no longer divide the new extent are moved to the nearest
divisor. A step that still does not apply is dropped (the replay continues without it).
"""

from __future__ import annotations

import json
import math
from typing import Optional

from ..lang import ast as A
from ..strategies import NotApplicable, Step, get
from ..strategies.rewrite import divisors, nest_chain


def _pow2(n: int) -> int:
    k = 0
    while n % 2 == 0 and k < 6 and n > 0:
        n //= 2
        k += 1
    return k


def signature(program) -> tuple[str, dict]:
    """(structure key, signature dict) of a :class:`~leirc.engine.Program`."""
    result = program.result
    kinds = {}
    for si in result.stmts:
        kinds[id(si.stmt)] = f"{si.kind}{'/' + si.op if si.op else ''}"
    nests, sizes = [], []
    for item in program.kernel.body:
        if isinstance(item, A.Loop):
            chain = nest_chain(item)
            stmts = [n for n in A.walk(item) if isinstance(n, A.Assign)]
            nests.append("".join(lp.kind for lp in chain) + ":" + ",".join(kinds.get(id(s), "?") for s in stmts))
            sizes.append([lp.extent for lp in chain])
        else:
            nests.append(type(item).__name__)
            sizes.append([])
    structure = ";".join(nests)
    ratios = [[round(math.log2(max(e, 1)) - math.log2(max(s[0], 1)), 1) for e in s] for s in sizes]
    div = [[_pow2(e) for e in s] for s in sizes]
    return structure, {"structure": structure, "sizes": sizes, "ratios": ratios, "divisibility": div}


def distance(a: dict, b: dict) -> float:
    """How far two signatures of one structure are apart (0 = same sizes)."""
    d = 0.0
    for sa, sb in zip(a.get("sizes", []), b.get("sizes", [])):
        for x, y in zip(sa, sb):
            d += abs(math.log2(max(x, 1)) - math.log2(max(y, 1)))
    for da, db in zip(a.get("divisibility", []), b.get("divisibility", [])):
        for x, y in zip(da, db):
            d += 0.5 * abs(x - y)
    return d


def _arg_kinds(name: str) -> dict:
    try:
        return {a.name: a.kind for a in get(name).args}
    except KeyError:
        return {}


def portable(root, steps: list) -> list[dict]:
    """Steps as JSON with the paths of their loop and statement arguments (replayed on
    ``root``, a Program, to know where each reference points at its time)."""
    out = []
    prog = root
    for st in steps:
        kinds = _arg_kinds(st.name)
        paths, perms = {}, {}
        for k, v in st.kwargs.items():
            if kinds.get(k) in ("loop", "stmt") and isinstance(v, str):
                try:
                    paths[k] = list(prog.path_of(v))
                except KeyError:
                    pass
        loop = st.kwargs.get("loop")
        for k, v in st.kwargs.items():
            # index names of the chain under `loop` (a new loop order): kept as positions
            if kinds.get(k) == "loops" and isinstance(loop, str):
                names = [x.strip() for x in v.split(",")] if isinstance(v, str) else list(v)
                chain = [lp.var for lp in nest_chain(prog.loop_at(loop))]
                if all(n in chain for n in names):
                    perms[k] = [chain.index(n) for n in names]
        out.append({**st.to_json(), "paths": paths, "perms": perms})
        prog = prog.apply(st).program
    return out


def adapt(program, portable_step: dict) -> Optional[Step]:
    """The step of a portable trace for ``program`` (references by path, factors moved to
    divisors), or None when it cannot be placed."""
    args = dict(portable_step.get("args") or {})
    name = portable_step["strategy"]
    for k, path in (portable_step.get("paths") or {}).items():
        try:
            args[k] = program.ref_of(tuple(path))
        except KeyError:
            return None
    loop_ref = args.get("loop")
    if isinstance(loop_ref, str):
        try:
            lp = program.loop_at(loop_ref)
        except KeyError:
            return None
        chain = [x.var for x in nest_chain(lp)]
        for k, perm in (portable_step.get("perms") or {}).items():
            if any(i >= len(chain) for i in perm):
                return None
            args[k] = ",".join(chain[i] for i in perm)
        for k in ("factor", "factor_outer"):
            if isinstance(args.get(k), int) and lp.extent % args[k]:
                divs = [d for d in divisors(lp.extent) if 1 < d < lp.extent] or [1]
                args[k] = min(divs, key=lambda d: (abs(math.log2(d) - math.log2(args[k])), d))
    try:
        return Step.make(name, **args)
    except (TypeError, ValueError):
        return None


def replay_adapted(program, trace_steps: list[dict]) -> tuple[object, list[Step]]:
    """Replay a portable trace on ``program``: (final Program, the steps that applied)."""
    applied = []
    for ps in trace_steps:
        st = adapt(program, ps)
        if st is None:
            continue
        try:
            program = program.apply(st).program
        except NotApplicable:
            continue
        applied.append(st)
    return program, applied


def similar_traces(memory, program, k: int = 3) -> list[dict]:
    """The ``k`` stored traces closest to ``program``'s signature (same structure)."""
    if memory is None:
        return []
    structure, sig = signature(program)
    rows = memory.traces(structure)
    rows.sort(key=lambda t: (distance(sig, t["signature"]), -t["speedup"], json.dumps(t["steps"])))
    return rows[:k]
