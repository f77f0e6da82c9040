"""The ``leirc build`` pipeline: one readable list of named passes.

::

    PASSES = [("parse", ...), ("check", ...), ("lower", ...), ("build", ...), ("nvcc", ...)]

Each pass takes and returns a :class:`State`; a pass that finds errors raises
:class:`PipelineError` with the diagnostics. ``print_after`` prints the program after a
pass: the LEIR text after ``parse``/``check``, TVMScript (TIR) after ``lower``, the CUDA
source (or a summary for CPU targets) after ``build``, the nvcc log after ``nvcc``.
``nvcc`` runs for the cuda target only, and is skipped (with a note) when nvcc is not
installed.

Optimization levels: ``-O0`` is the direct lowering of :mod:`leirc.lower.tir`; ``-O1``
runs the heuristic strategy pipeline of :mod:`leirc.opt.o1` in the ``optimize`` pass (every
step legality-checked and re-checked, recorded as a trace) and the ``verify`` pass compares
the optimized program, compiled for the CPU, with the reference interpreter running the
original program.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..lang.checker import check_module
from ..lang.diagnostics import error
from ..lang.parser import ParseResult, parse
from ..lang.printer import PRETTY, print_module

OPT_LEVELS = (0, 1)


@dataclass
class State:
    source: str | bytes
    file: str = "<input>"
    target: str = "llvm"
    cuda_arch: str = "sm_90"
    kernel: Optional[str] = None  # build only this kernel
    opt_level: int = 0
    parsed: Optional[ParseResult] = None
    results: list = field(default_factory=list)  # CheckResult of the selected kernels
    modules: dict = field(default_factory=dict)  # kernel name -> tvm.IRModule
    built: dict = field(default_factory=dict)  # kernel name -> Built
    nvcc_logs: dict = field(default_factory=dict)  # kernel name -> nvcc log
    originals: dict = field(default_factory=dict)  # kernel name -> Kernel before optimization
    traces: dict = field(default_factory=dict)  # kernel name -> list[Step] applied by -O1
    verified: dict = field(default_factory=dict)  # kernel name -> VerifyReport
    diagnostics: list = field(default_factory=list)  # warnings gathered on the way
    notes: list = field(default_factory=list)  # informational lines (e.g. nvcc skipped)

    @property
    def text(self) -> Optional[str]:
        return self.parsed.source if self.parsed is not None else None


class UsageError(Exception):
    """A request the input cannot satisfy (e.g. ``--kernel`` names no kernel)."""


class PipelineError(Exception):
    def __init__(self, diagnostics: list, pass_name: str):
        super().__init__(f"{pass_name} failed")
        self.diagnostics = diagnostics
        self.pass_name = pass_name


def parse_pass(st: State) -> State:
    pr = parse(st.source, st.file)
    st.parsed = pr
    errs = [d for d in pr.diagnostics if d.is_error]
    if errs or pr.module is None:
        raise PipelineError(pr.diagnostics, "parse")
    st.diagnostics += pr.diagnostics
    return st


def check_pass(st: State) -> State:
    assert st.parsed is not None and st.parsed.module is not None
    results = check_module(st.parsed.module)
    for r in results:
        r.diagnostics = [d.with_file(st.file) for d in r.diagnostics]
    if st.kernel is not None:
        results = [r for r in results if r.kernel.name == st.kernel]
        if not results:
            names = ", ".join(k.name for k in st.parsed.module.kernels)
            raise UsageError(f"{st.file}: no kernel named '{st.kernel}' (kernels: {names})")
    diags = [d for r in results for d in r.diagnostics]
    if any(d.is_error for d in diags):
        raise PipelineError(diags, "check")
    st.diagnostics += diags
    st.results = results
    return st


def optimize_pass(st: State) -> State:
    """-O1: rewrite each kernel with the heuristic strategy pipeline (no-op at -O0)."""
    if st.opt_level < 1:
        return st
    from ..lang.checker import check_kernel
    from ..opt.o1 import optimize

    new_results = []
    for r in st.results:
        res = optimize(r.kernel, "cuda" if st.target == "cuda" else "llvm")
        st.originals[r.kernel.name] = r.kernel
        st.traces[r.kernel.name] = res.steps
        st.notes.append(f"-O1 {r.kernel.name}: " + (", ".join(str(s) for s in res.steps) or "no step applied"))
        nr = check_kernel(res.kernel)
        nr.diagnostics = [d.with_file(st.file) for d in nr.diagnostics]
        new_results.append(nr)
    st.results = new_results
    return st


def verify_pass(st: State) -> State:
    """-O1: the optimized program (compiled for the CPU) against the interpreter running
    the original program, on two seeds."""
    if st.opt_level < 1:
        return st
    from ..lang import ast as A
    from ..verify import verify

    for r in st.results:
        orig = st.originals[r.kernel.name]
        before = print_module(A.Module((orig,)), PRETTY)
        after = print_module(A.Module((r.kernel,)), PRETTY)
        rep = verify(after, before, seeds=(0, 1), dists=("uniform", "signed"), target="llvm")
        st.verified[r.kernel.name] = rep
        if not rep.equal:
            d = error("E053", f"-O1 result of kernel '{r.kernel.name}' does not verify against the original: "
                      + "; ".join(rep.failures[:3]), r.kernel.span).with_file(st.file)
            raise PipelineError([d], "verify")
        st.notes.append(f"verified {r.kernel.name}: max_abs_err={rep.max_abs_err:.3g}, norm_rel_err={rep.norm_rel_err:.3g}")
    return st


def lower_pass(st: State) -> State:
    from . import LowerError, lower_with_diagnostics, resolve_target

    tgt = resolve_target(st.target, st.cuda_arch)
    for r in st.results:
        try:
            mod, diags = lower_with_diagnostics(r, tgt, file=st.file)
        except LowerError as e:
            raise PipelineError([e.diagnostic], "lower") from None
        st.modules[r.kernel.name] = mod
        st.diagnostics += diags
    return st


def build_pass(st: State) -> State:
    from . import LowerError, build_lowered, resolve_target

    tgt = resolve_target(st.target, st.cuda_arch)
    for r in st.results:
        try:
            st.built[r.kernel.name] = build_lowered(r, st.modules[r.kernel.name], tgt, file=st.file)
        except LowerError as e:
            raise PipelineError([e.diagnostic], "build") from None
    return st


def nvcc_pass(st: State) -> State:
    from . import NvccNotFound, nvcc_compile

    if st.target != "cuda":
        return st
    for r in st.results:
        b = st.built[r.kernel.name]
        try:
            ok, log = nvcc_compile(b.cuda_source or "", st.cuda_arch)
        except NvccNotFound:
            st.notes.append("nvcc not found: the CUDA source was not compile-checked")
            return st
        st.nvcc_logs[r.kernel.name] = log
        if not ok:
            first = next((l for l in log.splitlines() if "error" in l), log.strip().splitlines()[0] if log.strip() else "")
            d = error("E052", f"nvcc -arch={st.cuda_arch} rejected the CUDA source of kernel '{r.kernel.name}': {first}",
                      r.kernel.span, notes=[l for l in log.strip().splitlines()[:20]]).with_file(st.file)
            raise PipelineError([d], "nvcc")
    return st


#: the pipeline, in order
PASSES: list[tuple[str, Callable[[State], State]]] = [
    ("parse", parse_pass),
    ("check", check_pass),
    ("optimize", optimize_pass),
    ("lower", lower_pass),
    ("build", build_pass),
    ("nvcc", nvcc_pass),
    ("verify", verify_pass),
]

PASS_NAMES = [n for n, _ in PASSES]


def render_after(name: str, st: State) -> str:
    """The program as it stands after pass ``name``."""
    if name == "optimize":
        from ..lang import ast as A

        return print_module(A.Module(tuple(r.kernel for r in st.results)), PRETTY)
    if name == "verify":
        return "\n".join(f"// verify {k}: equal={v.equal} bitwise={v.bitwise} max_abs_err={v.max_abs_err:.3g}"
                         for k, v in st.verified.items())
    if name in ("parse", "check"):
        mod = st.parsed.module
        if name == "check" and st.kernel is not None:
            from ..lang import ast as A

            mod = A.Module(tuple(k for k in mod.kernels if k.name == st.kernel))
        return print_module(mod, PRETTY)
    if name == "lower":
        return "\n".join(m.script() for m in st.modules.values())
    if name == "build":
        parts = []
        for k, b in st.built.items():
            if b.cuda_source is not None:
                parts.append(b.cuda_source)
            else:
                parts.append(f"// kernel {k}: built for {b.target} (function '{b.symbol}')")
        return "\n".join(parts)
    if name == "nvcc":
        return "\n".join(f"// nvcc {k}: {'ok' if not log.strip() else log}" for k, log in st.nvcc_logs.items())
    return ""


def run_pipeline(st: State, *, until: Optional[str] = None, print_after=(), out=None) -> State:
    """Run the passes in order (up to and including ``until``)."""
    out = out or sys.stdout
    for name, fn in PASSES:
        st = fn(st)
        if name in print_after:
            print(f"// ===== after {name} =====", file=out)
            print(render_after(name, st), file=out)
        if name == until:
            break
    return st
