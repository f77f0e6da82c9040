"""Oracles of the :class:`~leirc.engine.evaluate.Evaluator`: what a candidate's outputs are
compared with.

* :class:`InterpreterOracle` -- the reference interpreter running a reference program (the
  candidate itself by default), through :func:`leirc.verify.verify` and the
  :class:`~leirc.engine.refcache.CachedReference` (inputs drawn per seed x distribution,
  the tolerance of the program's arithmetic).
* :class:`TorchOracle` -- the user's PyTorch module (a ``MODEL.py`` in KernelBench format),
  run in a worker process (:mod:`leirc.engine.torch_worker`) with a timeout, on the inputs of
  ``get_inputs()`` per seed and the weights of the import; its outputs are kept per
  (model, weights, seed) in a :class:`~leirc.engine.refcache.ModuleReference` (in memory,
  and on disk with ``cache_dir``). Each output is compared with
  :func:`leirc.verify.compare_output` under the same rule as the interpreter oracle: the
  dtype's tolerance (f32 1e-4 / 1e-5, f64 1e-9 / 1e-12, f16/bf16 1e-2 / 1e-3) widened by the
  arithmetic error bound (:mod:`leirc.verify.bound`) of the *imported* program -- the LEIR
  that mirrors the module op for op, so its reduction lengths and dtypes are the module's --
  run on the same inputs: a ConvTranspose3d + BatchNorm + global average pool sums tens of
  thousands of f32 terms, and a correct kernel differs from PyTorch's own summation order
  by more than a flat 1e-5. The bound comes from the imported program, never from the
  candidate (a candidate must not widen its own tolerance); without it (an oracle made
  without ``reference_text``, a program the bound does not model) the flat rule applies.
  Explicit ``rtol``/``norm_tol`` select the flat rule. The module is the specification, so
  a kernel that keeps an f64 model's statistics in f32 still fails.

Both have the same small interface, used by the Evaluator: ``name`` (recorded in
:attr:`Evaluation.oracle`), and ``prepare(evaluator, candidate, kernel) -> Prepared`` whose
``reference_kernel``/``key`` enter the evaluation's cache key, ``check(runner, source,
numerics) -> VerifyReport`` verifies a candidate run through ``runner`` (``run_kernel``'s
signature) and ``timing_sets()`` gives the inputs to time it on.

A module that hangs, crashes, runs out of memory or raises is an :class:`OracleError` with
``kind`` ``timeout | crash | memory | raised | load`` (the Evaluator reports
``error_kind="oracle"`` with the message); the compiler's process never runs user code.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from ..io import python_module
from .. import __version__
from ..interp import dtypes as D
from ..lang.checker import check_text
from ..lang.diagnostics import render
from ..verify import VerifyReport, bitwise_equal, compare_output, evidence, lazy_bounds, tolerances, try_bound, verify
from ..verify import RunResult
from .refcache import CachedReference, ModuleReference

ORACLE_ERROR_KINDS = ("timeout", "crash", "memory", "raised", "load")
MAX_FAILURES = 25


class OracleError(Exception):
    """The oracle itself failed (not the candidate): ``kind`` in :data:`ORACLE_ERROR_KINDS`."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __str__(self) -> str:
        return f"oracle {self.kind}: {self.message}"


def pick_kernel(text: str, kernel: Optional[str], what: str, prefer: Optional[str] = None):
    """(CheckResult, None) of the named (or preferred, or only) kernel of ``text``, or
    (None, message) when the text has errors or the choice is ambiguous."""
    cf = check_text(text, f"<{what}>")
    if not cf.ok:
        errs = [d for d in cf.diagnostics if d.is_error]
        return None, "\n".join(render(d, cf.parse.source) for d in errs)
    results = cf.results
    names = [r.kernel.name for r in results]
    want = kernel if kernel is not None else (prefer if prefer in names and len(names) > 1 else None)
    if want is None:
        if len(results) != 1:
            return None, f"the {what} defines {len(results)} kernels ({', '.join(names)}); name one with kernel="
        return results[0], None
    for r in results:
        if r.kernel.name == want:
            return r, None
    return None, f"no kernel '{want}' in the {what} (kernels: {', '.join(names)})"


# ---------------------------------------------------------------------------
# the interpreter


