"""The leirc driver: one flat list of named passes, the same for ``.leir`` and ``.py`` inputs.

::

    PASSES = [("load", ...), ("check", ...), ("optimize", ...), ("lower", ...), ("build", ...),
              ("nvcc", ...), ("verify", ...), ("time", ...)]

``load`` parses a ``.leir`` file, or imports a KernelBench-format ``MODEL.py`` with the
PyTorch frontend (whose module then becomes the verification oracle); from there on both
kinds of input are the same list of :class:`Job` values, one per kernel, and go through the
same passes. ``optimize`` takes an :class:`Optimizer` (``-O0``, ``-O1``; the search plugs in
here). ``verify`` compares the optimized kernel, compiled and run in a sandboxed worker,
with the oracle: the interpreter running the *original* program for ``.leir`` inputs, the
PyTorch module for ``.py`` inputs (run in a worker process of its own by
:class:`leirc.engine.oracles.TorchOracle`, through the same Evaluator). Options are
:class:`BuildOptions` fields (the CLI turns flags into them; nothing is read from the
environment).

Each pass takes and returns the :class:`Build`; a pass that finds errors raises
:class:`PipelineError` with diagnostics. ``print_after`` prints the program after a pass.
Progress goes to ``Build.log`` as it happens (the CLI prints it to stderr).

Layering: the driver sits above ``lower``, ``opt``, ``verify``, ``frontend`` and ``engine``
and below the clients (CLI, search, language server, dataset generator).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol

from .lang import ast as A
from .lang.checker import CheckResult, check_kernel, check_module
from .lang.diagnostics import error
from .lang.parser import ParseResult, parse
from .lang.printer import PRETTY, print_module

#: seeds and distributions of the verify pass for .leir inputs (the oracle is the interpreter)
LEIR_VERIFY_SEEDS = (0, 1)
LEIR_VERIFY_DISTS = ("uniform", "signed")
#: seeds of the verify pass for .py inputs (the oracle is the PyTorch module)
PY_VERIFY_SEEDS = (0, 1, 2)
#: seeds of the input sets used for timing (never the verification seeds)
TIMING_SEEDS = (100, 101, 102)


# ---------------------------------------------------------------------------
# optimizers


@dataclass
class Optimized:
    kernel: A.Kernel
    steps: list = field(default_factory=list)
    log: list = field(default_factory=list)


class Optimizer(Protocol):
    """What the ``optimize`` pass calls: a named policy that rewrites one checked kernel
    with checked strategy steps (so the result can be replayed from ``steps``)."""

    name: str

    def optimize(self, result: CheckResult, target: str) -> Optimized: ...


class O0:
    """The program as written."""

    name = "-O0"

    def optimize(self, result: CheckResult, target: str) -> Optimized:
        return Optimized(result.kernel)


class O1:
    """The fixed heuristic pipeline of :mod:`leirc.opt.o1`."""

    name = "-O1"

    def optimize(self, result: CheckResult, target: str) -> Optimized:
        from .opt.o1 import optimize

        res = optimize(result.kernel, target, result=result)
        return Optimized(res.kernel, list(res.steps), list(res.log))


class O2:
    """Register blocking and vector partial sums (:mod:`leirc.opt.o2`), then -O1."""

    name = "-O2"

    def optimize(self, result: CheckResult, target: str) -> Optimized:
        from .opt.o2 import optimize

        res = optimize(result.kernel, target, result)
        return Optimized(res.kernel, list(res.steps), list(res.log))


def _search() -> Optimizer:
    from .search.optimizer import SearchOptimizer  # lazy: the search pulls in its SQLite state and memory

    return SearchOptimizer()


#: optimization levels by the name ``-O`` takes
OPTIMIZERS: dict[str, Callable[[], Optimizer]] = {"0": O0, "1": O1, "2": O2, "search": _search}


# ---------------------------------------------------------------------------
# state


@dataclass(frozen=True)
class BuildOptions:
    target: str = "llvm"
    cuda_arch: str = "sm_90"
    kernel: Optional[str] = None  # build only this kernel
    opt: str = "0"  # a key of OPTIMIZERS
    #: None: verify when the program was optimized (.leir) or always (.py, the module is the oracle)
    verify: Optional[bool] = None
    time: bool = False  # time the kernel (.py: also PyTorch eager, side by side)
    torch_compile: bool = False  # .py with time: also time torch.compile (slow on a CPU)
    threads: int = 2
    timeout: float = 300.0
    #: the configured ``-O search`` optimizer (budget, algorithm, proposers...), built by the client
    search: Optional[object] = field(default=None, compare=False)

    def optimizer(self) -> Optimizer:
        if self.opt == "search" and self.search is not None:
            return self.search
        return OPTIMIZERS[self.opt]()


@dataclass
class Job:
    """One kernel on its way through the passes."""

    name: str
    original: CheckResult
    current: CheckResult
    steps: list = field(default_factory=list)  # strategy steps applied by the optimizer
    opt_log: list = field(default_factory=list)
    module: object = None  # tvm IRModule after lower
    built: object = None  # leirc.lower.Built after build
    nvcc_log: Optional[str] = None
    verification: object = None  # VerifyReport (oracle "interpreter" for .leir, "torch" for .py)
    timing: dict = field(default_factory=dict)  # name -> ms (leirc, eager, compile)
    timing_errors: dict = field(default_factory=dict)
    #: what the optimizer already measured of ``current`` (``-O search``: the winner's
    #: Evaluation, verified against the original in its own build, and the interleaved
    #: confirmation against the input): reused so the winner is verified once
    evaluation: object = None
    confirmation: object = None  # leirc.measure.Paired: a = the input, b = current
    searched: object = None  # -O search: its SearchResult (the trace's evidence labels)

    @property
    def optimized(self) -> bool:
        return bool(self.steps)

    def text(self, which: str = "current") -> str:
        k = self.current.kernel if which == "current" else self.original.kernel
        return print_module(A.Module((k,)), PRETTY)


@dataclass
class ModelInput:
    """A ``.py`` input after ``load``: the import result (LEIR text, weights, meta)."""

    path: str
    imported: object  # leirc.frontend.ImportResult
    import_s: float
    oracle: object = None  # leirc.engine.oracles.TorchOracle, started by load (or the first verify)


@dataclass
class Build:
    source: bytes | str
    file: str = "<input>"
    options: BuildOptions = field(default_factory=BuildOptions)
    log: Callable[[str], None] = field(default=lambda msg: None, repr=False)
    kind: str = "leir"  # or "py"
    parsed: Optional[ParseResult] = None
    model: Optional[ModelInput] = None
    jobs: list = field(default_factory=list)
    diagnostics: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    @property
    def text(self) -> Optional[str]:
        return self.parsed.source if self.parsed is not None else None

    def job(self, name: str) -> Job:
        return next(j for j in self.jobs if j.name == name)

    def note(self, msg: str) -> None:
        self.notes.append(msg)
        self.log(msg)


class UsageError(Exception):
    """A request the input cannot satisfy (e.g. ``--kernel`` names no kernel)."""


class ModelImportError(Exception):
    """A ``.py`` input that the PyTorch frontend cannot import (the message names the
    unsupported operator and its source line)."""


class PipelineError(Exception):
    def __init__(self, diagnostics: list, pass_name: str):
        super().__init__(f"{pass_name} failed")
        self.diagnostics = diagnostics
        self.pass_name = pass_name


def require_torch() -> None:
    """PyTorch is an optional extra; say how to get it instead of failing on an import."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise UsageError("PyTorch models need the torch extra: pip install 'leirc[torch]'")


