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
  (elementwise and normwise, with a tolerance that follows the arithmetic: see
  :mod:`.bound`);
* the reference itself reads only written elements: it runs with ``check_uninit``, so a
  program whose outputs come from never-written intermediate elements is NOT EQUAL;

and at the end the first input set is run once more with fresh buffers, which must
reproduce a correct result ("output depends on previous run" otherwise; skipped for the
built-in interpreter runner, which keeps no state); outputs identical bit for bit to the first
run's pass without being compared again.

Inputs: the grid ``seeds x dists`` (default 3 x uniform, normal, signed) plus, by default,
one run per *probe* distribution on the first seed (``logits``: softmax-scale values where
exp overflows; ``mixed``: magnitudes over six decades; ``special``: zeros, and -inf/+inf/NaN
injected into each float input where the reference absorbs them (-inf padding of a
max-pool) or propagates them elementwise (relu(NaN) = NaN)). The special probe compares
non-finite reference elements exactly (``nonfinite="match"``); the others do not compare
the reference's own overflows (``"ignore"``): a candidate may be more robust, not less.
Seeds after the first are spent where they add coverage: a distribution's next seed runs only
while its runs so far checked fewer than ``min_samples`` output elements (default
``MIN_SAMPLES`` = 2^20). A bug that corrupts a fraction p of the elements escapes N checked
elements with probability (1-p)^N, so a second full-size softmax run (6.3M elements) adds
nothing a small kernel's three seeds would; a kernel with 4096 outputs still runs all three.
``min_samples=None`` runs every seed; the report lists the seeds a distribution skipped.
Every float input is drawn inside its domain (:func:`leirc.interp.inputs.infer_domains`,
overridable with ``domains``). Giving ``dists`` explicitly runs no probes unless ``probes``
is given too.
"""

from __future__ import annotations

import inspect
import math
import time
import threading
from concurrent.futures import ThreadPoolExecutor
from operator import index as operator_index
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

import numpy as np

from ..interp import InterpError, Interpreter, check_source, random_inputs
from ..interp import dtypes as D
from ..interp.shrink import iterations
from ..interp.inputs import (DISTS, RANGE_LEVELS, SPECIAL_VALUES, as_domain, branch_points, infer_domains,
                             inject_special, range_exponent, sum_points)
from .bound import ErrorBound, Unsupported
from .compare import bitwise_equal, compare_output, tolerances

MAX_FAILURES = 25
#: grid distributions and probes run when none are given
DEFAULT_DISTS = ("uniform", "normal", "signed")
DEFAULT_PROBES = ("logits", "mixed", "special", "range", "branches")
#: probes whose inputs adapt to the reference (levels tried until it is defined and finite)
ADAPTIVE_PROBES = ("range", "branches")
#: reference runs spent looking for special values the reference tolerates
MAX_SPECIAL_TRIES = 6
ORACLES = ("vectorized", "literal")
#: bumped when a change of the verifier can change a verdict (the Evaluator's cache key)
VERIFY_PROTOCOL = 3
#: numerics classes whose rewrites are legal by construction (see :func:`evidence`)
PROVEN_NUMERICS = ("bitwise", "exact-in-reals")


def evidence(numerics: Optional[str]) -> str:
    """``proven`` for a candidate made by rewrites that are legal by construction (bitwise
    or exact in the reals: verification only confirms the compiler), ``tested`` for
    everything else -- approximate rewrites, model-written programs, a comparison of two
    programs -- whose only evidence is the verification's runs."""
    return "proven" if numerics in PROVEN_NUMERICS else "tested"