class InterpreterOracle:
    """The interpreter running ``reference`` (LEIR text; None: the candidate itself)."""

    name = "interpreter"

    def __init__(self, reference: Optional[str] = None):
        self.reference = reference

    def prepare(self, ev, cand, kernel: Optional[str]) -> "_InterpreterPrepared":
        if self.reference is None:
            ref = cand
        else:
            ref, problem = pick_kernel(self.reference, kernel, "reference", prefer=cand.kernel.name)
            if ref is None:
                raise ValueError(problem)
        return _InterpreterPrepared(ev, self.reference, cand, ref)


@dataclass
class _InterpreterPrepared:
    ev: object
    reference_text: Optional[str]
    cand: object
    ref: object
    key: Optional[str] = None  # the reference kernel is the key

    @property
    def reference_kernel(self):
        return self.ref.kernel

    @property
    def cached(self) -> CachedReference:
        return self.ev.reference(self.ref)

    def check(self, runner, source_text: str, numerics: Optional[str]) -> VerifyReport:
        ev = self.ev
        return verify(source_text, self.reference_text, kernel=self.cand.kernel.name, seeds=ev.seeds, dists=ev.dists,
                      target=ev.target_name, runner=runner, rtol=ev.rtol, norm_tol=ev.norm_tol, timeout=ev.timeout,
                      reference_cache=self.cached, numerics=numerics, progress=ev.progress, **ev.verify_options)

    def timing_sets(self) -> list:
        first = self.ev.dists[0] if self.ev.dists else "uniform"
        return [self.cached.run(seed, first)[0] for seed in self.ev.seeds]


# ---------------------------------------------------------------------------
# the PyTorch module


def _file_digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _torch_version() -> Optional[str]:
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:  # noqa: BLE001 - a missing distribution only makes the key less specific
        return None


