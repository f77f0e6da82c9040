"""Lowering of checked LEIR kernels to TVM, building, and sandboxed execution.

This package is the only part of leirc that imports TVM (lazily, see :mod:`._tvm`).

* :func:`lower` -- a checked kernel to a ``tvm.IRModule`` holding one tirx PrimFunc
  (built with the IR builder; design and semantics in :mod:`leirc.lower.tir`).
* :func:`build` -- lower and compile for ``llvm`` (CPU) or ``cuda`` (CUDA C source;
  no GPU needed to build), returning a :class:`Built`; ``poison_intermediates=True``
  (verification) fills intermediates with the interpreter's poison at kernel start.
* The compiled code follows the interpreter on IEEE and integer corner cases (NaN in
  ``max``/``min`` and comparisons, unsigned wrap-around); see :mod:`leirc.lower.tir`.
* :func:`nvcc_compile` -- compile-check CUDA source with ``nvcc -arch=sm_90 -ptx``.
* :mod:`leirc.lower.runner` -- run or time a kernel in a worker subprocess.

Diagnostics of this package (codes in :mod:`leirc.lang.diagnostics`):

* E050 -- lowering failed (:class:`LoweringError`); the span is the LEIR expression,
  statement or loop being lowered when TVM objected;
* E051 -- TVM failed to compile the lowered function (:class:`BuildError`); the span is
  the first top-level nest that fails to build on its own;
* E052 -- nvcc rejected the generated CUDA source (reported by the ``leirc build``
  pipeline, :mod:`leirc.lower.pipeline`);
* W050 -- a shared/local tensor is kept in global memory on CUDA;
* W051 -- a CUDA kernel runs on a single thread (cross-thread reduction or block-level
  dependence).

Errors never surface as TVM tracebacks. Warnings are in :attr:`Built.diagnostics`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Any, Optional

from ..lang.checker import CheckResult
from ..lang.diagnostics import Diagnostic, error
from .tir import LowerFailure, tvm_message, is_gpu, lower_kernel, symbol_name, target_kind

__all__ = [
    "lower", "lower_with_diagnostics", "build", "build_lowered", "nvcc_compile", "Built", "LowerError", "LoweringError", "BuildError", "NvccNotFound",
    "resolve_target", "describe_target",
]


class LowerError(Exception):
    """A lowering or build failure, reported as a leirc diagnostic."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


class LoweringError(LowerError):
    """E050: the kernel could not be expressed in TVM TIR."""


class BuildError(LowerError):
    """E051: TVM failed to compile the lowered kernel (E052: nvcc rejected the CUDA source)."""


class NvccNotFound(RuntimeError):
    """No ``nvcc`` on PATH (nor in /usr/local/cuda/bin)."""


def _file_of(result: CheckResult, file: Optional[str]) -> str:
    if file:
        return file
    for d in result.diagnostics:
        return d.file
    return "<input>"


#: LLVM options for CPU builds. At -O3 LLVM fully unrolls vectorized loops with large
#: constant trip counts (the aggressive full-unroll threshold is 300): e.g. a 16x511
#: elementwise nest became 6,000 lines of straight-line vector code and took 7-10 s in the
#: backend. 150 removes those outliers (worst stdlib/compat build 10 s -> < 1 s) at no
#: measurable run-time cost on the stdlib kernels.
LLVM_CL_OPTS = ["-unroll-threshold-aggressive:int=150"]


def resolve_target(target="llvm", cuda_arch: str = "sm_90") -> dict:
    """A TVM target dict for a :class:`leirc.target.Target` (or its spec: ``"llvm"``, ``"cuda"``,
    ``"llvm -mcpu=NAME -mattr=..."``). ``llvm`` gets the CPU name (the host's, from LLVM, unless
    the target names one), an explicit ``mattr`` of the instruction-set features the OS grants
    (:meth:`Target.llvm_mattr`: a CPU name alone implies features a VM may mask, and the kernel
    then dies with SIGILL), the core count and :data:`LLVM_CL_OPTS`; ``cuda`` the arch. A TVM
    dict (no ``leirc_target`` key) is used as given."""
    from ..target import Target, target_of
    from ._tvm import tvm

    if isinstance(target, dict) and "leirc_target" not in target:
        return dict(target)
    t = Target.from_json(target) if isinstance(target, dict) else target_of(target)
    if t.kind == "llvm":
        out = {"kind": "llvm", "mcpu": t.cpu or tvm().target.codegen.llvm_get_system_cpu(),
               "cl-opt": list(LLVM_CL_OPTS)}
        mattr = t.llvm_mattr()
        if mattr:
            out["mattr"] = mattr
        if t.triple:
            out["mtriple"] = t.triple
        return out
    if t.kind == "cuda":
        # an explicit -arch in the spec wins over the build option's default
        return {"kind": "cuda", "arch": _arch(t.arch if t.arch and t.arch != "sm_90" else cuda_arch)}
    return {"kind": t.kind}