#: checked output elements per distribution after which further seeds are skipped
MIN_SAMPLES = 1 << 20


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
    probes: list = field(default_factory=list)
    numerics: Optional[str] = None  # the rewrite's declared class, when the caller gave it
    probe_runs: int = 0
    tolerance: str = ""
    oracle: str = "vectorized"
    domains: dict = field(default_factory=dict)
    special_values: list = field(default_factory=list)  # "X=-inf": what the special probe injected
    #: seeds not run because the distribution's earlier runs covered ``min_samples`` elements
    seeds_skipped: list = field(default_factory=list)
    min_samples: Optional[int] = None
    #: stopped by Ctrl-C: the report covers the runs made so far (and is NOT EQUAL)
    interrupted: bool = False
    #: "proven" (legal by construction, then verified) or "tested" (verified only); see evidence()
    evidence: str = "tested"
    #: what the adaptive probes did: the level of ``range`` kept, a probe skipped and why
    probe_notes: list = field(default_factory=list)
    #: per comparison of the reference: measured, took true / false (see leirc.verify.coverage)
    branch_coverage: list = field(default_factory=list)
    #: things a person should know that do not fail the verification (a branch never taken)
    warnings: list = field(default_factory=list)

    def passed_on(self) -> str:
        """What the runs covered, for a label: ``seeds 0,1,2 x uniform, normal, signed;
        probes logits, mixed, special``."""
        grid = f"seeds {','.join(map(str, self.seeds))} x {', '.join(self.dists)}"
        return grid + (f"; probes {', '.join(self.probes)}" if self.probes else "; no probes")

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


def _supports_uninit() -> bool:
    try:
        return "check_uninit" in inspect.signature(Interpreter.run).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return False


def _bad_number(name: str, v, *, positive: bool = False) -> Optional[str]:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return f"{name} must be a number, got {v!r}"
    if not math.isfinite(x) or x < 0 or (positive and x == 0):
        return f"{name} must be a finite {'positive' if positive else 'non-negative'} number, got {v!r}"
    return None


class _SessionRunner:
    """The default compiled runner: one sandboxed :class:`leirc.lower.session.KernelSession`
    for the whole verification (one build, many runs), started on the first run so that it
    knows the kernel the verifier picked. Intermediates are poisoned, so a candidate that
    reads elements it never wrote computes poison rather than stale memory."""

    def __init__(self, source: str, target: str, timeout: float, kernel: Optional[str] = None):
        self.source, self.target, self.timeout = source, target, timeout
        self.session = None
        self._start(kernel)

    def _start(self, kernel: Optional[str]) -> None:
        """Start the worker now when the kernel is known, so that TVM's import and the build
        overlap with the reference runs and the input generation."""
        from ..lang.load import LoadError, load_kernel

        try:
            name = load_kernel(self.source, kernel=kernel).kernel.name
        except LoadError:
            return  # the verifier reports the candidate's errors itself
        from ..lower.device import KernelSession  # lazy: TVM lives in leirc.lower

        self.session = KernelSession(self.source, kernel=name, target=self.target, timeout=self.timeout,
                                     poison_intermediates=True)

    def __call__(self, source, inputs, outputs, *, kernel=None, target=None, timeout=None, **kw):
        if self.session is None:
            from ..lower.device import KernelSession  # lazy: TVM lives in leirc.lower

            self.session = KernelSession(self.source, kernel=kernel, target=self.target, timeout=self.timeout,
                                         poison_intermediates=True)
        return self.session.runner(source, inputs, outputs, kernel=kernel, target=target, timeout=timeout, **kw)

    def close(self) -> None:
        if self.session is not None:
            self.session.close()


