"""Timing kernels on a device reached through TVM's RPC tracker (``--rpc HOST:PORT --key KEY``).

:class:`RemoteTimer` measures on a server the tracker hands out for a key, so a search runs
on a laptop while its candidates are timed on a GPU box or a pool of boards. Each request is
one job in a worker process (``python -m leirc.lower.rpc --job DIR``), in its own process
group and killed at its deadline, so neither a kernel's build nor a lost connection can take
the caller down:

1. the worker checks and builds the kernels here (``export_library`` to a ``.so``);
2. asks the tracker for a server with the key (``connect_tracker(...).request(key)``),
   uploads and loads the libraries there;
3. times them with the runtime's ``time_evaluator`` on the remote device, on the inputs
   the job gives (rotating through the input sets, one measurement of ``number`` calls per
   entry of ``runs``, ``number`` chosen so a measurement lasts ``min_repeat_ms``), and
   returns the same :class:`~leirc.lower.runner.TimingResult` as a local timing.

Two kernels timed in one job are interleaved on the remote (A B B A A B ...), both loaded
in the same RPC session: :meth:`RemoteTimer.interleaved` gives the per-round runs that the
search's paired comparison needs. The search verifies locally and sends only the timing.

:class:`RemoteSession` is the other use: one kernel built here once and loaded on the remote
for as long as the session lasts, serving *runs* (outputs copied back, so the verifier
compares what the device computed) and timings, with a :class:`~leirc.lower.session.
KernelSession`'s interface (``runner``, ``time``, ``build_failure``, ``close``). The engine's
``Evaluator(remote=RemoteDevice(...))`` evaluates on it: "Run on GPU" in the editor, from a
machine without one. Its worker (``python -m leirc.lower.rpc --serve DIR``, own process
group) holds the RPC session; every request has a deadline, after which the worker is killed
and the session reports ``timeout``.

The job directory holds ``job.json`` and the input sets as ``.npy`` files; the worker writes
``result.json`` (atomically) when it is done. Failures are classified like a local session's:
``"build"`` (the kernel does not build here), ``"rpc"`` (no tracker, no server for the key,
a lost connection), ``"runtime"`` (the remote run failed), ``"timeout"``, ``"crash"``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..io import python_module
from .runner import RunResult, TimingResult

__all__ = ["RemoteDevice", "RemoteSession", "RemoteTimer", "RPCError", "parse_address"]


class RPCError(Exception):
    pass


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); ValueError with a message otherwise."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"not a tracker address: {text!r} (expected HOST:PORT, e.g. 127.0.0.1:9190)")
    return host, int(port)


class RemoteTimer:
    """Time kernels on a server that the tracker at ``tracker`` (``HOST:PORT``) hands out for
    ``key``. ``timeout`` bounds each job (build, upload and timing together)."""

    def __init__(self, tracker: str, key: str, *, target: str = "llvm", timeout: float = 120.0,
                 priority: int = 1, session_timeout: float = 0.0, cuda_arch: str = "sm_90"):
        self.host, self.port = parse_address(tracker)
        if not key:
            raise ValueError("the RPC device key is empty")
        self.key = key
        self.target = target
        self.timeout = float(timeout)
        self.priority = int(priority)
        self.session_timeout = float(session_timeout)
        self.cuda_arch = cuda_arch
        self.where = f"rpc://{self.host}:{self.port}/{key}"
        self.stats = {"jobs": 0, "kernels_timed": 0, "failed_jobs": 0}

    def close(self) -> None:
        """Nothing stays open between jobs (each job holds its own RPC session)."""

    # -- the two requests ------------------------------------------------------------------
    def time(self, sources: list, input_sets: list, *, threads: Optional[int] = None, warmup: int = 2,
             repeat: int = 5, min_repeat_ms: float = 20.0) -> list:
        """One :class:`TimingResult` per source, timed one after the other on the remote."""
        rep = self._job({"mode": "time", "sources": list(sources), "threads": threads, "warmup": int(warmup),
                         "repeat": int(repeat), "min_repeat_ms": float(min_repeat_ms)}, input_sets)
        if not rep.get("ok"):
            return [self._failure(rep, threads) for _ in sources]
        return [self._timing(t, threads) for t in rep["timings"]]

    def interleaved(self, text_a: str, text_b: str, input_sets: list, *, rounds: int = 4,
                    threads: Optional[int] = None, warmup: int = 1, repeat: int = 3, min_repeat_ms: float = 20.0):
        """(runs of a per round, runs of b per round), timed alternately A B B A ... in one
        remote session; (None, None) when the job failed."""
        rep = self._job({"mode": "interleaved", "sources": [text_a, text_b], "threads": threads,
                         "rounds": int(rounds), "warmup": int(warmup), "repeat": int(repeat),
                         "min_repeat_ms": float(min_repeat_ms)}, input_sets)
        if not rep.get("ok"):
            return None, None
        return rep["rounds"][0], rep["rounds"][1]

    # -- plumbing ------------------------------------------------------------------------
    def _timing(self, t: dict, threads) -> TimingResult:
        if not t.get("ok"):
            return self._failure(t, threads)
        runs = [float(x) for x in t["runs"]]
        return TimingResult(True, statistics.median(runs), min(runs), max(runs),
                            statistics.pstdev(runs) if len(runs) > 1 else 0.0, runs, t.get("threads", threads),
                            str(self.target).split()[0], number=t.get("number"), build_s=t.get("build_s"))

    def _failure(self, rep: dict, threads) -> TimingResult:
        return TimingResult(False, threads=threads, target=str(self.target).split()[0],
                            error=f"{self.where}: {rep.get('error') or 'the remote timing failed'}",
                            error_kind=rep.get("error_kind") or "rpc")

    def _job(self, spec: dict, input_sets: list) -> dict:
        self.stats["jobs"] += 1
        d = tempfile.mkdtemp(prefix="leirc-rpc-")
        try:
            names = []
            for k, s in enumerate(input_sets):
                entry = {}
                for i, (name, a) in enumerate(s.items()):
                    fn = f"set{k}.{i}.npy"
                    np.save(os.path.join(d, fn), np.asarray(a, order="C"), allow_pickle=False)
                    entry[name] = fn
                names.append(entry)
            job = spec | {"sets": names, "tracker": [self.host, self.port], "key": self.key,
                          "priority": self.priority, "session_timeout": self.session_timeout,
                          "target": self.target, "cuda_arch": self.cuda_arch}
            with open(os.path.join(d, "job.json"), "w", encoding="utf-8") as f:
                json.dump(job, f)
            rep = self._run_worker(d)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        if not rep.get("ok"):
            self.stats["failed_jobs"] += 1
        else:
            self.stats["kernels_timed"] += len(spec["sources"])
        return rep

    def _run_worker(self, d: str) -> dict:
        err_path = os.path.join(d, "stderr.txt")
        with open(err_path, "wb") as errf:
            p = subprocess.Popen(python_module("leirc.lower.rpc", "--job", d), stdin=subprocess.DEVNULL,
                                 stdout=errf, stderr=errf, start_new_session=True)
        try:
            rc = p.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(p)
            return {"ok": False, "error_kind": "timeout",
                    "error": f"the remote timing did not finish within {self.timeout:g} s (worker killed)"}
        except BaseException:  # Ctrl-C: the job's process group goes with us
            _kill_group(p)
            raise
        out = os.path.join(d, "result.json")
        if os.path.exists(out):
            with open(out, encoding="utf-8") as f:
                return json.load(f)
        from .session import classify_exit, tail

        msg, kind = classify_exit(rc, tail(err_path), "the RPC timing worker")
        return {"ok": False, "error": msg, "error_kind": kind}


def _kill_group(p: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        p.wait(timeout=30)


@dataclass(frozen=True)
class RemoteDevice:
    """Where remote sessions run: the tracker (``HOST:PORT``) and the device key it serves."""

    tracker: str
    key: str

    def __post_init__(self):
        parse_address(self.tracker)
        if not self.key:
            raise ValueError("the RPC device key is empty")

    @property
    def where(self) -> str:
        host, port = parse_address(self.tracker)
        return f"rpc://{host}:{port}/{self.key}"

    def open(self, source: str, *, kernel: Optional[str] = None, target="llvm", threads: Optional[int] = None,
             timeout: float = 120.0, **_local) -> "RemoteSession":
        """A :class:`RemoteSession` of ``source`` on a server of this device (the
        :class:`leirc.lower.device.Device` protocol; worker-pool and memory options apply to
        local sessions only)."""
        return RemoteSession(source, device=self, kernel=kernel, target=target, threads=threads, timeout=timeout)


class RemoteSession:
    """One kernel, built here once and loaded on a server of ``device`` (a
    :class:`RemoteDevice`), serving runs and timings there (see the module docstring).
    Failures are results, never exceptions: ``build`` (it does not build here), ``rpc`` (no
    tracker or server, a lost connection), ``runtime``, ``timeout``, ``crash``."""

    def __init__(self, source: str, *, device: RemoteDevice, kernel: Optional[str] = None, target="llvm",
                 threads: Optional[int] = None, timeout: float = 120.0, cuda_arch: str = "sm_90"):
        self.source, self.kernel, self.target = source, kernel, target
        self.device, self.threads, self.timeout, self.cuda_arch = device, threads, float(timeout), cuda_arch
        self.where = device.where
        self.builds = 0
        self.startup_s: Optional[float] = None
        self._ready: Optional[dict] = None
        self._failure: Optional[tuple[str, str]] = None
        self._rid = 0
        self._dir = tempfile.mkdtemp(prefix="leirc-rpcs-")
        self._err = open(os.path.join(self._dir, "stderr.txt"), "wb")
        self._t0 = time.monotonic()
        self._proc = subprocess.Popen(python_module("leirc.lower.rpc", "--serve", self._dir),
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                      start_new_session=True)
        host, port = parse_address(device.tracker)
        self._send({"op": "open", "source": source, "kernel": kernel, "target": str(target), "threads": threads,
                    "cuda_arch": cuda_arch, "tracker": [host, port], "key": device.key})

    # -- life cycle ------------------------------------------------------------------------
    def __enter__(self) -> "RemoteSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(OSError, ValueError):
                self._proc.stdin.write(b'{"op": "quit"}\n')
                self._proc.stdin.flush()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
            _kill_group(self._proc)
            for f in (self._proc.stdin, self._proc.stdout):
                with contextlib.suppress(OSError):
                    f.close()
            self._proc = None
        with contextlib.suppress(OSError):
            self._err.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- protocol --------------------------------------------------------------------------
    def _send(self, msg: dict) -> bool:
        try:
            self._proc.stdin.write((json.dumps(msg) + "\n").encode())
            self._proc.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def _recv(self, timeout: float) -> tuple[Optional[dict], Optional[tuple[str, str]]]:
        import select

        fd = self._proc.stdout
        ready, _, _ = select.select([fd], [], [], max(0.0, timeout))
        line = fd.readline() if ready else None
        if line:
            return json.loads(line), None
        if not ready:
            _kill_group(self._proc)
            return None, (f"{self.where}: no answer within {timeout:g} s (the RPC worker was killed)", "timeout")
        from .session import classify_exit, tail

        rc = self._proc.wait(timeout=30)
        msg, kind = classify_exit(rc, tail(os.path.join(self._dir, "stderr.txt")), "the RPC worker")
        return None, (f"{self.where}: {msg}", kind)

    def _ensure(self) -> Optional[tuple[str, str]]:
        """Wait for the remote side to be ready (built here, loaded there)."""
        if self._ready is not None or self._failure is not None:
            return self._failure
        if self._proc is None:
            self._failure = ("the session is closed", "runtime")
            return self._failure
        rep, fail = self._recv(self.timeout)
        if fail is None and not rep.get("ok"):
            # build errors are diagnostics of this machine's build; RPC errors name the tracker and key
            fail = (f"{self.where}: {rep.get('error')}" if rep.get("error_kind") not in ("build", "rpc")
                    else rep.get("error"), rep.get("error_kind") or "rpc")
        if fail is not None:
            self._failure = fail
            return fail
        self._ready = rep
        self.builds = 1
        self.startup_s = time.monotonic() - self._t0
        return None

    def _request(self, msg: dict, timeout: Optional[float]) -> tuple[Optional[dict], Optional[tuple[str, str]]]:
        fail = self._ensure()
        if fail is not None:
            return None, fail
        if not self._send(msg):
            return self._recv(0.0)
        rep, fail = self._recv(self.timeout if timeout is None else float(timeout))
        if fail is not None:
            self._failure = fail  # the worker is gone: later requests report the same
        return rep, fail

    def _save(self, arrays: dict, tag: str) -> dict:
        self._rid += 1
        out = {}
        for i, (name, a) in enumerate(arrays.items()):
            fn = f"q{self._rid}.{tag}.{i}.npy"
            np.save(os.path.join(self._dir, fn), np.ascontiguousarray(a), allow_pickle=False)
            out[name] = fn
        return out

    def _load(self, fn: str) -> np.ndarray:
        return np.load(os.path.join(self._dir, fn), allow_pickle=False)

    # -- facts -----------------------------------------------------------------------------
    @property
    def build_failure(self) -> Optional[tuple[str, str]]:
        """(error, error_kind) if the kernel could not be built here or loaded there."""
        return self._ensure()

    @property
    def build_s(self) -> Optional[float]:
        self._ensure()
        return None if self._ready is None else self._ready.get("build_s")

    # -- requests --------------------------------------------------------------------------
    def run(self, inputs: dict, outputs: dict, *, timeout: Optional[float] = None) -> RunResult:
        """One run on the remote device; the outputs (and any input the kernel changed) are
        copied back."""
        try:
            files_in, files_out = self._save(inputs, "in"), self._save(outputs, "out")
        except (OSError, ValueError, TypeError) as e:
            return RunResult(False, error=f"cannot pass the arrays to the RPC worker: {e}", error_kind="runtime")
        rep, fail = self._request({"op": "run", "inputs": files_in, "outputs": files_out}, timeout)
        if fail is not None:
            return RunResult(False, error=fail[0], error_kind=fail[1])
        if not rep.get("ok"):
            return RunResult(False, error=f"{self.where}: {rep.get('error')}", error_kind=rep.get("error_kind"))
        try:
            outs = {n: self._load(fn) for n, fn in rep["outputs"].items()}
            changed = rep.get("inputs_changed", {})
            after = {n: (self._load(changed[n]) if n in changed else np.asarray(a)) for n, a in inputs.items()}
        except (OSError, ValueError) as e:
            return RunResult(False, error=f"cannot read the RPC worker's results: {e}", error_kind="runtime")
        return RunResult(True, outs, after, None, None, self.build_s, rep.get("run_s"), rep.get("threads"))

    @property
    def runner(self):
        """A callable with :func:`leirc.lower.runner.run_kernel`'s signature served by this
        session (ValueError when asked for another source)."""

        def runner(source: str, inputs: dict, outputs: dict, *, kernel: Optional[str] = None, target=None,
                   threads: Optional[int] = None, timeout: Optional[float] = None, **_ignored) -> RunResult:
            if source != self.source:
                raise ValueError("this remote session serves another source text")
            return self.run(inputs, outputs, timeout=timeout)

        runner.session = self
        return runner

    def time(self, input_sets: list, warmup: int = 3, repeat: int = 10, min_repeat_ms: float = 50.0, *,
             timeout: Optional[float] = None) -> TimingResult:
        tname = str(self.target).split()[0]
        try:
            sets = [self._save(s, "set") for s in input_sets]
        except (OSError, ValueError, TypeError) as e:
            return TimingResult(False, target=tname, error=f"cannot pass the arrays to the RPC worker: {e}",
                                error_kind="runtime")
        rep, fail = self._request({"op": "time", "sets": sets, "warmup": int(warmup), "repeat": int(repeat),
                                   "min_repeat_ms": float(min_repeat_ms)}, timeout)
        if fail is not None:
            return TimingResult(False, threads=self.threads, target=tname, error=fail[0], error_kind=fail[1])
        if not rep.get("ok"):
            return TimingResult(False, threads=self.threads, target=tname, error=f"{self.where}: {rep.get('error')}",
                                error_kind=rep.get("error_kind") or "runtime")
        runs = [float(x) for x in rep["runs"]]
        return TimingResult(True, statistics.median(runs), min(runs), max(runs),
                            statistics.pstdev(runs) if len(runs) > 1 else 0.0, runs, rep.get("threads"), tname,
                            number=rep.get("number"), build_s=self.build_s)


# -- the worker -----------------------------------------------------------------------------

def _build_one(src: str, kernel: Optional[str], target, cuda_arch: str, path: str):
    """Check and build kernel ``kernel`` (or the only one) of ``src`` here, export it to
    ``path``; (symbol, build seconds, checked kernel). Raises _JobError("build")."""
    from ..lang.checker import check_text
    from ..lang.diagnostics import render
    from . import LowerError, build

    cf = check_text(src)
    results = [r for r in cf.results if kernel is None or r.kernel.name == kernel]
    if not cf.ok or len(results) != 1:
        raise _JobError("build", "\n".join(render(x, cf.parse.source) for x in cf.diagnostics if x.is_error)
                        or ("the source must define exactly one kernel" if kernel is None else f"no kernel '{kernel}'"))
    t0 = time.perf_counter()
    try:
        built = build(results[0], target, cuda_arch=cuda_arch)
    except LowerError as e:
        raise _JobError("build", render(e.diagnostic, cf.parse.source)) from None
    built.export_library(path)
    return built.symbol, time.perf_counter() - t0, results[0].kernel


def _build_all(job: dict, d: str) -> list:
    """[(symbol, library file, build seconds, kernel)] for the job's sources; raises _JobError."""
    out = []
    for i, src in enumerate(job["sources"]):
        path = os.path.join(d, f"kernel{i}.so")
        symbol, build_s, kernel = _build_one(src, None, job.get("target", "llvm"), job.get("cuda_arch", "sm_90"), path)
        out.append((symbol, path, build_s, kernel))
    return out


