"""Inline verification for the editor: one kernel of the buffer, evaluated through the engine.

The language server calls this off its event loop (it builds and runs a kernel in a
sandboxed worker); the result is the engine's :class:`~leirc.engine.evaluate.Evaluation`,
which the server turns into an inline message ("verified on 9 runs, max abs err 3e-7" or
the first failure with its kind). Kernels of a file with errors are not evaluated: the
diagnostics already say why.
"""

from __future__ import annotations

import os
import re
from typing import Optional

from ..engine.evaluate import Evaluation, Evaluator
from ..verify.core import evidence

#: how a numerics class reads to a person: what applying such a step guarantees
_GUARANTEE = {"bitwise": "proven: bitwise", "exact-in-reals": "proven: exact in reals",
              "reassociating": "tested: reassociates", "approximate": "tested: approximate"}


def guarantee(numerics: Optional[str]) -> str:
    """"proven: bitwise" / "proven: exact in reals" (legal by construction: verification
    only confirms the compiler) or "tested: approximate" (the verification's runs are the
    only evidence); "" for an unknown class."""
    if not numerics:
        return ""
    return _GUARANTEE.get(numerics, f"{evidence(numerics)}: {numerics}")


def evaluate_kernel(text: str, kernel: Optional[str] = None, *, reference: Optional[str] = None,
                    target: str = "llvm", evaluator: Optional[Evaluator] = None) -> Evaluation:
    """Verify kernel ``kernel`` of ``text`` (compiled for ``target``) against the interpreter
    running ``reference`` (default: the same program). Pass a long-lived ``evaluator`` to
    reuse its cache and reference outputs across edits."""
    if evaluator is not None:
        return evaluator.evaluate(text, kernel=kernel, reference=reference)
    with Evaluator(target, time=False, prestart=False) as ev:
        return ev.evaluate(text, kernel=kernel, reference=reference)


def summary(ev: Evaluation) -> str:
    """One line for an inline hint."""
    if ev.ok and ev.verify is not None:
        r = ev.verify
        return (f"verified ({r.runs + r.probe_runs} runs{', bitwise' if r.bitwise else ''}; "
                f"max abs err {r.max_abs_err:.2g}, normwise {r.norm_rel_err:.2g})")
    return f"NOT verified ({ev.error_kind}): {(ev.error or '').splitlines()[0] if ev.error else ''}"


def outcome(ev: Evaluation, before: Optional[Evaluation] = None, *, norm_bound: Optional[float] = None,
            numerics: Optional[str] = None) -> dict:
    """A JSON-able digest of an evaluation for an editor (``before``: the same kernel's
    previous version, timed, for the speed-up; ``norm_bound``: the outputs' normwise
    tolerance, the criterion that decides; ``numerics``: the numerics class of the step
    that made the kernel, which decides whether it is ``proven`` or only ``tested``).
    ``error`` is the error's first line, ``detail`` the whole of it."""
    err = ev.error or ""
    d = {"ok": ev.ok, "error_kind": ev.error_kind, "error": err.splitlines()[0] if err else None,
         "detail": err[:8000] if err else None,
         "max_abs_err": None, "max_rel_err": None, "norm_rel_err": None, "norm_bound": norm_bound, "bitwise": None,
         "ms": None, "target": None, "before_ms": None, "evidence": evidence(numerics), "numerics": numerics,
         "tolerance": None, "runs": None, "passed_on": None, "failures": []}
    if ev.verify is not None:
        r = ev.verify
        d.update(max_abs_err=_finite(r.max_abs_err), max_rel_err=_finite(r.max_rel_err),
                 norm_rel_err=_finite(r.norm_rel_err), bitwise=bool(r.bitwise), tolerance=r.tolerance or None,
                 runs=int(r.runs + r.probe_runs), passed_on=r.passed_on(), failures=[str(f) for f in r.failures[:10]])
    if ev.timing is not None and ev.timing.ok:
        d.update(ms=ev.timing.median_ms, target=ev.timing.target)
    if before is not None and before.timing is not None and before.timing.ok:
        d["before_ms"] = before.timing.median_ms
    return d


def _finite(x):
    import math

    return None if x is None or not math.isfinite(x) else float(x)


def _e(x: Optional[float]) -> str:
    return "?" if x is None else "0" if x == 0 else f"{x:.1e}"


