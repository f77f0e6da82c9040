"""Run and time LEIR kernels in a sandboxed worker subprocess.

Each call starts ``python -m leirc.lower.worker DIR`` in a new session with a private
temporary directory. Arrays travel as ``.npz`` files written atomically; the source is
parsed, checked and built inside the worker, so nothing a kernel does (segfault, abort,
endless loop, runaway allocation) can take the caller down:

* exit by signal -> ``error_kind="crash"`` (``"memory"`` if the worker's stderr shows an
  allocation failure, or for SIGKILL we did not send: the kernel hit the OOM killer);
* still running after ``timeout`` s -> the whole process group is killed,
  ``error_kind="timeout"``;
* ``MemoryError`` / TVM allocation failures under the ``RLIMIT_AS`` limit
  (``memory_limit_mb``) -> ``"memory"``;
* parse/check/lowering/build errors -> ``"build"`` (rendered diagnostics);
* bad arrays or a TVM error while running -> ``"runtime"``.

The worker imports TVM without torch (about 1.5 s start-up plus the build).

Timing protocol (:func:`time_kernel`, see ``notes/benchmarking.md`` §4.2): the thread
count is fixed explicitly through ``TVM_NUM_THREADS`` in the worker's environment (default:
the caller's ``TVM_NUM_THREADS``, else TVM's default) and the count the TVM runtime
reports is recorded. Each input set gets its own fresh output buffers; ``warmup`` calls
(rotating through the sets) are followed by ``repeat`` measurements, each a
``perf_counter`` loop of ``number`` calls rotating through the sets, with ``number`` chosen
so that one measurement lasts at least ``min_repeat_ms``. The median is reported.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
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


def _save_npz(path: str, arrays: dict) -> None:
    tmp = path + ".tmp.npz"
    np.savez(tmp, **{k: np.asarray(v) for k, v in arrays.items()})
    os.replace(tmp, path)


def _load_npz(path: str) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _target_name(target) -> str:
    if isinstance(target, dict):
        return str(target.get("kind", "llvm"))
    return str(target).split()[0]


def _spawn(req: dict, sets: list, outputs: Optional[dict], *, threads, timeout, memory_limit_mb, env_extra=None):
    """Run the worker; (result dict | None, failure (error, kind) | None, tmpdir files dict)."""
    with tempfile.TemporaryDirectory(prefix="leirc-run-") as d:
        req = dict(req, n_sets=len(sets), memory_limit_mb=memory_limit_mb)
        for k, s in enumerate(sets):
            _save_npz(os.path.join(d, f"in_{k}.npz"), s)
        if outputs is not None:
            _save_npz(os.path.join(d, "out_init.npz"), outputs)
        with open(os.path.join(d, "request.json.tmp"), "w", encoding="utf-8") as f:
            json.dump(req, f)
        os.replace(os.path.join(d, "request.json.tmp"), os.path.join(d, "request.json"))
        env = dict(os.environ)
        if threads is not None:
            env["TVM_NUM_THREADS"] = str(int(threads))
        if env_extra:
            env.update(env_extra)
        err_path = os.path.join(d, "stderr.txt")
        with open(err_path, "wb") as errf:
            p = subprocess.Popen([sys.executable, "-m", "leirc.lower.worker", d], stdin=subprocess.DEVNULL,
                                 stdout=errf, stderr=errf, env=env, start_new_session=True)
            killed = False
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                killed = True
                _kill_group(p)
            except BaseException:  # e.g. KeyboardInterrupt: never leave the worker behind
                _kill_group(p)
                raise
        stderr = _tail(err_path)
        stage = _read_json(os.path.join(d, "stage.json")) or {}
        what = _what(stage)
        if killed:
            return None, (f"{what} did not finish within {timeout:g} s (worker killed)", "timeout"), {}
        res_path = os.path.join(d, "result.json")
        if p.returncode != 0 or not os.path.exists(res_path):
            return None, _classify_exit(p.returncode, stderr, what), {}
        with open(res_path, encoding="utf-8") as f:
            res = json.load(f)
        files = {}
        for name in ("outputs", "inputs_after"):
            path = os.path.join(d, f"{name}.npz")
            if os.path.exists(path):
                files[name] = _load_npz(path)
        return res, None, files


def _read_json(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _what(stage: dict) -> str:
    k = stage.get("kernel")
    name = f"kernel '{k}'" if k else "the kernel"
    if stage.get("stage") == "build":
        return f"building {name}"
    if stage.get("stage") == "run":
        return name
    return "the worker (before building)"


def _kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass


def _tail(path: str, n: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read()
        return data[-n:].decode("utf-8", "replace")
    except OSError:
        return ""


def _classify_exit(rc: int, stderr: str, what: str = "the kernel") -> tuple[str, str]:
    low = stderr.lower()
    memory = any(s in low for s in ("bad_alloc", "cannot allocate memory", "memoryerror", "out of memory",
                                    "failed to allocate"))
    if rc is not None and rc < 0:
        sig = -rc
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if memory or sig == signal.SIGKILL:
            return (f"{what} was killed by {name} (out of memory?)" + _stderr_note(stderr), "memory")
        return (f"{what} crashed: the worker died with {name}" + _stderr_note(stderr), "crash")
    if memory:
        return (f"{what} ran out of memory (worker exit status {rc})" + _stderr_note(stderr), "memory")
    return (f"{what} failed: the worker exited with status {rc}" + _stderr_note(stderr), "crash")


def _stderr_note(stderr: str) -> str:
    """A few informative stderr lines (not the native backtrace frames TVM prints)."""
    lines = [l.rstrip() for l in stderr.strip().splitlines()
             if l.strip() and not l.lstrip().startswith(("File \"", "Traceback", "!!!!"))]
    if not lines:
        return ""
    return "\n" + "\n".join(lines[-6:])


def run_kernel(source: str, inputs: dict, outputs: dict, *, kernel: Optional[str] = None, target="llvm",
               threads: Optional[int] = None, timeout: float = 120.0, memory_limit_mb: int = 8192,
               file: str = "<input>", cuda_arch: str = "sm_90") -> RunResult:
    """Parse, check, build and run ``source`` once in a worker process.

    ``outputs`` are the initial output arrays (copied to the device before the run).
    Returns the outputs and the inputs as they are after the run."""
    req = {"mode": "run", "source": source, "file": file, "kernel": kernel, "target": target, "cuda_arch": cuda_arch}
    res, fail, files = _spawn(req, [inputs], outputs, threads=threads, timeout=timeout,
                              memory_limit_mb=memory_limit_mb)
    if fail is not None:
        err, kind = fail
        return RunResult(False, error=err, error_kind=kind)
    if not res.get("ok"):
        return RunResult(False, error=res.get("error"), error_kind=res.get("error_kind"))
    return RunResult(True, files.get("outputs"), files.get("inputs_after"), None, None, res.get("build_s"),
                     res.get("run_s"), res.get("threads"), res.get("diagnostics", []))


def time_kernel(source: str, input_sets: list, *, kernel: Optional[str] = None, target="llvm",
                threads: Optional[int] = None, warmup: int = 3, repeat: int = 10, min_repeat_ms: float = 50.0,
                timeout: float = 300.0, memory_limit_mb: int = 8192, file: str = "<input>",
                cuda_arch: str = "sm_90") -> TimingResult:
    """Time ``source`` in a worker: median of ``repeat`` measurements over rotating input sets."""
    if not input_sets:
        raise ValueError("time_kernel needs at least one input set")
    if threads is None and os.environ.get("TVM_NUM_THREADS"):
        threads = int(os.environ["TVM_NUM_THREADS"])
    req = {"mode": "time", "source": source, "file": file, "kernel": kernel, "target": target,
           "cuda_arch": cuda_arch, "warmup": warmup, "repeat": repeat, "min_repeat_ms": min_repeat_ms}
    res, fail, _ = _spawn(req, list(input_sets), None, threads=threads, timeout=timeout,
                          memory_limit_mb=memory_limit_mb)
    tname = _target_name(target)
    if fail is not None:
        return TimingResult(False, target=tname, threads=threads, error=fail[0], error_kind=fail[1])
    if not res.get("ok"):
        return TimingResult(False, target=tname, threads=threads, error=res.get("error"),
                            error_kind=res.get("error_kind"))
    runs = [float(x) for x in res["runs"]]
    return TimingResult(True, statistics.median(runs), min(runs), max(runs),
                        statistics.pstdev(runs) if len(runs) > 1 else 0.0, runs, res.get("threads"), tname,
                        number=res.get("number"), build_s=res.get("build_s"))


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
    from .worker import _np_dtype

    return {p.name: np.zeros(tuple(p.shape), _np_dtype(p.dtype)) for p in kernel.outputs}