class _JobError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _session(tvm, job: dict):
    from tvm import rpc

    host, port = job["tracker"]
    try:
        tracker = rpc.connect_tracker(host, int(port))
        # request() waits for as long as no server has the key: say at once that none has it
        queue = tracker.summary().get("queue_info", {})
        if job["key"] not in queue:
            raise _JobError("rpc", f"the tracker at {host}:{port} has no server for key '{job['key']}' "
                                   f"(keys: {', '.join(sorted(queue)) or 'none'})")
        return tracker.request(job["key"], priority=int(job.get("priority", 1)),
                               session_timeout=float(job.get("session_timeout", 0.0)))
    except _JobError:
        raise
    except Exception as e:  # noqa: BLE001 - TVM raises plain RuntimeErrors/TVMErrors for every network problem
        raise _JobError("rpc", f"no RPC server for key '{job['key']}' from the tracker at {host}:{port}: "
                               f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}") \
            from None


def _configure(remote, threads) -> Optional[int]:
    """Set the remote runtime's thread count; the count it reports (None if it cannot say)."""
    if threads:
        with contextlib.suppress(Exception):  # a runtime without the function keeps its default
            remote.get_function("runtime.config_threadpool")(1, int(threads))
    try:
        return int(remote.get_function("runtime.NumThreads")())
    except Exception:  # noqa: BLE001 - older runtimes lack it
        return None