def _fail(pass_name: str, code: str, msg: str, span=None, file: str = "<input>", notes=()) -> PipelineError:
    return PipelineError([error(code, msg, span, notes=list(notes)).with_file(file)], pass_name)


# ---------------------------------------------------------------------------
# passes


def load_pass(b: Build) -> Build:
    """Parse a .leir text, or import a .py model (its LEIR text is then parsed)."""
    if b.kind == "py":
        require_torch()
        from .frontend import FrontendError, import_model

        t0 = time.perf_counter()
        try:
            res = import_model(b.file)
        except FrontendError as e:
            raise ModelImportError(str(e)) from None
        b.model = ModelInput(b.file, res, time.perf_counter() - t0)
        b.source = res.text
        b.log(f"imported {b.file} in {b.model.import_s:.1f} s")
        if b.options.verify is not False:
            from .engine.oracles import TorchOracle

            # the module's worker starts now and computes the verify pass's references while
            # the kernel is optimized and built
            b.model.oracle = TorchOracle.from_import(b.file, res, timeout=b.options.timeout, threads=b.options.threads)
            b.model.oracle.prefetch(PY_VERIFY_SEEDS)
        # the LEIR text is ours, not the user's: diagnostics point into it by a derived name
        b.file = os.path.splitext(b.file)[0] + ".leir"
    pr = parse(b.source, b.file)
    b.parsed = pr
    if pr.module is None or any(d.is_error for d in pr.diagnostics):
        raise PipelineError(pr.diagnostics, "load")
    b.diagnostics += pr.diagnostics
    return b


