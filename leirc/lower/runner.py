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

In-process calls of a built library (:class:`Library`, what ``leirc build`` users and the
generated ``ModelNew`` load): arrays are passed as DLPack views, nothing is copied for an
aligned C-contiguous array of the declared dtype, outputs are written in place;
:class:`TorchCall` is the same for torch tensors and a module's parameters (bound once).
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


def target_kind(target) -> str:
    """``"llvm"`` or ``"cuda"`` from any spelling of a target: a name (``"llvm"``,
    ``"cuda -arch=sm_90"``), a TVM target dict, or an object with a ``kind``
    (:class:`leirc.target.Target`, a TVM target)."""
    if target is None:
        return "llvm"
    if isinstance(target, dict):
        kind = target.get("kind", "llvm")
    elif isinstance(target, str):
        kind = target
    else:
        kind = getattr(target, "kind", "llvm")
        kind = getattr(kind, "name", kind)
    return str(kind).split()[0] or "llvm"


class Library:
    """A kernel library that ``leirc build`` wrote (``export_library``), loaded **in this
    process** (the user's own trusted kernel, as the ``ModelNew`` wrapper runs it).
    ``kernel`` is the checked kernel's AST (parameter names, dtypes and shapes; the LEIR text
    beside the library gives it). Loaded once; the kernel's function is looked up once.

    **Zero copy.** Arrays reach the kernel as DLPack views (``tvm.runtime.from_dlpack``) of
    the caller's own storage: a C-contiguous array of the declared dtype is never copied
    (anything else is converted once, by NumPy or torch, before the call). Outputs are
    written in place. A fresh output is allocated *uninitialized* (``np.empty``): a checked
    LEIR kernel writes every output element (E019/E032, and verification runs it on
    poisoned outputs) and never reads one before writing it (E018/E046; a reduction starts
    from its identity inside the kernel), so zeroing would be wasted memory traffic.
    """

    def __init__(self, path: Optional[str], kernel, target: str = "llvm", *, module=None):
        from ._tvm import tvm
        from .tir import symbol_name

        self.path = path
        self.kernel = kernel
        self.target = target_kind(target)
        self._tvm = tvm()
        self.module = module if module is not None else self._tvm.runtime.load_module(str(path))
        self.symbol = symbol_name(kernel.name)
        self.function = self.module[self.symbol]
        self.device = self._tvm.cuda(0) if self.target == "cuda" else self._tvm.cpu(0)
        self._from_dlpack = self._tvm.runtime.from_dlpack

    @classmethod
    def from_built(cls, built) -> "Library":
        """The same calls on a kernel built in this process (:func:`leirc.lower.build`)."""
        return cls(None, built.signature, target_kind(built.target), module=built.jit())

    def view(self, array):
        """A DLPack view of ``array`` (NumPy, torch, or anything with ``__dlpack__``) for
        the kernel: the same memory, no copy. A read-only NumPy array (DLPack before 1.0
        cannot say read-only) is viewed through a writable alias of the same memory: kernel
        inputs are read-only (E020), so the kernel never writes through it."""
        try:
            return self._from_dlpack(array)
        except BufferError:
            if isinstance(array, np.ndarray) and not array.flags.writeable:
                return self._from_dlpack(_writable_alias(array))
            raise

    def __call__(self, *arrays) -> None:
        """Call the kernel on ``arrays`` (inputs then outputs, in the kernel's parameter
        order), each a contiguous array of the declared dtype or a TVM tensor; the outputs
        are written in place."""
        self.function(*[a if isinstance(a, self._tvm.runtime.Tensor) else self.view(a) for a in arrays])

    def run(self, inputs: dict, outputs: Optional[dict] = None) -> dict:
        """NumPy arrays in (by name), NumPy outputs out. An input that is C-contiguous with
        the declared dtype is read in place; ``outputs[name]``, when given, is the initial
        value, and is itself written and returned when it is C-contiguous, writable and of
        the declared dtype (else a converted copy is); missing outputs are allocated
        uninitialized (see the class docstring)."""
        from .worker import np_dtype

        args = []
        for p in self.kernel.inputs:
            if p.name not in inputs:
                raise KeyError(f"kernel '{self.kernel.name}' needs input '{p.name}'")
            args.append(self.view(_c_array(inputs[p.name], np_dtype(p.dtype))))
        res, back = {}, []
        for p in self.kernel.outputs:
            dt = np.dtype(np_dtype(p.dtype))
            init = outputs.get(p.name) if outputs else None
            mine = isinstance(init, np.ndarray) and init.flags.writeable
            if init is None:
                y = _aligned_empty(tuple(p.shape), dt)
            elif mine and _usable(init, dt):
                y = init
            else:  # one aligned copy of the initial value; a writable array gets the result back
                a = np.asarray(init)
                y = _aligned_empty(a.shape, dt)
                np.copyto(y, a, casting="unsafe")
                if mine:
                    back.append((p.name, init, y))
            res[p.name] = y
            args.append(self.view(y))
        self.function(*args)
        for name, dst, src in back:
            np.copyto(dst, src, casting="unsafe")
            res[name] = dst
        return res


