"""Inline verification for the editor: one kernel of the buffer, evaluated through the engine.

The language server calls this off its event loop (it builds and runs a kernel in a
sandboxed worker); the result is the engine's :class:`~leirc.engine.evaluate.Evaluation`,
which the server turns into an inline message ("verified on 9 runs, max abs err 3e-7" or
the first failure with its kind). Kernels of a file with errors are not evaluated: the
diagnostics already say why.
"""

from __future__ import annotations

import os
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


def outcome(ev: Evaluation, before: Optional[Evaluation] = None) -> dict:
    """A JSON-able digest of an evaluation for an editor (``before``: the same kernel's
    previous version, timed, for the speed-up)."""
    d = {"ok": ev.ok, "error_kind": ev.error_kind, "error": (ev.error or "").splitlines()[0] if ev.error else None,
         "max_abs_err": None, "max_rel_err": None, "bitwise": None, "ms": None, "target": None, "before_ms": None}
    if ev.verify is not None:
        d.update(max_abs_err=_finite(ev.verify.max_abs_err), max_rel_err=_finite(ev.verify.max_rel_err),
                 bitwise=bool(ev.verify.bitwise))
    if ev.timing is not None and ev.timing.ok:
        d.update(ms=ev.timing.median_ms, target=ev.timing.target)
    if before is not None and before.timing is not None and before.timing.ok:
        d["before_ms"] = before.timing.median_ms
    return d


def _finite(x):
    import math

    return None if x is None or not math.isfinite(x) else float(x)


def lens_title(d: dict) -> str:
    """"✓ equal · 3.2 ms llvm · 12× vs before", "✗ max rel err 3e-02", "✗ crash: ..."."""
    if d.get("ok"):
        parts = ["✓ equal" + (" (bitwise)" if d.get("bitwise") else "")]
        if d.get("ms") is not None:
            parts.append(f"{d['ms']:.3g} ms {d.get('target') or ''}".rstrip())
            if d.get("before_ms"):
                parts.append(f"{d['before_ms'] / d['ms']:.2g}× vs before")
        return " · ".join(parts)
    if d.get("error_kind") == "mismatch":
        err = d.get("max_rel_err")
        return f"✗ max rel err {err:.1e}" if err is not None else "✗ not equal"
    msg = d.get("error") or ""
    return f"✗ {d.get('error_kind')}" + (f": {msg[:80]}" if msg else "")


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
        from ..lower.rpc import parse_address

        host, port = parse_address(rpc_tracker)
        if not rpc_key:
            raise ValueError("rpcTracker is set but rpcKey is not: the tracker hands out servers by key")
        where = f"{rpc_key}@{host}:{port}"
        label = f"GPU ({rpc_target} via {where})" if rpc_target == "cuda" else f"{rpc_target} via {where}"
        return {"label": label, "target": rpc_target, "rpc": {"tracker": f"{host}:{port}", "key": rpc_key}}
    if target != "cuda" and (local_cuda_device() if local_gpu is None else local_gpu):
        return {"label": "GPU (cuda, this machine)", "target": "cuda", "rpc": None}
    return None