def check_pass(b: Build) -> Build:
    assert b.parsed is not None and b.parsed.module is not None
    results = check_module(b.parsed.module)
    for r in results:
        r.diagnostics = [d.with_file(b.file) for d in r.diagnostics]
    if b.options.kernel is not None:
        results = [r for r in results if r.kernel.name == b.options.kernel]
        if not results:
            names = ", ".join(k.name for k in b.parsed.module.kernels)
            raise UsageError(f"{b.file}: no kernel named '{b.options.kernel}' (kernels: {names})")
    diags = [d for r in results for d in r.diagnostics]
    if any(d.is_error for d in diags):
        raise PipelineError(diags, "check")
    b.diagnostics += diags
    b.jobs = [Job(r.kernel.name, r, r) for r in results]
    return b


def optimize_pass(b: Build) -> Build:
    opt = b.options.optimizer()
    for j in b.jobs:
        t0 = time.perf_counter()
        res = opt.optimize(j.original, b.options.target)
        j.steps, j.opt_log = list(res.steps), list(res.log)
        searched = j.searched = getattr(res, "result", None)  # -O search: its SearchResult
        if searched is not None and searched.best is not searched.root:
            j.evaluation, j.confirmation = searched.best.evaluation, searched.confirmation
        if res.kernel is not j.original.kernel:
            nr = check_kernel(res.kernel)
            nr.diagnostics = [d.with_file(b.file) for d in nr.diagnostics]
            if not nr.ok:  # every step is re-checked, so this is an optimizer bug
                raise PipelineError([d for d in nr.diagnostics if d.is_error], "optimize")
            j.current = nr
        if opt.name != "-O0":
            b.note(f"{opt.name} {j.name}: " + (", ".join(str(s) for s in j.steps) or "no step applied")
                   + f" ({time.perf_counter() - t0:.1f} s)")
    return b


def lower_pass(b: Build) -> Build:
    from .lower import LowerError, lower_with_diagnostics, resolve_target

    tgt = resolve_target(b.options.target, b.options.cuda_arch)
    for j in b.jobs:
        try:
            j.module, diags = lower_with_diagnostics(j.current, tgt, file=b.file)
        except LowerError as e:
            raise PipelineError([e.diagnostic], "lower") from None
        b.diagnostics += diags
    return b


def build_pass(b: Build) -> Build:
    from .lower import LowerError, build_lowered, resolve_target

    tgt = resolve_target(b.options.target, b.options.cuda_arch)
    for j in b.jobs:
        t0 = time.perf_counter()
        try:
            j.built = build_lowered(j.current, j.module, tgt, file=b.file)
        except LowerError as e:
            raise PipelineError([e.diagnostic], "build") from None
        b.log(f"built {j.name} for {b.options.target} in {time.perf_counter() - t0:.1f} s")
    return b


def nvcc_pass(b: Build) -> Build:
    from .lower import NvccNotFound, nvcc_compile

    if b.options.target != "cuda":
        return b
    for j in b.jobs:
        try:
            ok, log = nvcc_compile(j.built.cuda_source or "", b.options.cuda_arch)
        except NvccNotFound:
            b.note("nvcc not found: the CUDA source was not compile-checked")
            return b
        j.nvcc_log = log
        if not ok:
            first = next((l for l in log.splitlines() if "error" in l), log.strip().splitlines()[0] if log.strip() else "")
            raise _fail("nvcc", "E052", f"nvcc -arch={b.options.cuda_arch} rejected the CUDA source of kernel "
                        f"'{j.name}': {first}", j.current.kernel.span, b.file, log.strip().splitlines()[:20])
    return b