#: TVM's kernels assume their buffers start at this alignment (``from_dlpack`` checks it)
ALIGNMENT = 64


def _aligned_empty(shape, dtype) -> np.ndarray:
    """``np.empty`` at :data:`ALIGNMENT` (NumPy itself only promises 16 bytes)."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    raw = np.empty(n + ALIGNMENT, np.uint8)
    off = (-raw.ctypes.data) % ALIGNMENT
    return raw[off:off + n].view(dt).reshape(shape)


def _usable(a: np.ndarray, dtype) -> bool:
    return a.dtype == dtype and a.flags.c_contiguous and a.ctypes.data % ALIGNMENT == 0


def _c_array(x, dtype) -> np.ndarray:
    """``x`` itself when it is an aligned C-contiguous array of ``dtype`` (no copy), else
    one aligned copy."""
    dt = np.dtype(dtype)
    if isinstance(x, np.ndarray) and _usable(x, dt):
        return x
    a = np.asarray(x)
    y = _aligned_empty(a.shape, dt)
    np.copyto(y, a, casting="unsafe")
    return y


class _ArrayAlias:
    __slots__ = ("__array_interface__", "base")

    def __init__(self, a: np.ndarray):
        self.base = a  # keeps the memory alive as long as the alias
        self.__array_interface__ = dict(a.__array_interface__, data=(a.ctypes.data, False))


def _writable_alias(a: np.ndarray) -> np.ndarray:
    return np.asarray(_ArrayAlias(a))


#: LEIR dtypes -> torch dtype attribute names
_TORCH_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "bool": "bool",
                 "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
                 "u16": "uint16", "u32": "uint32", "u64": "uint64"}


class TorchCall:
    """The zero-copy forward of a ``ModelNew``: a :class:`Library` called on torch tensors.

    ``runtime``: the kernel inputs fed by forward's tensor arguments, in order; ``params``:
    kernel input name -> qualified name of the module's parameter or buffer that feeds it.
    Each call passes the runtime tensors as DLPack views (a tensor that is not contiguous,
    has another dtype or sits on another device is converted once, ``.contiguous()``/
    ``.to()``, as KernelBench's inputs never need), passes the parameters' views bound
    earlier, allocates every output with ``torch.empty`` (see :class:`Library` for why not
    zeros), lets the kernel write them in place and returns them.

    Parameters are bound once: the view of a parameter is kept while the module still holds
    the same tensor object on the same storage; in-place updates (``load_state_dict``, an optimizer step) are
    seen through the view with no rebinding. A parameter that needed converting is
    converted again only when its ``_version`` changes. ``binds`` counts the (re)bindings
    and ``last_args`` keeps the argument views of the last call (tests check the pointers).
    """

    def __init__(self, library: Library, runtime: list, params: dict):
        import torch

        self._torch = torch
        self.library = library
        k = library.kernel
        names = [p.name for p in k.inputs]
        unknown = [n for n in list(runtime) + list(params) if n not in names]
        if unknown:
            raise ValueError(f"kernel '{k.name}' has no input named {', '.join(unknown)}")
        self.runtime = list(runtime)
        self.params = dict(params)
        self._param_path = {n: tuple(q.split(".")) for n, q in self.params.items()}
        self._slots = [("rt", self.runtime.index(p.name)) if p.name in self.runtime else ("param", p.name)
                       for p in k.inputs]
        missing = [p.name for p in k.inputs if p.name not in self.runtime and p.name not in self.params]
        if missing:
            raise ValueError(f"kernel '{k.name}' input(s) {', '.join(missing)} are fed by neither forward "
                             "nor a parameter")
        self._in_dtypes = {p.name: getattr(torch, _TORCH_DTYPES[p.dtype]) for p in k.inputs}
        self._rt_dtypes = [self._in_dtypes[n] for n in self.runtime]
        self._outs = [(tuple(p.shape), getattr(torch, _TORCH_DTYPES[p.dtype])) for p in k.outputs]
        self._cuda = library.target == "cuda"
        self._device = torch.device("cuda", 0) if self._cuda else torch.device("cpu")
        self._bound: dict = {}  # input name -> (tensor, version, view)
        self.binds = 0
        self.last_args: list = []

    def _tensor(self, t, dtype):
        """``t`` as the kernel wants it: the same tensor when it already is (the common case)."""
        if t.dtype is not dtype or (t.is_cpu if self._cuda else not t.is_cpu):
            t = t.to(device=self._device, dtype=dtype)
        if not t.is_contiguous():
            t = t.contiguous()
        elif t.data_ptr() % ALIGNMENT:  # a slice that starts mid-allocation
            t = t.clone()
        return t.detach() if t.requires_grad else t

    def param_view(self, root, name: str):
        obj = root
        for part in self._param_path[name]:
            obj = _member(obj, part)
        hit = self._bound.get(name)
        if (hit is not None and hit[0] is obj and hit[1] == obj.data_ptr()
                and (hit[2] is None or hit[2] == obj._version)):
            return hit[3]
        t = self._tensor(obj, self._in_dtypes[name])
        # a view of the module's own storage follows in-place updates; a converted copy must
        # be redone when the parameter changes (its version is the key then). The pointer
        # catches ``param.data = ...`` (Module.to does that), which keeps the object.
        version = None if t.data_ptr() == obj.data_ptr() else obj._version
        view = self.library.view(t)
        self._bound[name] = (obj, obj.data_ptr(), version, view, t)  # t keeps a converted copy alive
        self.binds += 1
        return view

    def arguments(self, root, tensors) -> tuple:
        """``(args, outputs)``: the kernel's arguments for forward's tensor arguments
        ``tensors`` (``root`` holds the parameters), DLPack views in the kernel's parameter
        order, the last ones views of ``outputs``, fresh ``torch.empty`` tensors."""
        torch = self._torch
        if len(tensors) < len(self.runtime):
            raise TypeError(f"forward() got {len(tensors)} tensor argument(s), the kernel needs {len(self.runtime)}")
        view = self.library.view
        args = []
        for kind, key in self._slots:
            if kind == "rt":
                args.append(view(self._tensor(tensors[key], self._rt_dtypes[key])))
            else:
                args.append(self.param_view(root, key))
        outs = [torch.empty(shape, dtype=dt, device=self._device) for shape, dt in self._outs]
        args += [view(y) for y in outs]
        return args, outs

    def __call__(self, root, tensors):
        """Run on forward's tensor arguments ``tensors``; ``root`` holds the parameters.
        Returns the output tensors (a list, in the kernel's output order)."""
        args, outs = self.arguments(root, tensors)
        self.last_args = args
        self.library.function(*args)
        return outs


def _member(obj, name: str):
    """``getattr(obj, name)``, straight from an ``nn.Module``'s own tables when it is a
    parameter, buffer or submodule: ``Module.__getattr__`` costs microseconds per step, paid
    on every forward."""
    d = getattr(obj, "__dict__", None)
    if d is not None:
        for table in ("_parameters", "_buffers", "_modules"):
            t = d.get(table)
            if t is not None and name in t:
                return t[name]
    return getattr(obj, name)


def tvm_threads(n: Optional[int] = None) -> int:
    """The TVM runtime's thread count in this process. With ``n``: ask for ``n`` threads
    first through ``TVM_NUM_THREADS``, which the runtime reads once, when its thread pool
    starts; a process whose pool already started keeps its count (the return value shows
    the count in force)."""
    if n is not None:
        os.environ["TVM_NUM_THREADS"] = str(int(n))
    from ._tvm import tvm

    tvm()
    import tvm_ffi

    return int(tvm_ffi.get_global_func("runtime.NumThreads")())


def load_library(path: str, leir_text: str, *, kernel: Optional[str] = None, target: str = "llvm") -> Library:
    """The library at ``path`` built from ``leir_text`` (whose kernel ``kernel``, or only
    kernel, gives the signature)."""
    from ..lang.load import load_kernel

    return Library(path, load_kernel(leir_text, kernel=kernel).kernel, target)