def _device(remote, target):
    return remote.cuda(0) if str(target).split()[0] == "cuda" else remote.cpu(0)


def _measure(lib, symbol: str, dev, args: list, count: int, warmup: int, min_ms: float) -> tuple:
    """``count`` measurements (ms per call), rotating through the argument sets ``args``."""
    timer = lib.time_evaluator(symbol, dev, number=1, repeat=1, min_repeat_ms=0)
    per_call = None
    for w in range(max(1, warmup)):
        per_call = timer(*args[w % len(args)]).mean
    number = max(1, int(np.ceil(min_ms / 1000.0 / max(per_call, 1e-9)))) if min_ms > 0 else 1
    timer = lib.time_evaluator(symbol, dev, number=number, repeat=1, min_repeat_ms=0)
    return [timer(*args[r % len(args)]).mean * 1e3 for r in range(count)], number


def _load_arrays(d: str, files: dict) -> dict:
    return {n: np.load(os.path.join(d, fn), allow_pickle=False) for n, fn in files.items()}


class _Served:
    """What a ``--serve`` worker holds: the kernel loaded on the remote device."""

    def __init__(self, d: str, msg: dict):
        from ._tvm import tvm as _t

        self.tvm = _t()
        path = os.path.join(d, "kernel.so")
        target = msg.get("target") or "llvm"
        self.symbol, self.build_s, self.kernel = _build_one(msg["source"], msg.get("kernel"), target,
                                                            msg.get("cuda_arch") or "sm_90", path)
        self.remote = _session(self.tvm, msg)
        self.threads = _configure(self.remote, msg.get("threads"))
        self.dev = _device(self.remote, target)
        self.remote.upload(path)
        self.lib = self.remote.load_module(os.path.basename(path))
        self.func = self.lib.get_function(self.symbol)

    def tensors(self, arrays: dict, params) -> list:
        from .worker import np_dtype

        return [self.tvm.runtime.tensor(np.ascontiguousarray(arrays[p.name], dtype=np_dtype(p.dtype)), self.dev)
                for p in params]

    def run(self, d: str, rid: int, msg: dict) -> dict:
        ins, outs = _load_arrays(d, msg["inputs"]), _load_arrays(d, msg["outputs"])
        k = self.kernel
        missing = [p.name for p in list(k.inputs) + list(k.outputs) if p.name not in ins and p.name not in outs]
        if missing:
            return {"ok": False, "error_kind": "runtime", "error": f"no array for {', '.join(missing)}"}
        args_in, args_out = self.tensors(ins, k.inputs), self.tensors(outs, k.outputs)
        t0 = time.perf_counter()
        self.func(*args_in, *args_out)
        self.dev.sync()
        run_s = time.perf_counter() - t0
        files, changed = {}, {}
        for i, (p, a) in enumerate(zip(k.outputs, args_out)):
            files[p.name] = f"a{rid}.out.{i}.npy"
            np.save(os.path.join(d, files[p.name]), a.numpy(), allow_pickle=False)
        for i, (p, a) in enumerate(zip(k.inputs, args_in)):
            after = a.numpy()
            if after.tobytes() != np.ascontiguousarray(ins[p.name]).tobytes():
                changed[p.name] = f"a{rid}.after.{i}.npy"
                np.save(os.path.join(d, changed[p.name]), after, allow_pickle=False)
        return {"ok": True, "outputs": files, "inputs_changed": changed, "run_s": run_s, "threads": self.threads}

    def time(self, d: str, msg: dict) -> dict:
        from .worker import np_dtype

        k = self.kernel
        args = [self.tensors(_load_arrays(d, s), k.inputs)
                + [self.tvm.runtime.tensor(np.zeros(tuple(p.shape), np_dtype(p.dtype)), self.dev) for p in k.outputs]
                for s in msg["sets"]]
        runs, number = _measure(self.lib, self.symbol, self.dev, args, int(msg.get("repeat", 5)),
                                int(msg.get("warmup", 1)), float(msg.get("min_repeat_ms", 20.0)))
        return {"ok": True, "runs": runs, "number": number, "threads": self.threads}