def _wants_verify(b: Build, j: Job) -> bool:
    if b.options.verify is not None:
        return b.options.verify
    return b.kind == "py" or j.optimized


def verify_pass(b: Build) -> Build:
    """The kernel as built, run in a sandboxed worker, against the oracle. CUDA kernels are
    verified through their LLVM build of the same program (there is no GPU here); the note
    says so."""
    for j in b.jobs:
        if not _wants_verify(b, j):
            continue
        t0 = time.perf_counter()
        if b.kind == "py":
            _verify_against_module(b, j)
        elif not _reuse_verification(b, j):
            _verify_against_interpreter(b, j)
        b.log(f"verify {j.name}: {time.perf_counter() - t0:.1f} s")
    return b


def _reuse_verification(b: Build, j: Job) -> bool:
    """The optimizer's own verification of exactly this program against the original, on
    this target, on at least this pass's grid (the search verifies every candidate so before
    timing it): the winner is not built and verified a second time."""
    from .engine.evaluate import target_fingerprint
    from .lang.canonical import fingerprint

    e = j.evaluation
    if e is None or not e.ok or e.verify is None or e.fingerprint != fingerprint(j.current.kernel):
        return False
    rep = e.verify
    if e.target != target_fingerprint(_verify_target(b, quiet=True)) or not rep.equal:
        return False
    if not set(LEIR_VERIFY_DISTS) <= set(rep.dists) or not (set(LEIR_VERIFY_SEEDS) <= set(rep.seeds) or rep.seeds_skipped):
        return False
    j.verification = rep
    _verify_target(b)
    b.note(f"verified {j.name} on {rep.target or 'llvm'} by the search, in the winner's own build (seeds "
           f"{','.join(map(str, rep.seeds))}; {', '.join(rep.dists)}): max_abs_err={rep.max_abs_err:.3g}, "
           f"norm_rel_err={rep.norm_rel_err:.3g}")
    return True


def _verify_target(b: Build, quiet: bool = False) -> str:
    if b.options.target == "cuda":
        if not quiet:
            b.note("the verify pass runs the program compiled for llvm (this machine runs no cuda kernels)")
        return "llvm"
    return b.options.target


def _verify_against_interpreter(b: Build, j: Job) -> None:
    from .engine.evaluate import Evaluator

    with Evaluator(_verify_target(b), seeds=LEIR_VERIFY_SEEDS, dists=LEIR_VERIFY_DISTS, time=False,
                   timeout=b.options.timeout, threads=b.options.threads, prestart=False) as ev:
        e = ev.evaluate(j.text(), reference=j.text("original"))
    rep = j.verification = e.verify
    if not e.ok:
        why = "; ".join(rep.failures[:3]) if rep is not None and rep.failures else f"{e.error_kind}: {e.error}"
        raise _fail("verify", "E053", f"{b.options.optimizer().name} result of kernel '{j.name}' does not verify "
                    "against the original: " + why, j.current.kernel.span, b.file)
    b.note(f"verified {j.name} on {rep.target or 'llvm'}: max_abs_err={rep.max_abs_err:.3g}, "
           f"norm_rel_err={rep.norm_rel_err:.3g}")


def _verify_against_module(b: Build, j: Job) -> None:
    """The same door as ``.leir`` inputs: the Evaluator builds the kernel once in a
    sandboxed session, the oracle is the PyTorch module, run in a worker process of its own
    (its reference outputs per seed are computed once per build, for every job)."""
    from .engine.evaluate import Evaluator
    from .engine.oracles import TorchOracle, summary

    target = _verify_target(b)
    if b.model.oracle is None:
        b.model.oracle = TorchOracle.from_import(b.model.path, b.model.imported, timeout=b.options.timeout,
                                                 threads=b.options.threads)
    with Evaluator(target, seeds=PY_VERIFY_SEEDS, time=False, timeout=b.options.timeout, threads=b.options.threads,
                   poison_intermediates=True, prestart=False) as ev:
        e = ev.evaluate(j.text(), oracle=b.model.oracle)
    rep = j.verification = e.verify
    if e.error_kind == "oracle":
        raise _fail("verify", "E053", f"kernel '{j.name}' could not be verified: the PyTorch module failed ({e.error})",
                    j.current.kernel.span, b.file)
    if not e.ok:
        why = summary(rep) if rep is not None and rep.failures else f"{e.error_kind}: {e.error}"
        raise _fail("verify", "E053", f"kernel '{j.name}' ({b.options.optimizer().name}) does not match the PyTorch "
                    f"module: {why}", j.current.kernel.span, b.file)
    b.note(summary(rep))


