"""Multi-step records: a search trajectory (a trace of steps, as ``leirc apply --save-trace``
and ``leirc build -O search --save-trace`` write it) replayed on its source, every
intermediate program verified against the root and timed, with the grounded reasoning of
each step and the measured speedup after it.

The trajectory is evaluated at the source's own sizes (its steps' arguments, such as split
factors, belong to them), so the default oracle is the vectorized interpreter; the literal
one (``oracle="literal"``) is exact but slow on large kernels. A step that does not apply, or
a state that fails verification, ends the record there (``stopped`` says why): a
trajectory is only as good as its longest verified prefix.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Optional

from .. import __version__
from ..lang.printer import COMPACT, PRETTY, print_kernel
from ..strategies import base as S
from . import reasoning as R


def signature(kernel) -> dict:
    """The interface (a trajectory never changes it), as a shape instance records it."""
    return {"inputs": {p.name: [p.dtype, list(p.shape)] for p in kernel.inputs},
            "outputs": {p.name: [p.dtype, list(p.shape)] for p in kernel.outputs}}


def _worst(a: str, b: str) -> str:
    return max(a, b, key=S.NUMERICS.index)


def trajectory_record(source_id: str, source_text: str, steps: list, evaluator, *, kernel: Optional[str] = None,
                      target: str = "llvm") -> dict:
    """One multi-step record (see the module docstring). ``evaluator``: an
    :class:`leirc.engine.Evaluator` (its options decide seeds, oracle and timing).
    ``source_id``: the file part (``softmax.leir``) or the whole id; the record's source id
    is ``file::kernel`` like ``leirc dataset gen``'s, so the export splits both kinds of
    records of one kernel into the same split."""
    from ..engine.program import Program, apply

    prog = Program.from_text(source_text, kernel)
    if not getattr(prog, "ok", False):
        msgs = "; ".join(f"{d.code} {d.message}" for d in prog.diagnostics if d.is_error)
        raise ValueError(f"{source_id}: the source does not check: {msgs}")
    root_text = print_kernel(prog.kernel, PRETTY)
    t0 = time.perf_counter()
    root = evaluator.evaluate(root_text)
    root_ms = root.timing.median_ms if root.timing is not None and root.timing.ok else None
    states = []
    cur, prev_ms, numerics, stopped = prog, root_ms, "bitwise", None
    for i, st in enumerate(steps):
        try:
            strat = S.get(st.name)
            rw = apply(cur, st)
        except (S.NotApplicable, KeyError) as e:
            stopped = f"step {i} ({st}) does not apply: {e}"
            break
        numerics = _worst(numerics, rw.numerics)
        text = print_kernel(rw.program.kernel, PRETTY)
        ev = evaluator.evaluate(text, reference=root_text, numerics=numerics)
        ms = ev.timing.median_ms if ev.timing is not None and ev.timing.ok else None
        rs = R.trace(strat, cur, rw, None, st.kwargs, target)
        rs["measured"] = R.measured(ev, prev_ms, target)
        states.append({
            "index": i, "step": st.to_json(), "strategy": st.name, "level": strat.level, "numerics": rw.numerics,
            "path_numerics": numerics, "fingerprint": rw.program.fingerprint, "leir": text,
            "leir_compact": print_kernel(rw.program.kernel, COMPACT), "reasoning": rs,
            "verification": {"ok": ev.ok, "error_kind": ev.error_kind,
                             "equal": bool(ev.verify and ev.verify.equal), "bitwise": bool(ev.verify and ev.verify.bitwise)},
            "timing": {"ms": ms, "speedup_vs_root": (root_ms / ms) if root_ms and ms else None,
                       "speedup_vs_previous": (prev_ms / ms) if prev_ms and ms else None},
        })
        if not ev.ok:
            stopped = f"state {i} ({st}) failed verification: {ev.error_kind}: {(ev.error or '')[:300]}"
            break
        cur, prev_ms = rw.program, ms
    fps = [prog.fingerprint] + [s["fingerprint"] for s in states]
    return {
        "kind": "trajectory", "id": hashlib.sha256(json.dumps(fps).encode()).hexdigest()[:24],
        "source": {"id": source_id if "::" in source_id else f"{source_id}::{prog.kernel.name}", "kernel": prog.kernel.name}, "signature": signature(prog.kernel),
        "original": {"leir": root_text, "leir_compact": print_kernel(prog.kernel, COMPACT),
                     "fingerprint": prog.fingerprint},
        "root": {"ok": root.ok, "error_kind": root.error_kind, "ms": root_ms},
        "steps": states, "verified_steps": sum(1 for s in states if s["verification"]["ok"]),
        "requested_steps": len(steps), "stopped": stopped,
        "final": states[-1]["fingerprint"] if states else prog.fingerprint,
        "generator": {"leirc": __version__, "target": target},
        "timings": {"seconds": round(time.perf_counter() - t0, 3)},
    }


__all__ = ["trajectory_record", "signature"]
