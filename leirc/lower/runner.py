"""Run and time LEIR kernels in a sandboxed worker subprocess (one-shot calls).

:func:`run_kernel` and :func:`time_kernel` are one-request
:class:`leirc.lower.session.KernelSession` calls: each starts a worker, builds, serves one
request and stops. To run a kernel many times (verification, search), open a session and
reuse it: it builds once. Failures are classified as in the session (see
:mod:`leirc.lower.session`): ``"crash"``, ``"timeout"``, ``"memory"``, ``"build"``,
``"runtime"``. ``timeout`` bounds the start-up plus build, and the run, separately.

Timing protocol (:func:`time_kernel`, see ``notes/benchmarking.md`` §4.2): the thread
count is fixed explicitly through ``TVM_NUM_THREADS`` in the worker's environment (default:
the caller's ``TVM_NUM_THREADS``, else TVM's default) and the count the TVM runtime
reports is recorded. Each input set gets its own fresh output buffers; ``warmup`` calls
(rotating through the sets) are followed by ``repeat`` measurements, each a
``perf_counter`` loop of ``number`` calls rotating through the sets, with ``number`` chosen
so that one measurement lasts at least ``min_repeat_ms``. The median is reported.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np


@dataclass
class RunResult:
    ok: bool
    outputs: Optional[dict] = None  # name -> np.ndarray
    inputs_after: Optional[dict] = None  # name -> np.ndarray, the inputs after the run
    error: Optional[str] = None
    error_kind: Optional[str] = None  # 'build' | 'crash' | 'timeout' | 'memory' | 'runtime'
    build_s: Optional[float] = None
    run_s: Optional[float] = None
    threads: Optional[int] = None
    diagnostics: list = field(default_factory=list)  # lowering warnings, as JSON dicts


@dataclass
class TimingResult:
    ok: bool
    median_ms: Optional[float] = None
    min_ms: Optional[float] = None
    max_ms: Optional[float] = None
    std_ms: Optional[float] = None
    runs: list = field(default_factory=list)  # ms per measurement
    threads: Optional[int] = None
    target: str = "llvm"
    error: Optional[str] = None
    error_kind: Optional[str] = None
    number: Optional[int] = None  # calls per measurement
    build_s: Optional[float] = None


def run_kernel(source: str, inputs: dict, outputs: dict, *, kernel: Optional[str] = None, target="llvm",
               threads: Optional[int] = None, timeout: float = 120.0, memory_limit_mb: int = 8192,
               file: str = "<input>", cuda_arch: str = "sm_90") -> RunResult:
    """Parse, check, build and run ``source`` once in a worker process.

    ``outputs`` are the initial output arrays (copied to the device before the run).
    Returns the outputs and the inputs as they are after the run."""
    from .session import KernelSession

    with KernelSession(source, kernel=kernel, target=target, threads=threads, timeout=timeout,
                       memory_limit_mb=memory_limit_mb, file=file, cuda_arch=cuda_arch) as s:
        return s.run(inputs, outputs)


def time_kernel(source: str, input_sets: list, *, kernel: Optional[str] = None, target="llvm",
                threads: Optional[int] = None, warmup: int = 3, repeat: int = 10, min_repeat_ms: float = 50.0,
                timeout: float = 300.0, memory_limit_mb: int = 8192, file: str = "<input>",
                cuda_arch: str = "sm_90") -> TimingResult:
    """Time ``source`` in a worker: median of ``repeat`` measurements over rotating input sets."""
    from .session import KernelSession

    if not input_sets:
        raise ValueError("time_kernel needs at least one input set")
    if threads is None and os.environ.get("TVM_NUM_THREADS"):
        threads = int(os.environ["TVM_NUM_THREADS"])
    with KernelSession(source, kernel=kernel, target=target, threads=threads, timeout=timeout,
                       memory_limit_mb=memory_limit_mb, file=file, cuda_arch=cuda_arch) as s:
        return s.time(list(input_sets), warmup=warmup, repeat=repeat, min_repeat_ms=min_repeat_ms)


def make_inputs(kernel, seed: int = 0, dist: str = "uniform") -> dict:
    """Random inputs for a kernel (``leirc.lang.ast.Kernel``): floats uniform in [0, 1)
    (``dist="normal"``: standard normal); integer tensors that are used as subscripts get
    values valid for every dimension they index, other integers 0..9; bools fair coins."""
    from ..lang import ast as A

    rng = np.random.default_rng(seed)
    limits: dict = {}
    for n in A.walk(kernel):
        if isinstance(n, A.Access):
            p = kernel.param(n.name)
            shape = p.shape if p is not None else None
            for k, idx in enumerate(n.indices):
                if isinstance(idx, A.Access) and shape is not None and k < len(shape):
                    limits[idx.name] = min(limits.get(idx.name, shape[k]), shape[k])
    out = {}
    for p in kernel.inputs:
        shape = tuple(p.shape)
        if p.dtype in A.FLOAT_DTYPES:
            x = rng.standard_normal(shape) if dist == "normal" else rng.random(shape)
            if p.dtype == "bf16":
                import ml_dtypes

                out[p.name] = np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16)
            else:
                out[p.name] = np.asarray(x).astype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[p.dtype])
        elif p.dtype == "bool":
            out[p.name] = rng.random(shape) < 0.5
        else:
            hi = limits.get(p.name, 10)
            out[p.name] = rng.integers(0, max(hi, 1), size=shape).astype(_INT_NP[p.dtype])
    return out


_INT_NP = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
           "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}


def zero_outputs(kernel) -> dict:
    from .worker import np_dtype

    return {p.name: np.zeros(tuple(p.shape), np_dtype(p.dtype)) for p in kernel.outputs}


#: targets whose kernels this package can run, and the TVM device that runs each
RUNNABLE_TARGETS = {"llvm": "cpu", "cuda": "cuda"}


def device_available(target: str) -> tuple[bool, str]:
    """(whether kernels built for ``target`` can run on this machine, why not). Asks TVM
    whether device 0 of the target's kind exists, so a command can refuse a CUDA run before
    it builds anything instead of reporting the missing GPU as a numerical mismatch."""
    kind = str(target).split()[0]
    if kind == "llvm":
        return True, ""
    if kind not in RUNNABLE_TARGETS:
        return False, f"target '{kind}' cannot run kernels (targets that run: {', '.join(RUNNABLE_TARGETS)})"
    from ._tvm import tvm

    try:
        exists = bool(getattr(tvm(), RUNNABLE_TARGETS[kind])(0).exist)
    except Exception as e:  # noqa: BLE001 - a TVM built without CUDA raises instead of answering False
        return False, f"TVM cannot open a {kind} device: {type(e).__name__}: {e}"
    return (True, "") if exists else (False, f"no {kind} device on this machine (TVM sees no {kind}:0)")


class Library:
    """A kernel library that ``leirc build`` wrote (``export_library``), loaded **in this
    process** (the user's own trusted kernel, as the ``ModelNew`` wrapper runs it): NumPy
    arrays in, NumPy outputs out. ``kernel`` is the checked kernel's AST (parameter names,
    dtypes and shapes; the LEIR text beside the library gives it)."""

    def __init__(self, path: str, kernel, target: str = "llvm"):
        from ._tvm import tvm
        from .tir import symbol_name

        self.path = path
        self.kernel = kernel
        self.target = target
        self._tvm = tvm()
        self.module = self._tvm.runtime.load_module(str(path))
        self.symbol = symbol_name(kernel.name)

    def run(self, inputs: dict, outputs: Optional[dict] = None) -> dict:
        from .worker import np_dtype

        tvm = self._tvm
        dev = tvm.cuda(0) if self.target == "cuda" else tvm.cpu(0)
        args = [tvm.runtime.tensor(np.asarray(inputs[p.name], order="C"), dev) for p in self.kernel.inputs]
        outs = []
        for p in self.kernel.outputs:
            init = outputs.get(p.name) if outputs else None
            if init is None:
                init = np.zeros(tuple(p.shape), np_dtype(p.dtype))
            outs.append(tvm.runtime.tensor(np.asarray(init, order="C"), dev))
        self.module[self.symbol](*args, *outs)
        return {p.name: t.numpy() for p, t in zip(self.kernel.outputs, outs)}


def load_library(path: str, leir_text: str, *, kernel: Optional[str] = None, target: str = "llvm") -> Library:
    """The library at ``path`` built from ``leir_text`` (whose kernel ``kernel``, or only
    kernel, gives the signature)."""
    from ..lang.load import load_kernel

    return Library(path, load_kernel(leir_text, kernel=kernel).kernel, target)