def time_pass(b: Build) -> Build:
    """Same thread count on every side (benchmarking.md §4.2). For .py inputs the figure is
    KernelBench's (issue #35): the module ``Model(*inputs)`` against the ``ModelNew`` the
    build writes (the verified kernel loaded in this process, zero copy), and torch.compile
    on request, timed as modules on the same inputs in interleaved rounds (median, spread,
    load average; :func:`leirc.frontend.bench.time_modules`), next to KernelBench's own
    correctness check; the kernel alone (pre-made inputs and outputs, in a sandboxed
    worker) is kept as ``leirc_kernel``, labelled kernel-only. For .leir inputs there is no
    module: the kernel-only figure is ``leirc``."""
    if not b.options.time:
        return b
    if b.options.target == "cuda":
        b.note(f"timing skipped: this machine cannot run {b.options.target} kernels")
        return b
    from .lower.device import time_kernel
    from .measure import busy_warning, spread_of

    for j in b.jobs:
        if b.kind == "py":
            _time_model(b, j)
            continue
        p = j.confirmation
        if p is not None:
            # -O search already timed the winner against the input, interleaved: one
            # measurement, not a third build timed on other inputs
            _record(j, "input", p.a_ms, None)
            _record(j, "leirc", p.b_ms, None)
            b.note(f"time {j.name} ({b.options.threads} threads, kernel only, the search's interleaved "
                   f"confirmation, {p.rounds} rounds): input {p.a_ms:.4g} ms, leirc {p.b_ms:.4g} ms, "
                   f"x{p.speedup:.3g} +-{100 * p.spread:.2g}%")
        else:
            from .interp import random_inputs

            feeds = [random_inputs(j.current.kernel, s, "uniform") for s in TIMING_SEEDS]
            tr = time_kernel(j.text(), feeds, target=b.options.target, threads=b.options.threads,
                             timeout=b.options.timeout)
            _record(j, "leirc", tr.median_ms if tr.ok else None, None if tr.ok else f"{tr.error_kind}: {tr.error}")
            if "leirc" in j.timing:
                _, spread = spread_of(tr.runs)
                b.note(f"time {j.name} ({b.options.threads} threads, kernel only): leirc {j.timing['leirc']:.4g} ms "
                       f"+-{100 * spread:.2g}% (median of {len(tr.runs)}, min {tr.min_ms:.4g}, max {tr.max_ms:.4g})")
        warn = busy_warning()
        if warn:
            b.note(f"time {j.name}: {warn}")
    return b