def _serve(d: str) -> int:
    """The ``--serve`` loop: JSON requests on stdin (``open`` first, then ``run``/``time``,
    ``quit``), one JSON reply line each on the original stdout (TVM's own prints go to stderr)."""
    reply = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    from .worker import messages

    served, rid = None, 0
    for msg in messages(sys.stdin):
        op = msg.get("op")
        if op == "quit":
            return 0
        rid += 1
        try:
            if op == "open":
                served = _Served(d, msg)
                rep = {"ok": True, "build_s": served.build_s, "threads": served.threads}
            elif served is None:
                rep = {"ok": False, "error_kind": "runtime", "error": "no kernel loaded"}
            elif op == "run":
                rep = served.run(d, rid, msg)
            elif op == "time":
                rep = served.time(d, msg)
            else:
                rep = {"ok": False, "error_kind": "runtime", "error": f"unknown request {op!r}"}
        except _JobError as e:
            rep = {"ok": False, "error_kind": e.kind, "error": str(e)}
        except Exception as e:  # noqa: BLE001 - a remote failure is this request's failure
            rep = {"ok": False, "error_kind": "runtime", "error": f"{type(e).__name__}: {str(e).strip()[:2000]}"}
        reply.write(json.dumps(rep) + "\n")
        if op == "open" and not rep["ok"]:
            return 0
    return 0