def verify(candidate_source: str, reference_source: Optional[str] = None, *, kernel: Optional[str] = None,
           seeds=(0, 1, 2), dists=None, target: str = "llvm",
           runner: Optional[Callable] = None, rtol: Optional[float] = None, norm_tol: Optional[float] = None,
           timeout: float = 120.0, reference_cache=None, probes=None, domains: Optional[dict] = None,
           oracle: str = "vectorized", numerics: Optional[str] = None,
           min_samples: Optional[int] = MIN_SAMPLES, coverage: bool = False,
           progress: Optional[Callable[[int, int, str], None]] = None) -> VerifyReport:
    """Verify ``candidate_source`` against ``reference_source``; see :func:`_verify`.

    Without a ``runner``, a compiled candidate runs in one sandboxed worker session built
    once for all runs. ``numerics`` is the class of the rewrite that produced the candidate
    (``bitwise``, ``exact-in-reals``, ``approximate``); the report records it and its
    :data:`evidence <VerifyReport.evidence>` (``proven`` or ``tested``). An approximate
    rewrite or a model-written program (``program_rewrite``) always meets the default probes
    (unless ``probes`` is given), even under an explicit grid such as the search's: one that
    overflows, or turns NaN, where the reference stays finite is rejected -- that is what
    the probes look for. (A bitwise rewrite
    is not held to bit equality here: the compiled candidate and the interpreted reference
    round differently even when the rewrite reorders nothing.)"""
    if numerics is not None and numerics not in ("bitwise", "exact-in-reals", "approximate"):
        raise ValueError(f"unknown numerics class {numerics!r}")
    if numerics == "approximate" and probes is None:
        # a caller's explicit grid (the search's) runs no probes for proven candidates; a
        # tested one has no other evidence, so it meets them all
        probes = DEFAULT_PROBES
    own = None
    if runner is None and target != "interp":
        own = runner = _SessionRunner(candidate_source, target, timeout, kernel)
    try:
        rep = _verify(candidate_source, reference_source, kernel=kernel, seeds=seeds, dists=dists, target=target,
                      runner=runner, rtol=rtol, norm_tol=norm_tol, timeout=timeout, reference_cache=reference_cache,
                      probes=probes, domains=domains, oracle=oracle, min_samples=min_samples,
                      coverage=coverage, progress=progress)
    finally:
        if own is not None:
            own.close()
    rep.numerics = numerics
    rep.evidence = evidence(numerics)
    return rep