class TorchOracle:
    """The PyTorch module of ``model_path`` as the oracle (see the module docstring).

    ``weights``: the kernel's parameter inputs by LEIR name (from the import) and
    ``qualnames`` their qualified names in the module (``ImportResult.meta["params"]``);
    the worker sets those tensors of the module to these values, so both sides run on the
    same weights. ``timeout``: seconds for the module's runs of one request (all the seeds
    asked for at once), counted from the moment the model is built; ``startup_timeout``:
    seconds for starting the worker, importing torch and building the model.
    ``cache_dir``: keep reference runs on disk there too."""

    name = "torch"

    def __init__(self, model_path: str, weights: Optional[dict] = None, qualnames: Optional[dict] = None, *,
                 timeout: float = 300.0, startup_timeout: float = 300.0, threads: Optional[int] = None,
                 memory_limit_mb: Optional[int] = None, cache_dir: Optional[str] = None,
                 reference_text: Optional[str] = None):
        #: the imported LEIR program (the module op for op): the arithmetic bound's source
        self.reference_text = reference_text
        self.model_path = os.path.abspath(model_path)
        if not os.path.isfile(self.model_path):
            raise OracleError("load", f"{model_path}: no such file")
        self.weights = dict(weights or {})
        self.qualnames = dict(qualnames or {})
        missing = [n for n in self.weights if n not in self.qualnames]
        if missing:
            raise ValueError(f"weights without a qualified name: {', '.join(missing)}")
        self.timeout = float(timeout)
        self.startup_timeout = float(startup_timeout)
        self.threads = threads
        self.memory_limit_mb = memory_limit_mb
        self.refs = ModuleReference(self.key(), None if cache_dir is None else os.path.join(cache_dir, "torch"))
        self.stats = {"worker_runs": 0, "seed_runs": 0}
        self.last_pid: Optional[int] = None
        self._lock = threading.Lock()  # one worker at a time: a prefetch and a caller never both run
        self._failure: Optional[tuple] = None  # (seeds, OracleError) of a failed prefetch
        self._prefetch: Optional[threading.Thread] = None
        self._running: Optional[tuple] = None  # (process, temp dir) of the worker now running
        atexit.register(self.close)

    def close(self) -> None:
        """Stop a running worker and remove its files (also done at exit: a prefetch may
        still be running when a build stops early)."""
        running = self._running
        if running is not None:
            _kill_group(running[0])
            shutil.rmtree(running[1], ignore_errors=True)

    @classmethod
    def from_import(cls, model_path: str, imported, **kw) -> "TorchOracle":
        """The oracle for an :class:`leirc.frontend.ImportResult` of ``model_path``."""
        qual = {p["name"]: p["qualname"] for p in imported.meta.get("params", [])}
        kw.setdefault("reference_text", getattr(imported, "text", None))
        return cls(model_path, imported.weights, qual, **kw)

    def key(self) -> str:
        """What the module's outputs depend on, besides the seed: the model file (its class,
        ``get_inputs`` and ``get_init_inputs``), the weights, threads, torch and leirc."""
        h = hashlib.sha256()
        for name in sorted(self.weights):
            a = np.ascontiguousarray(self.weights[name])
            h.update(f"{name}:{self.qualnames[name]}:{a.dtype}:{a.shape};".encode())
            h.update(a.view(np.uint8).tobytes() if a.size else b"")
        spec = {"model": _file_digest(self.model_path), "weights": h.hexdigest(), "threads": self.threads,
                "torch": _torch_version(), "leirc": __version__}
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()

    # -- reference runs --------------------------------------------------------------
    def references(self, seeds: Sequence[int]) -> dict:
        """``{seed: (inputs, outputs)}``; the seeds not cached are run in one worker (a
        failure of a :meth:`prefetch` of the same seeds is raised, not run again)."""
        with self._lock:
            got = {int(s): self.refs.get(int(s)) for s in seeds}
            missing = [s for s, v in got.items() if v is None]
            if missing and self._failure is not None and set(missing) & set(self._failure[0]):
                raise self._failure[1]
            if missing:
                for s, arrays in self._run_worker(missing).items():
                    got[s] = self.refs.put(s, arrays)
            return got

    def prefetch(self, seeds: Sequence[int]) -> None:
        """Compute the references of ``seeds`` in the background (the driver starts this
        right after the import, so the worker imports torch while the kernel is built)."""
        seeds = [int(s) for s in seeds]

        def run():
            try:
                self.references(seeds)
            except OracleError as e:
                self._failure = (seeds, e)

        self._prefetch = threading.Thread(target=run, name="leirc-torch-prefetch", daemon=True)
        self._prefetch.start()

    def wait_prefetch(self, timeout: Optional[float] = None) -> bool:
        """Wait for a running :meth:`prefetch`; False if it is still running after ``timeout``."""
        if self._prefetch is not None:
            self._prefetch.join(timeout)
            return not self._prefetch.is_alive()
        return True

    def _run_worker(self, seeds: list) -> dict:
        tmp = tempfile.mkdtemp(prefix="leirc-torch-")
        try:
            wpath = None
            if self.weights:
                wpath = os.path.join(tmp, "weights.npz")
                np.savez(wpath, **{self.qualnames[n]: _storable(a) for n, a in self.weights.items()})
            req = {"model": self.model_path, "seeds": seeds, "weights": wpath, "out": tmp, "threads": self.threads,
                   "memory_limit_mb": self.memory_limit_mb}
            rpath = os.path.join(tmp, "request.json")
            with open(rpath, "w", encoding="utf-8") as f:
                json.dump(req, f)
            log_path = os.path.join(tmp, "log.txt")
            self.stats["worker_runs"] += 1
            t0 = time.perf_counter()
            with open(log_path, "wb") as log:
                p = subprocess.Popen(python_module("leirc.engine.torch_worker", rpath), stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                     cwd=tmp)  # `-m` puts the cwd first on sys.path: nothing to shadow here
                self._running = (p, tmp)
                try:
                    rc = _wait(p, os.path.join(tmp, "loaded"), self.startup_timeout, self.timeout)
                except _Late as late:
                    _kill_group(p)
                    what = (f"was not built in {self.startup_timeout:g} s (worker start, torch import, "
                            "get_init_inputs and Model(...))" if late.phase == "startup" else
                            f"did not finish {len(seeds)} run(s) in {self.timeout:g} s")
                    raise OracleError("timeout", f"the PyTorch module {self.model_path} {what}") from None
                finally:
                    _kill_group(p)  # whatever the user's code started goes with it
                    self._running = None
            res = None
            with suppress(OSError, ValueError):
                with open(os.path.join(tmp, "result.json"), encoding="utf-8") as f:
                    res = json.load(f)
            if res is None:
                raise OracleError("crash", f"the PyTorch worker for {self.model_path} died ({_exit_text(rc)}) after "
                                           f"{time.perf_counter() - t0:.1f} s{_tail(log_path)}")
            self.last_pid = res.get("pid")
            if not res.get("ok"):
                raise OracleError(res.get("kind") or "raised", res.get("error") or "the PyTorch module failed")
            out = {}
            for s in seeds:
                with np.load(os.path.join(tmp, f"seed_{s}.npz"), allow_pickle=False) as z:
                    out[s] = {k: z[k] for k in z.files}
            self.stats["seed_runs"] += len(seeds)
            return out
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def feed(self, kernel, inputs: list) -> dict:
        """The kernel's inputs: the module's tensor inputs in order, then weights by name."""
        feed = {}
        k = 0
        for p in kernel.inputs:
            if p.name in self.weights:
                feed[p.name] = np.asarray(self.weights[p.name])
            else:
                if k >= len(inputs):
                    raise OracleError("load", f"kernel input '{p.name}' is neither one of the module's "
                                              f"{len(inputs)} tensor input(s) nor a weight of the import")
                feed[p.name] = inputs[k]
                k += 1
        return feed

    # -- the Evaluator's interface -----------------------------------------------------
    def prepare(self, ev, cand, kernel: Optional[str]) -> "_TorchPrepared":
        return _TorchPrepared(ev, self, cand)