def describe_target(target="llvm") -> dict:
    """What ``leirc target`` prints: the target's facts (:meth:`Target.to_json`), the TVM
    target this lowering builds for it, LLVM's name for the CPU, the features that name
    implies and the OS does not grant (each would be a SIGILL), and LLVM's version."""
    from ..target import X86_FEATURES, target_of
    from ._tvm import tvm as _t

    tvm = _t()
    known = set(X86_FEATURES.values())
    t = target_of(target)
    d = t.to_json()
    tgt = resolve_target(t)
    d["tvm"] = tgt
    if t.kind == "llvm":
        cg = tvm.target.codegen
        d["llvm_cpu"] = tgt["mcpu"]
        d["llvm_version"] = int(cg.llvm_version_major())
        d["triple"] = t.triple or str(cg.llvm_get_system_triple())
        implied = set(cg.llvm_get_cpu_features(tvm.target.Target({"kind": "llvm", "mcpu": tgt["mcpu"]})))
        if t.features is not None:
            d["masked"] = sorted((implied & known) - set(t.features))
        else:
            d["masked"] = []
        final = set(cg.llvm_get_cpu_features(tvm.target.Target(tgt)))
        d["llvm_features"] = sorted(final & known)
    return d


def _arch(arch: str) -> str:
    arch = str(arch)
    return arch if arch.startswith("sm_") else f"sm_{arch}"


def lower(result: CheckResult, target: str | dict = "llvm", *, file: Optional[str] = None,
          poison_intermediates: bool = False):
    """Lower a checked kernel to a ``tvm.IRModule`` (one PrimFunc named after the kernel).
    ``poison_intermediates``: see :func:`build`."""
    mod, _ = _lower(result, target, file, poison_intermediates=poison_intermediates)
    return mod


def lower_with_diagnostics(result: CheckResult, target: str | dict = "llvm", *, file: Optional[str] = None,
                           poison_intermediates: bool = False):
    """(IRModule, lowering warnings such as W050/W051)."""
    mod, diags = _lower(result, target, file, poison_intermediates=poison_intermediates)
    return mod, [d.with_file(_file_of(result, file)) for d in diags]


def _lower(result: CheckResult, target, file, only=None, *, poison_intermediates: bool = False):
    if not result.ok:
        raise ValueError("cannot lower a kernel with check errors")
    try:
        return lower_kernel(result, target, only, poison_intermediates=poison_intermediates)
    except LowerFailure as e:
        d = error("E050", f"cannot lower kernel '{result.kernel.name}' to TVM TIR: {e.message}",
                  e.span or result.kernel.span).with_file(_file_of(result, file))
        raise LoweringError(d) from None


@dataclass
class Built:
    """A compiled kernel."""

    module: Any  # tvm Executable (``.jit()``, ``.export_library(path)``)
    tir_text: str  # TVMScript of the lowered PrimFunc (for humans)
    cuda_source: Optional[str]  # CUDA C source (cuda target), else None
    target: dict
    kernel: str = ""
    symbol: str = ""  # name of the function in the runtime module
    ir_module: Any = None  # the lowered tvm.IRModule
    diagnostics: list = field(default_factory=list)  # lowering warnings (W050, W051)
    signature: Any = None  # the leirc.lang.ast.Kernel (parameter names, dtypes, shapes)
    poison_intermediates: bool = False  # intermediates are poisoned at kernel start (see build)
    _rt: Any = field(default=None, repr=False)

    def jit(self):
        """The runtime module (cached); ``built.jit()[built.symbol](*tensors)``."""
        if self._rt is None:
            self._rt = self.module.jit()
        return self._rt

    def __call__(self, *args):
        return self.jit()[self.symbol](*args)

    def export_library(self, path: str) -> None:
        self.module.export_library(str(path))

    def run(self, inputs: dict, outputs: Optional[dict] = None) -> dict:
        """Run once **in this process** (trusted kernels, tests): NumPy arrays in, the
        outputs as NumPy arrays out. ``outputs`` gives initial output values (default
        zeros). Untrusted kernels belong in :func:`leirc.lower.runner.run_kernel`."""
        import numpy as np

        from ._tvm import tvm as _t
        from .worker import np_dtype

        tvm = _t()
        dev = tvm.cuda(0) if self.target.get("kind") == "cuda" else tvm.cpu(0)
        k = self.signature
        args = [tvm.runtime.tensor(np.asarray(inputs[p.name], order="C"), dev) for p in k.inputs]
        outs = []
        for p in k.outputs:
            init = outputs.get(p.name) if outputs else None
            if init is None:
                init = np.zeros(tuple(p.shape), np_dtype(p.dtype))
            outs.append(tvm.runtime.tensor(np.asarray(init, order="C"), dev))
        self(*args, *outs)
        return {p.name: t.numpy() for p, t in zip(k.outputs, outs)}