def _run_job(d: str) -> dict:
    from ._tvm import tvm as _t
    from .worker import np_dtype

    with open(os.path.join(d, "job.json"), encoding="utf-8") as f:
        job = json.load(f)
    tvm = _t()
    kernels = _build_all(job, d)
    remote = _session(tvm, job)
    try:
        reported = _configure(remote, job.get("threads"))
        dev = _device(remote, job.get("target", "llvm"))
        sets = [{n: np.load(os.path.join(d, fn), allow_pickle=False) for n, fn in s.items()} for s in job["sets"]]
        loaded = []
        for symbol, path, build_s, kernel in kernels:
            remote.upload(path)
            lib = remote.load_module(os.path.basename(path))
            args = [[tvm.runtime.tensor(np.ascontiguousarray(s[p.name]), dev) for p in kernel.inputs]
                    + [tvm.runtime.tensor(np.zeros(tuple(p.shape), np_dtype(p.dtype)), dev) for p in kernel.outputs]
                    for s in sets]
            loaded.append((lib, symbol, args, build_s))
        min_ms = float(job.get("min_repeat_ms", 20.0))
        warmup = int(job.get("warmup", 1))

        def measure(item, count: int) -> tuple:
            lib, symbol, args, _ = item
            return _measure(lib, symbol, dev, args, count, warmup, min_ms)

        repeat = int(job.get("repeat", 5))
        if job["mode"] == "interleaved":
            rounds: list = [[], []]
            for r in range(int(job.get("rounds", 4))):
                for which in ((0, 1) if r % 2 == 0 else (1, 0)):
                    runs, _ = measure(loaded[which], repeat)
                    rounds[which].append(runs)
            return {"ok": True, "rounds": rounds, "threads": reported}
        timings = []
        for item in loaded:
            runs, number = measure(item, repeat)
            timings.append({"ok": True, "runs": runs, "number": number, "threads": reported, "build_s": item[3]})
        return {"ok": True, "timings": timings}
    finally:
        with contextlib.suppress(Exception):  # the session ends with the process either way
            del remote


def main(argv: list) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m leirc.lower.rpc")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--job", metavar="DIR", help="one timing job (RemoteTimer)")
    mode.add_argument("--serve", metavar="DIR", help="serve one kernel's runs and timings (RemoteSession)")
    a = ap.parse_args(argv)
    if a.serve:
        return _serve(a.serve)
    try:
        rep = _run_job(a.job)
    except _JobError as e:
        rep = {"ok": False, "error_kind": e.kind, "error": str(e)}
    except Exception as e:  # noqa: BLE001 - a remote run failure is this job's failure
        rep = {"ok": False, "error_kind": "runtime", "error": f"{type(e).__name__}: {str(e).strip()[:2000]}"}
    tmp = os.path.join(a.job, "result.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(rep, f)
    os.replace(tmp, os.path.join(a.job, "result.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