def _storable(a) -> np.ndarray:
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a  # np.savez cannot store bf16


class _Late(Exception):
    def __init__(self, phase: str):
        self.phase = phase


def _wait(p: subprocess.Popen, marker: str, startup: float, run: float) -> int:
    """The worker's exit status; :class:`_Late` when it overruns the startup phase (until
    ``marker`` exists) or the run phase after it."""
    deadline = time.monotonic() + startup
    phase = "startup"
    while True:
        try:
            return p.wait(0.05)
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if phase == "startup" and os.path.exists(marker):
            phase, deadline = "run", now + run
        elif now > deadline:
            raise _Late(phase)


def _kill_group(p: subprocess.Popen) -> None:
    with suppress(ProcessLookupError, PermissionError):  # the group is gone already
        os.killpg(p.pid, signal.SIGKILL)
    with suppress(subprocess.TimeoutExpired):  # reaped below by the OS if it lingers
        p.wait(5)


def _exit_text(rc) -> str:
    if rc is None:
        return "killed"
    if rc < 0:
        with suppress(ValueError):
            return f"signal {signal.Signals(-rc).name}"
        return f"signal {-rc}"
    return f"exit status {rc}"


def _tail(path: str, n: int = 6) -> str:
    with suppress(OSError):
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").strip().splitlines()[-n:]
        if lines:
            return ":\n  " + "\n  ".join(lines)
    return ""


@dataclass
class _TorchPrepared:
    ev: object
    oracle: TorchOracle
    cand: object
    reference_kernel: object = None  # the module, not a program, is the reference

    @property
    def key(self) -> str:
        return "torch:" + self.oracle.key()

    def check(self, runner, source_text: str, numerics: Optional[str]) -> VerifyReport:
        return check_against_module(self.oracle, source_text, self.cand.kernel, runner, seeds=self.ev.seeds,
                                    target=self.ev.target_name, timeout=self.ev.timeout,
                                    rtol=self.ev.rtol, norm_tol=self.ev.norm_tol, numerics=numerics)

    def timing_sets(self) -> list:
        refs = self.oracle.references(self.ev.seeds)
        return [self.oracle.feed(self.cand.kernel, refs[int(s)][0]) for s in self.ev.seeds]


def flat_tolerance_text(kernel) -> str:
    parts = []
    for dt in dict.fromkeys(p.dtype for p in kernel.outputs):
        if D.is_float(dt):
            r, n = tolerances(dt)
            parts.append(f"{dt} rtol {r:g}, normwise {n:g}")
        else:
            parts.append(f"{dt} exact")
    return "flat by output dtype (" + "; ".join(parts) + ")"