def _time_model(b: Build, j: Job) -> None:
    from .frontend import bench, load_model
    from .frontend.verify import leir_inputs
    from .frontend.wrapper import modelnew_in_memory
    from .lower.device import Library, time_kernel, tvm_threads

    threads = b.options.threads
    pristine = load_model(b.model.path)
    sets = [pristine.get_inputs(s) for s in TIMING_SEEDS]
    feeds = [leir_inputs(j.current.kernel, s, b.model.imported.weights) for s in sets]
    tr = time_kernel(j.text(), feeds, target="llvm", threads=threads, timeout=b.options.timeout,
                     warmup=bench.WARMUP, repeat=bench.REPEAT, min_repeat_ms=bench.MIN_REPEAT_MS)
    _record(j, "leirc_kernel", tr.median_ms if tr.ok else None, None if tr.ok else f"{tr.error_kind}: {tr.error}")
    kernel_only = (f"kernel only (pre-made inputs and outputs, worker): {j.timing['leirc_kernel']:.3f} ms"
                   if "leirc_kernel" in j.timing else "kernel only: failed")
    v = j.verification
    sides = {"eager": pristine.model}
    new = None
    if v is not None and bool(getattr(v, "equal", False)) and j.built is not None:
        # ModelNew runs the kernel in this process, as the generated wrapper does: only a
        # verified kernel gets there
        tvm_threads(threads)
        new = sides["leirc"] = modelnew_in_memory(load_model(b.model.path).model, Library.from_built(j.built),
                                                  b.model.imported.meta)
    else:
        b.note(f"time {j.name}: ModelNew not timed (the kernel was not verified, and ModelNew would run it in "
               "this process); eager alone")
    if b.options.torch_compile:
        import torch

        bench.private_inductor_cache()
        fn = torch.compile(load_model(b.model.path).model)
        try:
            with torch.no_grad():
                fn(*sets[0])  # compiles: not part of the timing
            sides["compile"] = fn
        except Exception as e:  # noqa: BLE001 - inductor may be unavailable (no compiler, ...)
            msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
            _record(j, "compile", None, f"torch.compile failed: {type(e).__name__}: {msg[:200]}")
    mt = bench.time_modules(sides, sets, threads=threads, pause_ms=bench.PAUSE_MS)
    mt.threads_tvm = tvm_threads() if new is not None else None
    if not mt.ok:
        for k in sides:
            _record(j, k, None, mt.error)
        b.note(f"time {j.name}: module timing failed: {mt.error}; {kernel_only}")
        return
    for k, st in mt.sides.items():
        _record(j, k, st.median_ms, None)
    label = {"eager": "eager Model", "leirc": "leirc ModelNew", "compile": "torch.compile"}
    parts = [f"{label[k]} {st.median_ms:.3f} ms ±{100 * st.spread / 2:.1f}%" for k, st in mt.sides.items()]
    ratio = mt.speedup("eager", "leirc")
    tvm = f"/{mt.threads_tvm} TVM" if mt.threads_tvm is not None else ""
    b.note(f"time {j.name} (module vs module as KernelBench times it: {mt.threads_torch} torch{tvm} threads, "
           f"{mt.rounds} interleaved rounds, median ± half the interquartile range): " + ", ".join(parts)
           + (f"; {ratio:.3g}x eager" if ratio else "") + f"; {kernel_only}")
    if new is not None:
        kb = bench.kb_correctness(pristine.model, new, pristine.get_inputs)
        b.note(f"KernelBench check {j.name}: {kb['passed']}/{kb['trials']} seeded inputs "
               f"allclose(atol=rtol={kb['tol']:g})"
               f", max |diff| {kb['max_abs_diff']:.3g}" + (f" ({kb['error']})" if kb["error"] else ""))
    if mt.warning:
        b.note(f"warning: {mt.warning}")


def _record(j: Job, what: str, ms: Optional[float], err: Optional[str]) -> None:
    if ms is not None:
        j.timing[what] = ms
    elif err:
        j.timing_errors[what] = err


#: the pipeline, in order
PASSES: list[tuple[str, Callable[[Build], Build]]] = [
    ("load", load_pass),
    ("check", check_pass),
    ("optimize", optimize_pass),
    ("lower", lower_pass),
    ("build", build_pass),
    ("nvcc", nvcc_pass),
    ("verify", verify_pass),
    ("time", time_pass),
]

PASS_NAMES = [n for n, _ in PASSES]
#: older names of passes, still accepted by ``--print-after``
PASS_ALIASES = {"parse": "load"}


def render_after(name: str, b: Build) -> str:
    """The program as it stands after pass ``name``."""
    if name in ("load", "check"):
        mod = b.parsed.module
        if name == "check" and b.options.kernel is not None:
            mod = A.Module(tuple(k for k in mod.kernels if k.name == b.options.kernel))
        return print_module(mod, PRETTY)
    if name == "optimize":
        return print_module(A.Module(tuple(j.current.kernel for j in b.jobs)), PRETTY)
    if name == "lower":
        return "\n".join(j.module.script() for j in b.jobs if j.module is not None)
    if name == "build":
        parts = []
        for j in b.jobs:
            if j.built is None:
                continue
            if j.built.cuda_source is not None:
                parts.append(j.built.cuda_source)
            else:
                parts.append(f"// kernel {j.name}: built for {j.built.target} (function '{j.built.symbol}')")
        return "\n".join(parts)
    if name == "nvcc":
        return "\n".join(f"// nvcc {j.name}: {'ok' if not (j.nvcc_log or '').strip() else j.nvcc_log}"
                         for j in b.jobs if j.nvcc_log is not None)
    if name == "verify":
        lines = []
        for j in b.jobs:
            v = j.verification
            if v is None:
                lines.append(f"// verify {j.name}: not run")
            elif hasattr(v, "equal"):
                lines.append(f"// verify {j.name}: equal={v.equal} bitwise={v.bitwise} max_abs_err={v.max_abs_err:.3g}")
            else:
                lines.append(f"// verify {j.name}: {v.summary()}")
        return "\n".join(lines)
    if name == "time":
        return "\n".join(f"// time {j.name}: " + ", ".join(f"{k}={v:.4g} ms" for k, v in j.timing.items())
                         for j in b.jobs)
    return ""