def build(result: CheckResult, target="llvm", *, cuda_arch: str = "sm_90", file: Optional[str] = None,
          poison_intermediates: bool = False) -> Built:
    """Lower and compile. ``target``: ``"llvm"``, ``"cuda"`` or a TVM target dict.

    ``poison_intermediates=True`` (verification builds) fills every intermediate tensor
    with the interpreter's poison (:func:`leirc.interp.dtypes.poison_value`: a NaN
    payload for floats, a sentinel for integers, False for bool) when the kernel starts,
    so a candidate that reads elements it never wrote computes detectably wrong outputs
    instead of reusing whatever the memory held. On CUDA this covers intermediates in
    global memory; shared/local ones (regions compacted per block/thread) are not filled.
    Costs one pass over the intermediates per call: off for timing."""
    tgt = resolve_target(target, cuda_arch)
    mod, diags = _lower(result, tgt, file, poison_intermediates=poison_intermediates)
    return build_lowered(result, mod, tgt, diagnostics=diags, file=file, poison_intermediates=poison_intermediates)


def build_lowered(result: CheckResult, mod, target: dict, *, diagnostics=(), file: Optional[str] = None,
                  poison_intermediates: bool = False) -> Built:
    """Compile an IRModule produced by :func:`lower` for ``result`` (``target``: a dict from
    :func:`resolve_target`; ``poison_intermediates``: as passed to :func:`lower`)."""
    from ._tvm import tvm as _t

    tvm = _t()
    tgt = dict(target)
    kind = tgt["kind"]
    func = mod[symbol_name(result.kernel.name)]
    try:
        ex = tvm.compile(mod, target=tgt)
    except Exception as e:  # noqa: BLE001 - TVM raises several error types
        msg = tvm_message(e)
        span = _attribute_build_failure(result, tgt, poison_intermediates) or result.kernel.span
        d = error("E051", f"TVM failed to build kernel '{result.kernel.name}' for {kind}: {msg}", span)
        raise BuildError(d.with_file(_file_of(result, file))) from None
    cuda_source = None
    if is_gpu(kind):
        imports = list(ex.mod.imports)
        if not imports:
            d = error("E051", f"kernel '{result.kernel.name}' produced no device code for {kind}", result.kernel.span)
            raise BuildError(d.with_file(_file_of(result, file)))
        cuda_source = imports[0].inspect_source("cuda")
    return Built(ex, func.script(), cuda_source, tgt, result.kernel.name, symbol_name(result.kernel.name), mod,
                 [d.with_file(_file_of(result, file)) for d in diagnostics], result.kernel,
                 bool(poison_intermediates))


def _attribute_build_failure(result: CheckResult, tgt: dict, poison_intermediates: bool = False):
    """Span of the first top-level item whose lowering alone fails to build (or None)."""
    from ._tvm import tvm as _t

    tvm = _t()
    body = result.kernel.body
    if len(body) <= 1:
        return body[0].span if body else None
    for k, item in enumerate(body):
        try:
            mod, _ = lower_kernel(result, tgt, only={k}, poison_intermediates=poison_intermediates)
            tvm.compile(mod, target=tgt)
        except Exception:  # noqa: BLE001
            return item.span
    return None


def nvcc_compile(cuda_source: str, arch: str = "sm_90", *, timeout: float = 300.0) -> tuple[bool, str]:
    """Compile CUDA source to PTX with ``nvcc -arch=<arch> -ptx``: (ok, compiler log).

    Raises :class:`NvccNotFound` when nvcc is not installed. Warning 177 (TVM's unused
    ``cse_v*`` temporaries) is suppressed."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        for cand in ("/usr/local/cuda/bin/nvcc",):
            if os.path.exists(cand):
                nvcc = cand
                break
    if nvcc is None:
        raise NvccNotFound("nvcc not found on PATH")
    with tempfile.TemporaryDirectory(prefix="leirc-nvcc-") as d:
        src = os.path.join(d, "kernel.cu")
        with open(src, "w", encoding="utf-8") as f:
            f.write(cuda_source)
        cmd = [nvcc, f"-arch={_arch(arch)}", "-ptx", "-diag-suppress", "177", src, "-o", os.path.join(d, "kernel.ptx")]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, f"nvcc timed out after {timeout:.0f} s"
        log = (p.stdout + p.stderr).replace(src, "kernel.cu")
        return p.returncode == 0, log