def check_against_module(oracle: TorchOracle, source_text: str, kernel, runner: Callable, *, seeds, target: str,
                         timeout: float, rtol: Optional[float] = None, norm_tol: Optional[float] = None,
                         numerics: Optional[str] = None) -> VerifyReport:
    """Run the candidate ``kernel`` of ``source_text`` through ``runner`` (``run_kernel``'s
    signature) on the module's inputs of every seed and compare with the module's outputs.
    Like :func:`leirc.verify.verify`, outputs start poisoned (a never-written element is a
    failure), inputs must come back unchanged, and the first seed is run once more with
    fresh buffers. Raises :class:`OracleError` when the module fails."""
    t0 = time.perf_counter()
    seeds = [int(s) for s in seeds]
    flat = rtol is not None or norm_tol is not None
    eb, why = (None, "") if flat else _module_bound(oracle, kernel)
    tol_text = ("flat (rtol/norm_tol given)" if flat else
                "arithmetic (the imported program's reductions and dtypes) over the "
                + flat_tolerance_text(kernel).replace("flat by output dtype", "dtype tolerance") if eb is not None else
                flat_tolerance_text(kernel) + (f"; no arithmetic bound: {why}" if why else ""))
    rep = VerifyReport(False, True, 0.0, 0.0, 0.0, seeds, ["module"], [], candidate=f"{kernel.name} ({target})",
                       reference=f"PyTorch module ({oracle.model_path})", target=target, numerics=numerics,
                       tolerance=tol_text, oracle="torch", evidence=evidence(numerics))
    fails = rep.failures

    def fail(msg: str) -> None:
        if len(fails) < MAX_FAILURES:
            fails.append(msg)
        elif len(fails) == MAX_FAILURES:
            fails.append("... (more failures omitted)")

    refs = oracle.references(seeds)
    outs_spec = [(p.name, p.dtype, tuple(p.shape)) for p in kernel.outputs]

    def call(feed: dict, alt: bool):
        cin = {k: np.array(v, copy=True) for k, v in feed.items()}
        init = {n: D.poisoned(dt, sh, alt) for n, dt, sh in outs_spec}
        try:
            res = runner(source_text, cin, init, kernel=kernel.name, target=target, timeout=timeout)
        except Exception as e:  # noqa: BLE001 - a runner must not raise; a raise is a crash of the candidate
            res = RunResult(False, {}, None, f"{type(e).__name__}: {e}", "exception")
        return res, (res.inputs_after if res.inputs_after is not None else cin)

    def run_seed(seed: int, record: bool, label: str) -> Optional[bool]:
        inputs, ref_outs = refs[seed]
        feed = oracle.feed(kernel, list(inputs))
        res, after = call(feed, False)
        if not res.ok:
            kind = f" [{res.error_kind}]" if res.error_kind else ""
            fail(f"candidate failed{kind} ({label}): {res.error}")
            return None
        ok = True
        mutated = [k for k in feed if k not in after or not bitwise_equal(after[k], feed[k])]
        if mutated:
            fail(f"inputs mutated: the candidate modified input(s) {', '.join(mutated)} ({label})")
            ok = False
        if len(ref_outs) != len(outs_spec):
            fail(f"the kernel has {len(outs_spec)} output(s), the PyTorch module returns {len(ref_outs)} ({label})")
            return False
        second = None
        bound_of = lazy_bounds(eb, feed)
        for (n, dt, sh), ref in zip(outs_spec, ref_outs):
            y = (res.outputs or {}).get(n)
            if y is None:
                fail(f"output {n}: missing from the candidate's results ({label})")
                ok = rep.bitwise = False
                continue
            if ref.dtype != D.np_dtype(dt) or tuple(ref.shape) != sh:
                fail(f"output {n}: the PyTorch module returns {D.leir_dtype(ref.dtype) or ref.dtype}{list(ref.shape)}, "
                     f"the kernel declares {dt}{list(sh)} ({label})")
                ok = rep.bitwise = False
                continue
            y = np.asarray(y)
            unw = None
            if y.shape == sh and y.dtype == D.np_dtype(dt):
                unw = D.poison_mask(y, dt)
                if not D.is_float(dt) and unw.any():
                    # an integer equal to the sentinel may be a real value: unwritten only if it
                    # also holds the second sentinel in a run poisoned with that one
                    if second is None:
                        r2, _ = call(feed, True)
                        second = r2.outputs if r2.ok else {}
                    y2 = second.get(n)
                    if y2 is not None and np.shape(y2) == sh:
                        unw = unw & D.poison_mask(np.asarray(y2), dt, True)
            c = compare_output(n, y, ref, dt, unwritten=unw, rtol=rtol, norm_tol=norm_tol, where=label,
                               bound=bound_of(n) if D.is_float(dt) else None)
            if record:
                _accumulate(rep, c)
            rep.bitwise = rep.bitwise and c.bitwise
            for m in c.failures:
                fail(m)
            ok = ok and c.ok
        return ok

    first_ok = None
    for k, seed in enumerate(seeds):
        rep.runs += 1
        r = run_seed(seed, True, f"seed {seed}, PyTorch get_inputs()")
        if r is None:
            break
        if k == 0:
            first_ok = r
    else:
        if first_ok:
            n_before = len(fails)
            r = run_seed(seeds[0], False, f"seed {seeds[0]}, PyTorch get_inputs(), repeated")
            if r is not None and len(fails) > n_before:
                fail(f"output depends on previous run: repeating the first run (seed {seeds[0]}) with fresh buffers "
                     "gave a wrong result")
    rep.equal = not fails and rep.runs > 0
    if not rep.equal:
        rep.bitwise = False
    rep.seconds = round(time.perf_counter() - t0, 3)
    return rep