def run_pipeline(b: Build, *, until: Optional[str] = None, print_after=(), out=None,
                 on_pass: Optional[Callable[[str, Build], None]] = None,
                 after_pass: Optional[Callable[[str, Build], None]] = None) -> Build:
    """Run the passes in order (up to and including ``until``). ``on_pass(name, build)`` is
    called as each pass starts and ``after_pass(name, build)`` when it is done (a client's
    progress display)."""
    out = out or sys.stdout
    until = PASS_ALIASES.get(until, until)
    for name, fn in PASSES:
        if on_pass is not None:
            on_pass(name, b)
        b = fn(b)
        if after_pass is not None:
            after_pass(name, b)
        for asked in print_after:
            if PASS_ALIASES.get(asked, asked) == name:
                print(f"// ===== after {asked} =====", file=out)
                print(render_after(name, b), file=out)
        if name == until:
            break
    return b


def verify_summary(v) -> str:
    """One line about a verification report (either oracle)."""
    from .engine.oracles import summary

    return summary(v)


def model_report(b: Build) -> dict:
    """The JSON report of a ``.py`` build (what ``<stem>.report.json`` and the workload
    benchmark record): import, verification and timing side by side."""
    import numpy

    j = b.jobs[0] if b.jobs else None
    v = j.verification if j is not None else None
    eager, comp, mine = (j.timing.get(k) if j else None for k in ("eager", "compile", "leirc"))
    versions = {"numpy": numpy.__version__}
    try:
        from importlib.metadata import version

        versions["torch"] = version("torch")
        versions["tvm"] = version("apache-tvm")
    except Exception:  # noqa: BLE001 - versions are informational; a missing one is simply not reported
        versions.setdefault("torch", None)
    return {
        "model": os.path.abspath(b.model.path) if b.model else b.file,
        "imported": b.model is not None,
        "import_s": b.model.import_s if b.model else None,
        "optimizer": b.options.optimizer().name,
        "steps": [str(s) for s in j.steps] if j else [],
        "n_nests": len(j.current.kernel.body) if j else None,
        "built": bool(j and j.built is not None),
        "verified": None if v is None else bool(v.equal),
        "verify_summary": None if v is None else verify_summary(v),
        "verify_tolerance": None if v is None else v.tolerance,
        "eager_ms": eager, "compile_ms": comp, "leirc_ms": mine,
        # the kernel alone (pre-made inputs and outputs, in a worker), next to the module figures
        "leirc_kernel_ms": j.timing.get("leirc_kernel") if j else None,
        "speedup_eager": eager / mine if eager and mine else None,
        "speedup_compile": comp / mine if comp and mine else None,
        "timing_errors": dict(j.timing_errors) if j else {},
        "threads": b.options.threads,
        "target": b.options.target,
        "versions": versions,
    }


def new_build(path_or_text: str | bytes, *, file: Optional[str] = None, options: BuildOptions = BuildOptions(),
              log: Callable[[str], None] = lambda msg: None) -> Build:
    """A :class:`Build` for a file path (``.py`` = PyTorch model) or for LEIR text (``file`` names it)."""
    if file is None:
        assert isinstance(path_or_text, str)
        file = path_or_text
        kind = "py" if file.endswith(".py") else "leir"
        source = b"" if kind == "py" else open(file, "rb").read()
    else:
        kind, source = "leir", path_or_text
    return Build(source, file, options, log, kind)


__all__ = ["BuildOptions", "Build", "Job", "Optimizer", "Optimized", "O0", "O1", "OPTIMIZERS", "PASSES",
           "PASS_NAMES", "PASS_ALIASES", "PipelineError", "UsageError", "ModelImportError", "run_pipeline", "render_after", "new_build",
           "model_report", "verify_summary"]