def _verify(candidate_source: str, reference_source: Optional[str] = None, *, kernel: Optional[str] = None,
            seeds=(0, 1, 2), dists=None, target: str = "llvm",
            runner: Optional[Callable] = None, rtol: Optional[float] = None, norm_tol: Optional[float] = None,
            timeout: float = 120.0, reference_cache=None, probes=None, domains: Optional[dict] = None,
            oracle: str = "vectorized", min_samples: Optional[int] = MIN_SAMPLES, coverage: bool = False,
            progress: Optional[Callable[[int, int, str], None]] = None) -> VerifyReport:
    """Verify ``candidate_source`` (compiled for ``target``, or interpreted when
    ``target="interp"``) against the interpreter run of ``reference_source`` (default: the
    candidate program itself). ``runner`` replaces ``leirc.lower.runner.run_kernel``.
    ``reference_cache`` (e.g. :class:`leirc.engine.refcache.CachedReference`) replaces the
    reference side: its ``.result`` is the reference's CheckResult and ``.run(seed, dist)``
    returns ``(inputs, outputs, unwritten masks)``, computed once for many candidates
    (it is bypassed for explicit ``domains`` and the literal oracle, which it does not know).

    ``dists`` (default ``DEFAULT_DISTS``) x ``seeds`` is the grid of runs; ``probes``
    (default ``DEFAULT_PROBES`` when ``dists`` is not given, else none) adds one run per
    probe distribution on the first seed. ``domains`` maps input names to ``(lo, hi)``
    (open interval) and replaces their inferred domains. ``rtol``/``norm_tol`` given
    explicitly select the flat tolerance instead of the arithmetic bound. ``oracle``
    "literal" runs the reference loop by loop (``Interpreter(ref, vectorize=False)``: the
    semantics itself, slow, for small kernels); "vectorized" is the default. ``progress`` is
    called after every candidate run with (runs done, runs planned, label); a failing run
    ends the verification before the plan is done."""
    t0 = time.perf_counter()
    default_grid = dists is None
    dists = list(DEFAULT_DISTS if dists is None else dists)
    probes = list(DEFAULT_PROBES if probes is None and default_grid else (probes or ()))
    rep = VerifyReport(False, False, 0.0, 0.0, 0.0, [], dists, [], target=target, probes=probes, oracle=oracle,
                       min_samples=min_samples)
    fails = rep.failures

    def fail(msg: str) -> None:
        if len(fails) < MAX_FAILURES:
            fails.append(msg)
        elif len(fails) == MAX_FAILURES:
            fails.append("... (more failures omitted)")

    problems = []
    try:
        seeds = [operator_index(s) for s in seeds]
    except TypeError:
        problems.append(f"seeds must be integers, got {list(seeds)!r}")
        seeds = []
    rep.seeds = seeds
    if any(s < 0 for s in seeds):
        problems.append(f"seeds must be non-negative integers, got {', '.join(map(str, seeds))}")
    bad = [d for d in dists + probes if d not in DISTS]
    if bad:
        problems.append(f"unknown distribution(s) {', '.join(map(str, bad))} (expected one of {', '.join(DISTS)})")
    if oracle not in ORACLES:
        problems.append(f"unknown oracle {oracle!r} (expected {' or '.join(ORACLES)})")
    if min_samples is not None and (isinstance(min_samples, bool) or not isinstance(min_samples, int)
                                    or min_samples < 0):
        problems.append(f"min_samples must be a non-negative integer or None, got {min_samples!r}")
    for nm, v, pos in (("rtol", rtol, False), ("norm_tol", norm_tol, False), ("timeout", timeout, True)):
        if v is not None:
            msg = _bad_number(nm, v, positive=pos)
            if msg:
                problems.append(msg)
    if problems:
        for m in problems:
            fail(m)
        return _finish(rep, t0)
    try:
        cand = check_source(candidate_source, kernel)
    except InterpError as e:
        fail("candidate: no kernel to verify" if "no kernel in the file" in str(e) else f"candidate: {e}")
        return _finish(rep, t0)
    if not cand.kernel.outputs:
        fail(f"candidate: kernel '{cand.kernel.name}' has no outputs: no kernel to verify")
        return _finish(rep, t0)
    try:
        ref = reference_cache.result if reference_cache is not None else check_source(
            reference_source if reference_source is not None else candidate_source,
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
    floats = {p.name for p in ref.kernel.inputs if D.is_float(p.dtype)}
    doms = infer_domains(ref.kernel)
    for n, d in (domains or {}).items():
        if n not in floats:
            fail(f"domain for '{n}': not a float input of kernel '{ref.kernel.name}'")
            continue
        try:
            doms[n] = as_domain(d)
        except ValueError as e:
            fail(f"domain for '{n}': {e}")
    if fails:
        return _finish(rep, t0)
    rep.domains = {n: f"({d.lo:g}, {d.hi:g}){' without 0' if d.nonzero else ''}" + (f": {d.why}" if d.why else "")
                   for n, d in sorted(doms.items())}
    explicit_doms = {n: doms[n] for n in (domains or {})}
    if explicit_doms or oracle != "vectorized":
        reference_cache = None
    elif reference_cache is not None and getattr(reference_cache, "literal", False) != uses_literal(ref):
        reference_cache = None
    if runner is None:
        if target == "interp":
            runner = interp_runner
        else:
            try:
                from ..lower.device import run_kernel as runner  # noqa: PLC0415
            except ImportError as e:
                fail(f"the compiled runner is not available ({e}); use target='interp'")
                return _finish(rep, t0)
    narrow = narrow_accumulations(ref)
    if narrow and oracle == "vectorized":
        # the vectorized oracle sums in float64 and rounds once; the language (and the
        # compiled code, bit for bit) rounds an f16/bf16 accumulator after every term: 2 %
        # apart normwise on a 300-term bf16 sum. The literal oracle computes what the text
        # says, while it is affordable.
        cost = iterations(ref)
        if cost <= NARROW_LITERAL_LIMIT:
            oracle = rep.oracle = "literal"
            if not getattr(reference_cache, "literal", False):
                reference_cache = None  # a cache of vectorized runs is not this oracle
            rep.probe_notes.append(f"oracle: literal, because {', '.join(narrow)} accumulate(s) in f16/bf16 "
                                   "(rounded after every term, as compiled code does)")
        else:
            rep.probe_notes.append(f"oracle: vectorized although {', '.join(narrow)} accumulate(s) in f16/bf16: "
                                   f"{cost} literal statement instances exceed {NARROW_LITERAL_LIMIT}; the "
                                   "oracle sums in float64, so the bound's n*u per sum covers the difference")
    ref_interp = Interpreter(ref, vectorize=(oracle == "vectorized"))
    uninit = {"check_uninit": True} if _supports_uninit() else {}
    flat = rtol is not None or norm_tol is not None
    bound_state: dict = {}
    rep.tolerance = "flat (rtol/norm_tol given)" if flat else "arithmetic"

    def error_bound(worst_case: bool = False):
        """The companion program of the reference, built on first use (None if the bound
        does not model the program; the flat tolerance applies then). The probes use the
        worst-case reduction bound (see :mod:`.bound`)."""
        key = "eb_wc" if worst_case else "eb"
        if key not in bound_state:
            try:
                bound_state[key] = ErrorBound(ref, worst_case)
            except (Unsupported, InterpError) as e:
                bound_state[key] = None
                rep.tolerance = f"flat (no arithmetic bound: {e})"
        return bound_state[key]

    if not flat:
        error_bound()  # building is cheap (no run); it tells the report which rule applies
    outs_spec = [(p.name, p.dtype, tuple(p.shape)) for p in cand.kernel.outputs]
    acc = _Acc()
    bitwise = True
    first = None  # (inputs, reference outputs, label) of the first run

    call_lock = threading.Lock()  # one candidate run at a time, in the order asked
    failed_run = threading.Event()  # a candidate run failed: runs queued behind it are not started

    def call(inputs: dict, alt: bool):
        with call_lock:
            res, after = _call(inputs, alt)
        if not res.ok:
            failed_run.set()
        return res, after

    def _call(inputs: dict, alt: bool):
        cin = {k: v.copy() for k, v in inputs.items()}
        init = {n: D.poisoned(dt, sh, alt) for n, dt, sh in outs_spec}
        try:
            res = runner(candidate_source, cin, init, kernel=cand.kernel.name, target=target, timeout=timeout)
        except Exception as e:  # a runner must not raise; treat it as a crash
            res = RunResult(False, {}, None, f"{type(e).__name__}: {e}", "exception")
        after = res.inputs_after if res.inputs_after is not None else cin
        return res, after

    def reference_run(inputs: dict, outs: Optional[dict] = None):
        """The reference's outputs and unwritten masks (``outs``: its outputs on ``inputs``,
        when already computed)."""
        if outs is None:
            outs = ref_interp.run(inputs, **uninit)
        unw = {}
        for n, dt, sh in outs_spec:
            m = D.poison_mask(outs[n], dt)
            if not D.is_float(dt) and m.any():
                again = ref_interp.run(inputs, poison_alt=True, **uninit)
                m = m & D.poison_mask(again[n], dt, True)
            unw[n] = m
        return outs, unw

    def special_inputs(seed: int):
        """The ``special`` probe: zeros, plus in each float input every special value of
        SPECIAL_VALUES (inside its domain) that the reference either absorbs (its outputs
        stay finite: -inf padding of a max) or propagates elementwise (non-finite outputs
        only where an input of the same shape is non-finite: relu(NaN) = NaN)."""
        cur = random_inputs(ref.kernel, seed, "special", explicit_doms)
        cur_outs = None  # the reference's outputs on ``cur``, once a trial computed them
        injected = []
        tries = 0

        def acceptable(outs, trial) -> bool:
            for n, dt, sh in outs_spec:
                if not D.is_float(dt):
                    continue
                bad = ~np.isfinite(outs[n])
                if not bad.any():
                    continue
                allowed = np.zeros(sh, dtype=bool)
                for q in ref.kernel.inputs:
                    if q.name in floats and tuple(q.shape) == sh:
                        allowed |= ~np.isfinite(trial[q.name])
                if (bad & ~allowed).any():
                    return False
            return True

        for p in ref.kernel.inputs:
            if p.name not in floats:
                continue
            dom = doms.get(p.name)
            for k, v in enumerate(SPECIAL_VALUES):
                if (dom is not None and not dom.contains(v)) or tries >= MAX_SPECIAL_TRIES:
                    continue
                trial = inject_special(cur, p.name, v, seed, salt=k)
                tries += 1
                try:
                    outs = ref_interp.run(trial, **uninit)
                except InterpError:
                    continue
                if acceptable(outs, trial):
                    cur, cur_outs = trial, outs
                    injected.append(f"{p.name}={v}")
        return cur, injected, cur_outs

    def check_run(inputs, ref_out, ref_unw, label: str, record: bool, probe: Optional[str] = None,
                  same_as: Optional[dict] = None, ran: Optional[tuple] = None):
        """Run the candidate on one input set and compare. A probe uses the worst-case
        reduction bound; the special probe matches non-finite reference elements exactly,
        the others do not compare the reference's own overflows (see compare_output).
        ``same_as``: the candidate's outputs of an earlier, passing run on the same inputs;
        an output identical to it bit for bit passes without being compared again. ``ran``:
        the candidate's ``call(inputs, False)``, when it already ran."""
        nonfinite = "fail" if probe is None else ("match" if probe == "special" else "ignore")
        nonlocal bitwise
        res, after = ran if ran is not None else call(inputs, False)
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
        cache: dict = {}
        float_out = {n for n, d, _ in outs_spec if D.is_float(d)}

        def bound_of(name):
            """A lazy arithmetic bound for output ``name`` (None: the flat rule)."""
            if flat or name not in float_out or ("eb" in bound_state and bound_state["eb"] is None):
                return None

            def get():
                if "b" not in cache:
                    eb = error_bound(worst_case=probe is not None)
                    cache["b"] = eb.run(inputs) if eb is not None else None
                if cache["b"] is None:  # the bound turned out unavailable: widen nothing
                    return np.zeros(np.shape(ref_out[name]))
                return cache["b"][name]
            return get
        for n, dt, sh in outs_spec:
            if n not in outs:
                fail(f"output {n}: missing from the candidate's results ({label})")
                ok_all = False
                bitwise = False
                continue
            y = np.asarray(outs[n])
            if same_as is not None and n in same_as and bitwise_equal(y, same_as[n]):
                continue
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
                               rtol=rtol, norm_tol=norm_tol, where=label, bound=bound_of(n), nonfinite=nonfinite)
            if record:
                acc.add(c)
            bitwise = bitwise and c.bitwise
            for m in c.failures:
                fail(m)
            ok_all = ok_all and c.ok
        return ok_all, outs

    stop = False
    per_run = sum(int(np.prod(sh, dtype=np.int64)) for _, _, sh in outs_spec)
    # the runs in order: (seed, distribution, probe or None); fixed up front so that the
    # reference side of the next run can be computed while this one runs
    plan: list = []
    checked = dict.fromkeys(dists, 0)
    for k, seed in enumerate(seeds):
        for dist in dists:
            if k > 0 and min_samples is not None and checked[dist] >= min_samples:
                rep.seeds_skipped.append(f"{seed} ({dist})")
                continue
            checked[dist] += per_run
            plan.append((seed, dist, None))
    if rep.seeds_skipped:
        run_seeds = {s for s, _, _ in plan}
        rep.seeds = [s for s in seeds if s in run_seeds]
    # another program verified against the reference: its comparisons count too
    others = (cand.kernel,) if cand.kernel != ref.kernel else ()
    if "branches" in probes and not any(any(branch_points(k)) or sum_points(k) for k in (ref.kernel, *others)):
        rep.probe_notes.append("branches: not run: no comparison of an input with a constant or another input")
        probes = [p for p in probes if p != "branches"]
        rep.probes = probes
    plan += [(seeds[0], probe, probe) for probe in probes]
    planned = len(plan) + (runner is not interp_runner)
    done = 0

    def ran(label: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, max(planned, done), label)

    # The reference interpreter serves one thread at a time; the candidate's session
    # serializes its runs itself.
    ref_lock = threading.Lock()

    special_found: dict = {}  # seed -> the special values the probe injected
    cov = None
    if coverage:
        from .coverage import Coverage

        cov = Coverage(ref.kernel, others[0] if others else None)

    def observe(inputs: dict) -> None:
        """Branch coverage on one run's values (under ref_lock)."""
        if cov is None:
            return
        values = dict(inputs)
        if cov.needs_intermediates:
            try:
                values.update(ref_interp.run(inputs, intermediates=True))
            except InterpError:
                pass
        cov.observe(values)

    def adaptive_inputs(seed: int, dist: str):
        """The ``range`` probe's inputs at the widest level where the reference is defined
        (a signed overflow or another reference error there is the input's fault, not a
        counterexample) and finite; the ``branches`` probe's planted inputs. None (noted)
        when the reference is undefined on every try."""
        levels = range(RANGE_LEVELS) if dist == "range" else range(1)
        why = ""
        fallback = None
        for level in levels:
            inputs = random_inputs(ref.kernel, seed, dist, explicit_doms, level=level, also=others)
            try:
                outs = ref_interp.run(inputs, **uninit)
            except InterpError as e:
                why = str(e).splitlines()[0][:160]
                continue
            finite = all(np.isfinite(np.asarray(outs[n], dtype=np.float64)).all()
                         for n, dt, _ in outs_spec if D.is_float(dt))
            if finite or level == RANGE_LEVELS - 1:
                if dist == "range":
                    e10 = {p.dtype: range_exponent(p.dtype, level) for p in ref.kernel.inputs if D.is_float(p.dtype)}
                    span = ", ".join(f"{t} 1e-{x}..1e{x}" for t, x in sorted(e10.items()))
                    rep.probe_notes.append(f"range: level {level}{' (' + span + ')' if span else ''}"
                                           + ("" if finite else "; the reference overflows at every level: its "
                                              "non-finite elements are not compared")
                                           + (f"; wider levels: {why}" if level and why else ""))
                return (inputs, *reference_run(inputs, outs))
            fallback = fallback or (inputs, outs)
            why = "the reference overflows to inf/NaN"
        rep.probe_notes.append(f"{dist}: skipped: the reference is undefined on these inputs ({why})")
        return None

    def materialize(seed: int, dist: str):
        """(inputs, reference outputs, unwritten masks) of one planned run (None: a probe
        skipped, see adaptive_inputs)."""
        with ref_lock:
            if dist == "special":
                inputs, special_found[seed], outs = special_inputs(seed)
                item = (inputs, *reference_run(inputs, outs))
            elif dist in ADAPTIVE_PROBES:
                item = adaptive_inputs(seed, dist)
            elif reference_cache is not None:
                item = reference_cache.run(seed, dist)
            else:
                inputs = random_inputs(ref.kernel, seed, dist, explicit_doms)
                item = (inputs, *reference_run(inputs))
            if item is not None:
                observe(item[0])
            return item

    # A compiled candidate runs in another process: while this thread compares run i, run
    # i+1 is already in the worker and the inputs and reference outputs of run i+2 are being
    # computed (NumPy releases the GIL). The interpreter runner runs in this process and is
    # not pipelined.
    pipelined = runner is not interp_runner
    depth = 3 if pipelined else 1

    def stage(i: int):
        seed, dist, _ = plan[i]
        item = materialize(seed, dist)
        # behind a failed run (a crash, a hang) the verification stops: do not pay again
        return item, (call(item[0], False) if item is not None and pipelined and not failed_run.is_set() else None)

    ahead = ThreadPoolExecutor(max_workers=depth, thread_name_prefix="leirc-verify")
    pending: dict = {}

    def top_up(start: int) -> None:
        """Keep ``depth`` runs in flight from ``start``."""
        for j in range(start, min(len(plan), start + depth)):
            if j not in started:
                started.add(j)
                pending[j] = ahead.submit(stage, j)
        queue_repeat(start)

    # The repeated run (see below) needs only the first run's inputs: once that run passed
    # and the last planned run is in flight, its call is queued behind it, so the worker
    # runs it while this thread still compares the last runs (a probe's worst-case bound is
    # the longest of those). The worker still sees it after every planned run.
    repeat: dict = {}

    def queue_repeat(start: int) -> None:
        if (pipelined and "future" not in repeat and first is not None and first[4]
                and start + depth > len(plan) and not failed_run.is_set()):
            repeat["future"] = ahead.submit(repeat_call, pending.get(len(plan) - 1))

    def repeat_call(last):
        if last is not None:
            try:
                last.result()
            except Exception:  # noqa: BLE001 - the main thread reports it; only the order matters here
                pass
        return None if failed_run.is_set() else call(first[0], False)

    started: set = set()
    try:
        top_up(0)
        for i, (seed, dist, probe) in enumerate(plan):
            label = f"seed {seed}, {dist}"
            ran_result = None
            try:
                fut = pending.pop(i, None)
                item, ran_result = fut.result() if fut is not None else stage(i)
                if item is None:  # an adaptive probe the reference is undefined on (noted)
                    rep.probes = [p for p in rep.probes if p != probe]  # not claimed as passed
                    top_up(i + 1)
                    ran(label)
                    continue
                inputs, ref_out, ref_unw = item
                if probe == "special":
                    injected = rep.special_values = special_found[seed]
                    label = f"seed {seed}, special ({', '.join(injected) if injected else 'zeros only'})"
            except InterpError as e:
                fail(f"reference program failed ({label}): {e}")
                stop = True
                break
            top_up(i + 1)
            if probe is None:
                rep.runs += 1
            else:
                rep.probe_runs += 1
            r = check_run(inputs, ref_out, ref_unw, label, True, probe=probe, ran=ran_result)
            ran(label)
            if r is None:
                stop = True
                break
            if first is None and probe is None:
                first = (inputs, ref_out, ref_unw, label, r[0], r[1])
                queue_repeat(i + 1)
    except KeyboardInterrupt:
        # keep what was checked: the caller prints a partial report and says it was interrupted
        rep.interrupted = stop = True
        fail(f"interrupted after {done} of {planned} runs")
    finally:
        ahead.shutdown(wait=True, cancel_futures=True)
    # the repeated run catches state kept between runs; the built-in interpreter runner
    # is deterministic and stateless, so it is skipped there
    if not stop and first is not None and first[4] and runner is not interp_runner:
        inputs, ref_out, ref_unw, label, _, first_outs = first
        n_before = len(fails)
        fut = repeat.get("future")
        # None: not queued, cancelled by the shutdown before it started, or skipped behind
        # a failed call; then it is made here, as without the pipeline
        queued = fut.result() if fut is not None and not fut.cancelled() else None
        r = check_run(inputs, ref_out, ref_unw, label + ", repeated", False, same_as=first_outs, ran=queued)
        ran(label + ", repeated")
        if r is not None and len(fails) > n_before:
            fail(f"output depends on previous run: repeating the first run ({label}) with fresh buffers "
                 f"gave a wrong result")
    if cov is not None:
        rep.branch_coverage = cov.to_json()
        rep.warnings.extend(cov.warnings())
    rep.per_output = acc.per
    for p in acc.per.values():
        for k in ("max_abs_err", "max_rel_err", "norm_rel_err"):
            v = p[k]
            cur = getattr(rep, k)
            if math.isnan(v) or v > cur:
                setattr(rep, k, v)
    rep.bitwise = bitwise
    return _finish(rep, t0)


