"""Differential verification of a LEIR kernel against the reference interpreter.

A candidate (by default the kernel compiled with TVM and run by
:func:`leirc.lower.runner.run_kernel`) is run on several seeds x input distributions and
compared with the interpreter's outputs of the reference program (the same program, or
another program with the same signature). A run counts only if

* the candidate ran (a crash, timeout or build failure is a failure with its message);
* it did not modify its inputs (compared bit for bit after the run);
* every output element was written: outputs start *poisoned* (NaN payloads for floats,
  sentinels for integers, checked with a second run under a different sentinel when a
  sentinel value shows up; booleans always get two runs, poison False then True);
* shapes and dtypes match, no NaN/Inf, and the values pass :func:`compare_output`
  (scaled elementwise tolerance and normwise error);

and at the end the first input set is run once more with fresh buffers, which must
reproduce a correct result ("output depends on previous run" otherwise; skipped for the
built-in interpreter runner, which keeps no state).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

import numpy as np

from ..interp import InterpError, Interpreter, check_source, random_inputs
from ..interp import dtypes as D
from .compare import bitwise_equal, compare_output, tolerances

MAX_FAILURES = 25


@dataclass
class RunResult:
    """What a runner returns (the interface of ``leirc.lower.runner.run_kernel``)."""

    ok: bool
    outputs: dict = field(default_factory=dict)
    inputs_after: Optional[dict] = None
    error: Optional[str] = None
    error_kind: Optional[str] = None


@dataclass
class VerifyReport:
    equal: bool
    bitwise: bool
    max_abs_err: float
    max_rel_err: float
    norm_rel_err: float
    seeds: list
    dists: list
    failures: list
    per_output: dict = field(default_factory=dict)
    candidate: str = ""
    reference: str = ""
    target: str = ""
    runs: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict:
        d = asdict(self)

        def clean(x):
            if isinstance(x, float) and not math.isfinite(x):
                return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            if isinstance(x, list):
                return [clean(v) for v in x]
            return x

        return clean(d)


_INTERP_CACHE: dict = {}


def interp_runner(source: str, inputs: dict, outputs: dict, *, kernel: Optional[str] = None, target: str = "interp",
                  timeout: float = 120.0, max_elements: Optional[int] = None) -> RunResult:
    """A runner with ``run_kernel``'s signature that runs ``source`` in the interpreter
    (``timeout`` is not enforced: the interpreter runs in-process)."""
    try:
        key = (source, kernel, max_elements)
        interp = _INTERP_CACHE.get(key)
        if interp is None:
            kw = {} if max_elements is None else {"max_elements": max_elements}
            interp = Interpreter(check_source(source, kernel), **kw)
            _INTERP_CACHE.clear()  # keep only the last program
            _INTERP_CACHE[key] = interp
        outs = interp.run(inputs, outputs=outputs)
        return RunResult(True, outs, inputs, None, None)
    except InterpError as e:
        return RunResult(False, {}, None, str(e), "runtime")
    except MemoryError as e:  # pragma: no cover
        return RunResult(False, {}, None, f"out of memory: {e}", "memory")


def _signature(k) -> tuple:
    return (tuple((p.name, p.dtype, tuple(p.shape)) for p in k.inputs),
            tuple((p.name, p.dtype, tuple(p.shape)) for p in k.outputs))


def _sig_text(params) -> str:
    return ", ".join(f"{n}: {d}{list(s)}" for n, d, s in params)


class _Acc:
    """Accumulates per-output metrics over runs."""

    def __init__(self):
        self.per: dict = {}

    def add(self, c) -> None:
        p = self.per.setdefault(c.name, {"ok": True, "bitwise": True, "max_abs_err": 0.0, "max_rel_err": 0.0,
                                         "norm_rel_err": 0.0})
        p["ok"] = p["ok"] and c.ok
        p["bitwise"] = p["bitwise"] and c.bitwise
        for k in ("max_abs_err", "max_rel_err", "norm_rel_err"):
            v = getattr(c, k)
            if math.isnan(v) or v > p[k]:
                p[k] = v


def verify(candidate_source: str, reference_source: Optional[str] = None, *, kernel: Optional[str] = None,
           seeds=(0, 1, 2), dists=("uniform", "normal", "signed"), target: str = "llvm",
           runner: Optional[Callable] = None, rtol: Optional[float] = None, norm_tol: Optional[float] = None,
           timeout: float = 120.0) -> VerifyReport:
    """Verify ``candidate_source`` (compiled for ``target``, or interpreted when
    ``target="interp"``) against the interpreter run of ``reference_source`` (default: the
    candidate program itself). ``runner`` replaces ``leirc.lower.runner.run_kernel``."""
    t0 = time.perf_counter()
    seeds = [int(s) for s in seeds]
    dists = list(dists)
    rep = VerifyReport(False, False, 0.0, 0.0, 0.0, seeds, dists, [], target=target)
    fails = rep.failures

    def fail(msg: str) -> None:
        if len(fails) < MAX_FAILURES:
            fails.append(msg)
        elif len(fails) == MAX_FAILURES:
            fails.append("... (more failures omitted)")

    try:
        cand = check_source(candidate_source, kernel)
    except InterpError as e:
        fail(f"candidate: {e}")
        return _finish(rep, t0)
    try:
        ref = check_source(reference_source if reference_source is not None else candidate_source,
                           kernel if reference_source is None else _pick_kernel(reference_source, kernel, cand.kernel.name))
    except InterpError as e:
        fail(f"reference: {e}")
        return _finish(rep, t0)
    rep.candidate = f"{cand.kernel.name} ({target})"
    rep.reference = f"{ref.kernel.name} (interp{'' if reference_source is None else ', other program'})"
    cs, rs = _signature(cand.kernel), _signature(ref.kernel)
    if cs != rs:
        if cs[0] != rs[0]:
            fail(f"signatures differ: candidate inputs ({_sig_text(cs[0])}) vs reference inputs ({_sig_text(rs[0])})")
        if cs[1] != rs[1]:
            fail(f"signatures differ: candidate outputs ({_sig_text(cs[1])}) vs reference outputs ({_sig_text(rs[1])})")
        return _finish(rep, t0)
    if not seeds or not dists:
        fail("no runs: give at least one seed and one distribution")
        return _finish(rep, t0)
    if runner is None:
        if target == "interp":
            runner = interp_runner
        else:
            try:
                from ..lower.runner import run_kernel as runner  # noqa: PLC0415
            except ImportError as e:
                fail(f"the compiled runner is not available ({e}); use target='interp'")
                return _finish(rep, t0)
    ref_interp = Interpreter(ref)
    outs_spec = [(p.name, p.dtype, tuple(p.shape)) for p in cand.kernel.outputs]
    acc = _Acc()
    bitwise = True
    first = None  # (inputs, reference outputs, label) of the first run

    def call(inputs: dict, alt: bool):
        cin = {k: v.copy() for k, v in inputs.items()}
        init = {n: D.poisoned(dt, sh, alt) for n, dt, sh in outs_spec}
        try:
            res = runner(candidate_source, cin, init, kernel=cand.kernel.name, target=target, timeout=timeout)
        except Exception as e:  # a runner must not raise; treat it as a crash
            res = RunResult(False, {}, None, f"{type(e).__name__}: {e}", "exception")
        after = res.inputs_after if res.inputs_after is not None else cin
        return res, after

    def reference_run(inputs: dict):
        outs = ref_interp.run(inputs)
        unw = {}
        for n, dt, sh in outs_spec:
            m = D.poison_mask(outs[n], dt)
            if not D.is_float(dt) and m.any():
                again = ref_interp.run(inputs, poison_alt=True)
                m = m & D.poison_mask(again[n], dt, True)
            unw[n] = m
        return outs, unw

    def check_run(inputs, ref_out, ref_unw, label: str, record: bool):
        nonlocal bitwise
        res, after = call(inputs, False)
        if not res.ok:
            kind = f" [{res.error_kind}]" if res.error_kind else ""
            fail(f"candidate failed{kind} ({label}): {res.error}")
            return None
        mutated = [k for k in inputs if k not in after or not bitwise_equal(after[k], inputs[k])]
        if mutated:
            fail(f"inputs mutated: the candidate modified input(s) {', '.join(mutated)} ({label})")
        ok_all = not mutated
        outs = res.outputs or {}
        second = None
        for n, dt, sh in outs_spec:
            if n not in outs:
                fail(f"output {n}: missing from the candidate's results ({label})")
                ok_all = False
                bitwise = False
                continue
            y = np.asarray(outs[n])
            unw = None
            if y.shape == sh and y.dtype == D.np_dtype(dt):
                unw = D.poison_mask(y, dt)
                if not D.is_float(dt) and unw.any():
                    if second is None:
                        r2, _ = call(inputs, True)
                        second = r2.outputs if r2.ok else {}
                    y2 = second.get(n)
                    if y2 is not None and np.shape(y2) == sh:
                        unw = unw & D.poison_mask(np.asarray(y2), dt, True)
            c = compare_output(n, y, ref_out[n], dt, unwritten=unw, ref_unwritten=ref_unw.get(n),
                               rtol=rtol, norm_tol=norm_tol, where=label)
            if record:
                acc.add(c)
            bitwise = bitwise and c.bitwise
            for m in c.failures:
                fail(m)
            ok_all = ok_all and c.ok
        return ok_all, outs

    stop = False
    for seed in seeds:
        for dist in dists:
            label = f"seed {seed}, {dist}"
            try:
                inputs = random_inputs(ref.kernel, seed, dist)
                ref_out, ref_unw = reference_run(inputs)
            except InterpError as e:
                fail(f"reference program failed ({label}): {e}")
                stop = True
                break
            rep.runs += 1
            r = check_run(inputs, ref_out, ref_unw, label, True)
            if r is None:
                stop = True
                break
            if first is None:
                first = (inputs, ref_out, ref_unw, label, r[0])
        if stop:
            break
    # the repeated run catches state kept between runs; the built-in interpreter runner
    # is deterministic and stateless, so it is skipped there
    if not stop and first is not None and first[4] and runner is not interp_runner:
        inputs, ref_out, ref_unw, label, _ = first
        n_before = len(fails)
        r = check_run(inputs, ref_out, ref_unw, label + ", repeated", False)
        if r is not None and len(fails) > n_before:
            fail(f"output depends on previous run: repeating the first run ({label}) with fresh buffers "
                 f"gave a wrong result")
    rep.per_output = acc.per
    for p in acc.per.values():
        for k in ("max_abs_err", "max_rel_err", "norm_rel_err"):
            v = p[k]
            cur = getattr(rep, k)
            if math.isnan(v) or v > cur:
                setattr(rep, k, v)
    rep.bitwise = bitwise
    return _finish(rep, t0)


def _pick_kernel(source: str, kernel: Optional[str], cand_name: str) -> Optional[str]:
    """Kernel of the reference file: the named one, else the candidate's name if the file
    has it, else its only kernel."""
    if kernel is not None:
        return kernel
    from ..lang.checker import check_text

    cf = check_text(source)
    names = [r.kernel.name for r in cf.results]
    if len(names) > 1 and cand_name in names:
        return cand_name
    return None


def _finish(rep: VerifyReport, t0: float) -> VerifyReport:
    rep.equal = not rep.failures and rep.runs > 0
    if not rep.equal:
        rep.bitwise = False
    rep.seconds = round(time.perf_counter() - t0, 3)
    return rep


__all__ = ["verify", "VerifyReport", "RunResult", "interp_runner", "tolerances"]
