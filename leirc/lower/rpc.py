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
search's paired comparison needs. Verification does not go through here: the search
verifies locally and sends only the timing.

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
from typing import Optional

import numpy as np

from .runner import TimingResult

__all__ = ["RemoteTimer", "RPCError", "parse_address"]


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
            p = subprocess.Popen([sys.executable, "-m", "leirc.lower.rpc", "--job", d], stdin=subprocess.DEVNULL,
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


# -- the worker -----------------------------------------------------------------------------

def _build_all(job: dict, d: str) -> list:
    """[(symbol, library file, build seconds)] for the job's sources; raises _JobError."""
    from ..lang.checker import check_text
    from ..lang.diagnostics import render
    from . import LowerError, build

    out = []
    for i, src in enumerate(job["sources"]):
        cf = check_text(src)
        if not cf.ok or len(cf.results) != 1:
            raise _JobError("build", "\n".join(render(x, cf.parse.source) for x in cf.diagnostics if x.is_error)
                            or "the source must define exactly one kernel")
        t0 = time.perf_counter()
        try:
            built = build(cf.results[0], job.get("target", "llvm"), cuda_arch=job.get("cuda_arch", "sm_90"))
        except LowerError as e:
            raise _JobError("build", render(e.diagnostic, cf.parse.source)) from None
        path = os.path.join(d, f"kernel{i}.so")
        built.export_library(path)
        out.append((built.symbol, path, time.perf_counter() - t0, cf.results[0].kernel))
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
        return tracker.request(job["key"], priority=int(job.get("priority", 1)),
                               session_timeout=float(job.get("session_timeout", 0.0)))
    except Exception as e:  # noqa: BLE001 - TVM raises plain RuntimeErrors/TVMErrors for every network problem
        raise _JobError("rpc", f"no RPC server for key '{job['key']}' from the tracker at {host}:{port}: "
                               f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}") \
            from None


def _run_job(d: str) -> dict:
    from ._tvm import tvm as _t
    from .worker import np_dtype

    with open(os.path.join(d, "job.json"), encoding="utf-8") as f:
        job = json.load(f)
    tvm = _t()
    kernels = _build_all(job, d)
    remote = _session(tvm, job)
    try:
        threads = job.get("threads")
        if threads:
            with contextlib.suppress(Exception):  # a runtime without the function keeps its default
                remote.get_function("runtime.config_threadpool")(1, int(threads))
        try:
            reported = int(remote.get_function("runtime.NumThreads")())
        except Exception:  # noqa: BLE001 - older runtimes lack it
            reported = None
        is_cuda = str(job.get("target", "llvm")).split()[0] == "cuda"
        dev = remote.cuda(0) if is_cuda else remote.cpu(0)
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
            """``count`` measurements (ms per call), rotating through the input sets."""
            lib, symbol, args, _ = item
            timer = lib.time_evaluator(symbol, dev, number=1, repeat=1, min_repeat_ms=0)
            per_call = None
            for w in range(max(1, warmup)):
                per_call = timer(*args[w % len(args)]).mean
            number = max(1, int(np.ceil(min_ms / 1000.0 / max(per_call, 1e-9)))) if min_ms > 0 else 1
            timer = lib.time_evaluator(symbol, dev, number=number, repeat=1, min_repeat_ms=0)
            return [timer(*args[r % len(args)]).mean * 1e3 for r in range(count)], number

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
    ap.add_argument("--job", required=True, metavar="DIR")
    a = ap.parse_args(argv)
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