#: most literal statement instances for which a program with f16/bf16 accumulators is
#: verified against the literal oracle (about 50 us each: 1 s per run)
NARROW_LITERAL_LIMIT = 20_000


def uses_literal(result) -> bool:
    """Whether the verifier's default (vectorized) oracle runs ``result`` literally: it has
    f16/bf16 accumulators and at most NARROW_LITERAL_LIMIT literal statement instances."""
    return bool(narrow_accumulations(result)) and iterations(result) <= NARROW_LITERAL_LIMIT


def narrow_accumulations(result) -> list:
    """Targets of ``+``/``-`` reductions whose accumulator is f16 or bf16 (where the
    vectorized oracle's float64 sum and the language's per-term rounding differ)."""
    out = []
    for si in result.stmts:
        if si.kind == "reduce" and si.op in ("+", "-") and si.stmt.target.dtype in ("f16", "bf16"):
            name = si.stmt.target.name
            if name not in out:
                out.append(name)
    return out


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


__all__ = ["verify", "evidence", "uses_literal", "narrow_accumulations", "NARROW_LITERAL_LIMIT", "PROVEN_NUMERICS", "VERIFY_PROTOCOL", "VerifyReport", "RunResult", "interp_runner", "tolerances", "DEFAULT_DISTS", "DEFAULT_PROBES"]