def _module_bound(oracle, kernel) -> tuple:
    """(ErrorBound, "") of the oracle's imported program when it has the candidate's
    interface, else (None, why)."""
    text = getattr(oracle, "reference_text", None)
    if not text:
        return None, ""
    ref, problem = pick_kernel(text, None, "imported program", prefer=kernel.name)
    if ref is None:
        return None, problem.splitlines()[0]
    sig = lambda k: [(p.name, p.dtype, tuple(p.shape)) for p in k.inputs + k.outputs]  # noqa: E731
    if sig(ref.kernel) != sig(kernel):
        return None, "the imported program's interface differs from the candidate's"
    return try_bound(ref)


def _accumulate(rep: VerifyReport, c) -> None:
    p = rep.per_output.setdefault(c.name, {"ok": True, "bitwise": True, "max_abs_err": 0.0, "max_rel_err": 0.0,
                                           "norm_rel_err": 0.0})
    p["ok"] = p["ok"] and c.ok
    p["bitwise"] = p["bitwise"] and c.bitwise
    for k in ("max_abs_err", "max_rel_err", "norm_rel_err"):
        v = getattr(c, k)
        if np.isnan(v) or v > p[k]:
            p[k] = v
        if np.isnan(v) or v > getattr(rep, k):
            setattr(rep, k, v)


def summary(rep: VerifyReport) -> str:
    """One line for a person: what was verified against what, or the first failure."""
    if rep.equal:
        return (f"verified against {'PyTorch' if rep.oracle == 'torch' else 'the interpreter'} on {len(rep.seeds)} "
                f"seeds ({rep.target}; worst normwise rel. error {rep.norm_rel_err:.2g}; tolerance {rep.tolerance})")
    return rep.failures[0] if rep.failures else "verification failed"


def verify_model(model_path: str, leir_text: str, imported, *, seeds=(0, 1, 2), target: str = "interp",
                 timeout: float = 300.0, threads: Optional[int] = None, oracle: Optional[TorchOracle] = None,
                 rtol: Optional[float] = None, norm_tol: Optional[float] = None) -> VerifyReport:
    """Verify an imported kernel against its module with both sides sandboxed where it
    matters: the module in the oracle's worker, the kernel in the interpreter (``interp``,
    the compiler's own code) or a :class:`leirc.lower.session.KernelSession` (``llvm``...).
    What ``leirc import --verify`` needs; the driver goes through the Evaluator instead."""
    from ..lang.load import LoadError, load_kernel

    try:
        cr = load_kernel(leir_text)
    except LoadError as e:
        rep = VerifyReport(False, False, 0.0, 0.0, 0.0, list(seeds), ["module"], [f"the LEIR program: {e.message}"],
                           oracle="torch", target=target)
        return rep
    oracle = oracle or TorchOracle.from_import(model_path, imported, timeout=timeout, threads=threads)
    if target == "interp":
        from ..verify import interp_runner

        return check_against_module(oracle, leir_text, cr.kernel, interp_runner, seeds=seeds, target="interp",
                                    timeout=timeout, rtol=rtol, norm_tol=norm_tol)
    from ..lower.device import KernelSession

    with KernelSession(leir_text, kernel=cr.kernel.name, target=target, threads=threads, timeout=timeout,
                       poison_intermediates=True) as s:
        return check_against_module(oracle, leir_text, cr.kernel, s.runner, seeds=seeds, target=target,
                                    timeout=timeout, rtol=rtol, norm_tol=norm_tol)


__all__ = ["InterpreterOracle", "TorchOracle", "OracleError", "ORACLE_ERROR_KINDS", "check_against_module",
           "verify_model", "summary", "pick_kernel", "flat_tolerance_text"]