def criterion(d: dict) -> str:
    """What decided, in a few words: "normwise 4.1e-07 ≤ 1.0e-05", "bitwise",
    "normwise 3.0e-02 > 1.0e-05", "812 elements outside the bound" (never the element-wise
    maximum relative error, which reads as a percentage and decides nothing alone)."""
    if d.get("ok"):
        if d.get("bitwise"):
            return "bitwise"
        bound = d.get("norm_bound")
        return f"normwise {_e(d.get('norm_rel_err'))}" + (f" ≤ {_e(bound)}" if bound is not None else " within its bound")
    first = (d.get("failures") or [""])[0]
    m = re.search(r"normwise relative error (\S+) > (\S+)", first)
    if m:
        return f"normwise {_e(_num(m.group(1)))} > {_e(_num(m.group(2)))}"
    m = re.search(r"(\d+) of (\d+) elements outside", first)
    if m:
        return f"{m.group(1)} of {m.group(2)} elements outside the bound (normwise {_e(d.get('norm_rel_err'))})"
    return f"normwise {_e(d.get('norm_rel_err'))}" if d.get("norm_rel_err") is not None else "not equal"


def _num(text: str) -> Optional[float]:
    try:
        return float(text.rstrip(";,)"))
    except ValueError:
        return None


def lens_title(d: dict) -> str:
    """"✓ equal (normwise 4.1e-07 ≤ 1.0e-05) · 3.2 ms llvm · 12× vs before · tested",
    "✗ normwise 3.0e-02 > 1.0e-05", "✗ crash: ..." (short: the whole story is in
    :func:`lens_tooltip`)."""
    tag = d.get("evidence")
    if d.get("ok"):
        parts = [f"✓ equal ({criterion(d)})"]
        if d.get("ms") is not None:
            parts.append(f"{d['ms']:.3g} ms {d.get('target') or ''}".rstrip())
            if d.get("before_ms"):
                parts.append(f"{d['before_ms'] / d['ms']:.2g}× vs before")
        if tag:
            parts.append(tag)
        return " · ".join(parts)
    if d.get("error_kind") == "mismatch":
        return f"✗ {criterion(d)}"
    msg = d.get("error") or ""
    return f"✗ {d.get('error_kind')}" + (f": {msg[:80]}{'…' if len(msg) > 80 else ''}" if msg else "")


def lens_tooltip(d: dict) -> str:
    """Everything about one outcome, whole: the criterion against its bound, the rule, the
    runs (seeds × distributions, probes), proven or tested, or the whole error."""
    if not d.get("ok") and d.get("error_kind") != "mismatch":
        return f"{d.get('error_kind')}: {d.get('detail') or d.get('error') or 'no detail'}"
    lines = []
    verdict = "equal" if d.get("ok") else "NOT equal"
    lines.append(f"{verdict}: {criterion(d)}" + (f" ({d['tolerance']} tolerance)" if d.get("tolerance") else ""))
    if not d.get("ok"):
        lines.extend(d.get("failures") or [])
    if d.get("max_rel_err") is not None:
        lines.append(f"element-wise: max abs err {_e(d.get('max_abs_err'))}, max rel err {_e(d.get('max_rel_err'))} "
                     "(relative to tiny elements; not the criterion)")
    if d.get("passed_on"):
        lines.append(f"{d.get('runs')} runs: {d['passed_on']}")
    if d.get("evidence") == "proven":
        lines.append(f"proven: the step is {d.get('numerics')} by construction; the runs confirm the compiler")
    else:
        lines.append("tested: the runs are the only evidence" +
                     (f" (the step is {d.get('numerics')})" if d.get("numerics") else ""))
    return "\n".join(lines)


def local_cuda_device() -> bool:
    """Whether this machine has an NVIDIA GPU (its driver's control device: asking TVM would
    import it into the editor's process)."""
    return os.path.exists("/dev/nvidiactl")


def run_device(target: str, rpc_tracker: Optional[str], rpc_key: Optional[str], rpc_target: str = "cuda",
               local_gpu: Optional[bool] = None) -> Optional[dict]:
    """Where an editor's "Run on GPU" runs: ``{"label", "target", "rpc"}`` -- a server of the
    RPC tracker ``rpc_tracker`` for ``rpc_key`` (the kernel is built here, run and timed there
    for ``rpc_target``, its outputs verified here; ``rpc``: ``{"tracker", "key"}``), else this
    machine's GPU when the editor's own ``target`` is not cuda already (``rpc`` None); None
    when there is neither. ValueError for an RPC setting that cannot work."""
    if rpc_tracker:
        from .devices import parse_address

        host, port = parse_address(rpc_tracker)
        if not rpc_key:
            raise ValueError("rpcTracker is set but rpcKey is not: the tracker hands out servers by key")
        where = f"{rpc_key}@{host}:{port}"
        label = f"GPU ({rpc_target} via {where})" if rpc_target == "cuda" else f"{rpc_target} via {where}"
        return {"label": label, "target": rpc_target, "rpc": {"tracker": f"{host}:{port}", "key": rpc_key}}
    if target != "cuda" and (local_cuda_device() if local_gpu is None else local_gpu):
        return {"label": "GPU (cuda, this machine)", "target": "cuda", "rpc": None}
    return None
