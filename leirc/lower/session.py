"""A sandboxed kernel session: one worker process builds a kernel once and serves many runs.

``KernelSession(source, kernel=..., target=...)`` starts ``python -m leirc.lower.worker``
(:mod:`leirc.lower.worker`) in a new process group with a private directory, sends it the
source, and returns at once: the worker imports TVM and builds while the caller prepares
its first request. :meth:`KernelSession.run` and :meth:`KernelSession.time` then reuse the
built kernel, so a ``verify`` of N runs costs one start-up and one build instead of N.

Isolation is that of the one-shot runner (:mod:`leirc.lower.runner`): nothing a kernel does
can take the caller down, and every failure becomes a classified result:

* exit by signal -> ``error_kind="crash"`` (``"memory"`` if the worker's stderr shows an
  allocation failure, or for a SIGKILL we did not send: the OOM killer);
* no answer within the request's timeout -> the worker's process group is killed,
  ``"timeout"``;
* ``MemoryError`` / TVM allocation failures under ``RLIMIT_AS`` (``memory_limit_mb``) ->
  ``"memory"``;
* parse/check/lowering/build errors -> ``"build"``; bad arrays or a TVM error while
  running -> ``"runtime"``.

After a crash, timeout or memory failure in a request the worker is gone (or killed); the
next request starts a fresh worker and rebuilds. A failed build (any kind) is remembered and
returned for every later request without building again.

A worker can also be started before its kernel is known, by a :class:`WorkerPool`
(:meth:`WorkerPool.warm`, or the spare each :meth:`WorkerPool.take` starts); the session
that adopts it sends the build at once. A worker whose kernel text has no ``bf16`` imports
TVM without ml_dtypes (:func:`needs_ml_dtypes`), about 1 s of CPU less. An adopted worker
that died before its build began (killed while it imported TVM) is replaced once.

Arrays travel as ``.npy`` files in the session directory (on ``/dev/shm`` when available,
else the temporary directory; ``LEIRC_TMPDIR`` overrides), written completely before the
request line is sent; replies come on a dedicated pipe. On the CPU the worker runs the
kernel on the mapped files themselves (inputs copy-on-write, outputs in place), so it
copies no array; bf16 arrays, which ``.npy`` stores as raw 2-byte voids, are viewed back as
bf16 on both sides. The directory is removed by
:meth:`close` (also on leaving the ``with`` block, by exception or not), when an unclosed
session is garbage-collected, at interpreter exit, and when the process receives SIGTERM,
SIGINT or SIGHUP whose handler was the default one (the handlers are installed by the first
session created in the main thread; they kill live workers, remove the directories and then
re-deliver the signal). A worker whose parent vanished without any of these (SIGKILL) sees
its stdin close, removes the directory itself and exits.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
import weakref
from typing import Optional

import numpy as np

from ..io import python_module
from ..target import Target
from .runner import RunResult, TimingResult
from .worker import SESSION_DIR_PREFIX

__all__ = ["KernelSession", "WorkerPool", "classify_exit", "target_name", "session_base_dir", "needs_ml_dtypes",
           "DEFAULT_MEMORY_LIMIT_MB"]

#: ``RLIMIT_AS`` of a worker unless the caller gives another
DEFAULT_MEMORY_LIMIT_MB = 8192
#: the termination signals whose default handling is replaced (see the module docstring)
_HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def needs_ml_dtypes(source) -> bool:
    """Whether the worker for ``source`` must import TVM with ml_dtypes: only bf16 arrays
    need it, and a dtype is always spelled out in LEIR text, so a text without ``bf16`` never
    does (a mention in a comment only costs the import, ~1 s of CPU; see
    :func:`leirc.lower.worker._import_tvm`). ``source``: str, or the bytes of a file."""
    return (b"bf16" if isinstance(source, (bytes, bytearray)) else "bf16") in source


def target_name(target) -> str:
    if isinstance(target, Target):
        return target.kind
    if isinstance(target, dict):
        return str(target.get("kind", "llvm"))
    return str(target).split()[0]


def session_base_dir() -> str:
    """Where session directories are created (see the module docstring)."""
    env = os.environ.get("LEIRC_TMPDIR")
    if env:
        return env
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return tempfile.gettempdir()


# -- failure classification ------------------------------------------------------------

def tail(path: str, n: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def classify_exit(rc: Optional[int], stderr: str, what: str = "the kernel") -> tuple[str, str]:
    """(message, error_kind) for a worker that died with status ``rc``."""
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
        if sig == signal.SIGILL:
            # the one crash that is the build's fault, not the program's: name the cure
            return (f"{what} crashed: the worker died with SIGILL: the kernel uses an instruction this CPU "
                    "lacks (see `leirc target`; `-t 'llvm -mattr=-FEATURE'` builds without it)"
                    + _stderr_note(stderr), "crash")
        return (f"{what} crashed: the worker died with {name}" + _stderr_note(stderr), "crash")
    if memory:
        return (f"{what} ran out of memory (worker exit status {rc})" + _stderr_note(stderr), "memory")
    return (f"{what} failed: the worker exited with status {rc}" + _stderr_note(stderr), "crash")


def _stderr_note(stderr: str) -> str:
    """A few informative stderr lines (not the native backtrace frames TVM prints)."""
    lines = [ln.rstrip() for ln in stderr.strip().splitlines()
             if ln.strip() and not ln.lstrip().startswith(("File \"", "Traceback", "!!!!"))]
    if not lines:
        return ""
    return "\n" + "\n".join(lines[-6:])


def _like(a: np.ndarray, sent) -> np.ndarray:
    """``a`` with the dtype of the array sent for it: ``.npy`` has no bfloat16, so such an
    array comes back as raw 2-byte voids."""
    want = getattr(sent, "dtype", None)
    if (want is not None and a.dtype != want and a.dtype.kind == "V" and a.dtype.fields is None
            and want.itemsize == a.dtype.itemsize):
        return a.view(want)
    return a


def _readonly(a: np.ndarray) -> np.ndarray:
    """A read-only view: an input the kernel left unchanged is the caller's own array."""
    v = a.view()
    v.flags.writeable = False
    return v


# -- one worker process ----------------------------------------------------------------

_TIMEOUT = object()
_EOF = object()


class _Worker:
    """One incarnation of the worker process and its two pipes."""

    def __init__(self, d: str, gen: int, env: dict, memory_limit_mb: int, ml_dtypes: bool = True):
        self.err_path = os.path.join(d, f"stderr.{gen}.txt")
        r, w = os.pipe()
        # A Ctrl-C between the fork and the moment its owner knows the process would leave
        # the worker running: the termination signals wait until it is in _PROCS, which
        # atexit and the signal handlers stop (the worker unblocks them first thing).
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _HANDLED)
        try:
            with open(self.err_path, "wb") as errf:
                self.p = subprocess.Popen(
                    python_module("leirc.lower.worker", "--serve", d, "--reply-fd", str(w),
                                  "--memory-limit-mb", str(int(memory_limit_mb or 0))) + ([] if ml_dtypes else ["--no-ml-dtypes"]),
                    stdin=subprocess.PIPE, stdout=errf, stderr=errf, env=env, start_new_session=True,
                    pass_fds=(w,), close_fds=True)
            _PROCS[self.p.pid] = (os.getpid(), self.p)
        except BaseException:
            os.close(r)
            raise
        finally:
            os.close(w)
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        self.rfd = r
        self.buf = b""
        self.dead = False

    def send(self, obj: dict) -> bool:
        try:
            self.p.stdin.write((json.dumps(obj) + "\n").encode())
            self.p.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def recv(self, deadline: Optional[float]):
        """The next reply line as a dict, or _TIMEOUT, or _EOF (the worker died)."""
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line, self.buf = self.buf[:nl], self.buf[nl + 1:]
                if not line.strip():
                    continue
                try:
                    return json.loads(line)
                except ValueError:
                    continue
            if self.rfd < 0:
                return _EOF
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.rfd], [], [], wait)
            if not ready:
                return _TIMEOUT
            data = os.read(self.rfd, 1 << 16)
            if not data:
                return _EOF
            self.buf += data

    def returncode(self, wait: float = 30.0) -> Optional[int]:
        try:
            return self.p.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.p.returncode

    def kill(self) -> None:
        """Kill the whole process group (the worker and anything it started)."""
        _kill_group(self.p)
        self.close_pipes()

    def close_pipes(self) -> None:
        # closing a pipe whose other end died raises; the pipe is closed either way
        if self.rfd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.rfd)
            self.rfd = -1
        with contextlib.suppress(OSError):
            if self.p.stdin:
                self.p.stdin.close()


# -- cleanup that survives exceptions, garbage collection and termination signals -------

class _State:
    """What must be cleaned up for one session, kept apart from the session object so that
    the finalizer, atexit and the signal handlers can reach it."""

    def __init__(self, d: str):
        self.dir = d
        self.worker: Optional[_Worker] = None
        self.owner = os.getpid()  # a forked child must not kill its parent's workers

    def cleanup(self) -> None:
        if os.getpid() != self.owner:
            return
        w, self.worker = self.worker, None
        if w is not None:
            with contextlib.suppress(Exception):  # best effort while shutting down: the directory goes next
                w.kill()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = ""
        _LIVE.pop(id(self), None)


_LIVE: dict = {}
#: pid -> (owner pid, Popen) of every worker started and not yet killed
_PROCS: dict = {}
_PREVIOUS: dict = {}
_install_lock = threading.Lock()
_installed = False


def _kill_group(p: subprocess.Popen) -> None:
    """Kill a worker's whole process group (the worker and anything it started)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group has already exited
        os.killpg(p.pid, signal.SIGKILL)
    # a process stuck in the kernel (uninterruptible) cannot be waited for: leave it
    with contextlib.suppress(subprocess.TimeoutExpired):
        p.wait(timeout=30)
    _PROCS.pop(p.pid, None)


def _cleanup_all() -> None:
    for st in list(_LIVE.values()):
        st.cleanup()
    # workers whose owner never learnt of them (a signal right after the start)
    for owner, p in list(_PROCS.values()):
        if owner == os.getpid():
            _kill_group(p)


def _on_signal(signum, frame) -> None:
    prev = _PREVIOUS.get(signum, signal.SIG_DFL)
    if callable(prev):
        # e.g. Python's SIGINT handler: KeyboardInterrupt unwinds through the sessions'
        # ``with`` blocks and atexit, and the program may well catch it and go on
        prev(signum, frame)
        return
    _cleanup_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_handlers() -> None:
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    with _install_lock:
        if _installed:
            return
        for sig in _HANDLED:
            try:
                prev = signal.getsignal(sig)
                # installed outside Python, or ignored (nohup): leave it alone, and let the
                # workers inherit the ignored disposition
                if prev is None or prev == signal.SIG_IGN:
                    continue
                signal.signal(sig, _on_signal)
                _PREVIOUS[sig] = prev
            except (ValueError, OSError):
                continue  # not settable here (not the main thread, or a signal the OS reserves)
        atexit.register(_cleanup_all)
        _installed = True


def _new_state() -> _State:
    st = _State(tempfile.mkdtemp(prefix=SESSION_DIR_PREFIX, dir=session_base_dir()))
    _LIVE[id(st)] = st
    return st


#: ``sched_yield`` calls a TVM pool thread makes before it sleeps once its parallel region is done.
#: TVM's default, 300,000, keeps an idle worker's threads yielding for 0.1-0.5 s after its last
#: call; on 2 cores they took half the machine from the session timed next: a 512^3 GEMM timed
#: at 2.3-2.9 ms right after another session against 1.3 ms alone, so a search's interleaved
#: comparisons (A B B A, one session each) were 2x noisier than the kernels' difference. 10,000
#: (a few ms) still bridges the microseconds between back-to-back calls in a timing loop.
POOL_SPIN_COUNT = 10000


def _schedstat_ns(path: str) -> Optional[int]:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _children(pid: int) -> list[int]:
    """This process's direct children (Linux /proc: each thread's ``children`` list, else a
    scan of every process's parent)."""
    try:
        out = set()
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                out.update(int(c) for c in f.read().split())
        return sorted(out)
    except FileNotFoundError:  # a kernel without CONFIG_PROC_CHILDREN (or a thread that just ended)
        pass
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[1] == str(pid):
            out.append(int(entry))
    return out


def _busy_ns(exclude: frozenset) -> dict:
    """CPU time (ns) of each thread of this process but the calling one, and of each thread
    of its child processes but those in ``exclude`` (Linux schedstat)."""
    me, out = str(threading.get_native_id()), {}
    try:
        pids = [os.getpid()] + [c for c in _children(os.getpid()) if c not in exclude]
    except OSError:
        return out
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            if tid != me:
                ns = _schedstat_ns(f"/proc/{pid}/task/{tid}/schedstat")
                if ns is not None:
                    out[(pid, tid)] = ns
    return out


def wait_for_quiet(exclude=(), max_wait: float = 3.0, poll: float = 0.01, busy_ns: int = 1_000_000,
                   quiet_polls: int = 2) -> float:
    """Wait (at most ``max_wait`` s) until nothing else this process started runs: not its other
    threads, not its child processes but ``exclude`` (the worker about to be timed). On 2 cores
    each of these halved the speed of the kernel timed meanwhile: OpenBLAS's threads spinning
    ~0.15 s after a BLAS call (the reference interpreter's matmul; a 512^3 GEMM timed at 1.9-2.8
    ms against 1.3-1.4), and a pool's spare worker importing TVM (1-2 s of CPU; layernorm at
    0.6-1.1 ms against 0.25). A thread that used less than ``busy_ns`` of CPU in a ``poll``
    interval is idle; everything is, once ``quiet_polls`` intervals in a row say so (a busy thread
    that the scheduler left out of one interval is not taken for an idle one). Returns the seconds
    waited."""
    t0 = time.monotonic()
    exclude = frozenset(int(p) for p in exclude if p)
    before, quiet = _busy_ns(exclude), 0
    while before and quiet < quiet_polls and time.monotonic() - t0 < max_wait:
        time.sleep(poll)
        after = _busy_ns(exclude)
        quiet = quiet + 1 if all(after.get(t, v) - v < busy_ns for t, v in before.items()) else 0
        before = after
    return time.monotonic() - t0


def _worker_env(threads: Optional[int]) -> dict:
    env = dict(os.environ)
    if threads is not None:
        env["TVM_NUM_THREADS"] = str(int(threads))
    env.setdefault("TVM_THREAD_POOL_SPIN_COUNT", str(POOL_SPIN_COUNT))  # a user's own setting wins
    return env


class WorkerPool:
    """Started workers (TVM imported, no kernel yet) for the next sessions to adopt.

    Starting a worker is mostly importing TVM (1.5 s on an idle machine, far more on a
    loaded one). A loop over candidates that takes its session's worker from a pool pays it
    while the previous candidate is being verified: each :meth:`take` starts the next
    ``size`` spares, for the parameters it was asked for. A one-shot client (``leirc
    verify``) uses ``WorkerPool(0)`` and :meth:`warm` first thing, so that TVM is imported
    while it parses, checks and computes the reference outputs; its one take starts nothing.

    A spare is only handed to a session with the same environment and memory limit (so
    thread counts and test hooks set later are honoured), and one started without ml_dtypes
    only to a session that does not need it (:func:`needs_ml_dtypes`); others are stopped. A spare that died (killed, out of memory) is replaced. Spares are cleaned up
    like sessions (close, atexit, signals)."""

    def __init__(self, size: int = 1):
        self.size = max(0, int(size))
        self._spares: list = []  # (key, _State)
        self._closed = False
        self.started = 0  # workers started by this pool, spares and replacements

    @staticmethod
    def _key(env: dict, memory_limit_mb, ml_dtypes: bool = True) -> tuple:
        return tuple(sorted(env.items())), int(memory_limit_mb or 0), bool(ml_dtypes)

    @staticmethod
    def _serves(spare: tuple, wanted: tuple) -> bool:
        # a worker with ml_dtypes serves every kernel; one without, only kernels without bf16
        return spare[:2] == wanted[:2] and (spare[2] or not wanted[2])

    def _spawn(self, key: tuple, env: dict, memory_limit_mb, ml_dtypes: bool) -> None:
        st = _new_state()
        try:
            st.worker = _Worker(st.dir, 0, env, memory_limit_mb, ml_dtypes)
        except BaseException:
            st.cleanup()
            raise
        self.started += 1
        self._spares.append((key, st))

    def _sweep(self, key: tuple) -> Optional[_State]:
        """Keep the live spares that serve ``key`` (stop the others); pop and return one."""
        got, keep = None, []
        for k, st in self._spares:
            alive = st.worker is not None and st.worker.p.poll() is None
            if alive and self._serves(k, key):
                if got is None:
                    got = st
                else:
                    keep.append((k, st))
            else:
                st.cleanup()
        self._spares = keep
        return got

    def warm(self, *, threads: Optional[int] = None, memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB,
             ml_dtypes: bool = True, count: int = 1) -> None:
        """Start workers now, until ``count`` live spares wait for sessions with these
        parameters (those of :class:`KernelSession`; ``ml_dtypes``: see
        :func:`needs_ml_dtypes`). Spares started for other parameters are stopped."""
        if self._closed:
            raise ValueError("the worker pool is closed")
        _install_handlers()
        env = _worker_env(threads)
        key = self._key(env, memory_limit_mb, ml_dtypes)
        got = self._sweep(key)
        if got is not None:
            self._spares.insert(0, (key, got))
        while len(self._spares) < max(1, int(count)):
            self._spawn(key, env, memory_limit_mb, ml_dtypes)

    def take(self, env: dict, memory_limit_mb, ml_dtypes: bool = True) -> Optional[_State]:
        """A started worker for these parameters (or None), and start the next spares."""
        if self._closed:
            return None
        key = self._key(env, memory_limit_mb, ml_dtypes)
        got = self._sweep(key)
        while len(self._spares) < self.size:
            self._spawn(key, env, memory_limit_mb, ml_dtypes)
        return got

    def spare_pids(self) -> list:
        return [st.worker.p.pid for _, st in self._spares if st.worker is not None]

    def close(self) -> None:
        self._closed = True
        spares, self._spares = self._spares, []
        for _, st in spares:
            st.cleanup()

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- the session ------------------------------------------------------------------------

class KernelSession:
    """One kernel, built once in a sandboxed worker, serving runs and timings.

    ``timeout`` bounds every request unless the request gives its own, and the start-up
    plus build unless ``build_timeout`` is given. Use as a context manager, or call
    :meth:`close`."""

    def __init__(self, source: str, *, kernel: Optional[str] = None, target="llvm", threads: Optional[int] = None,
                 timeout: float = 120.0, memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB, file: str = "<input>",
                 cuda_arch: str = "sm_90", poison_intermediates: bool = False,
                 build_timeout: Optional[float] = None, pool: Optional["WorkerPool"] = None):
        self.source = source
        self.kernel = kernel
        self.target = target
        self.threads = threads
        self.timeout = float(timeout)
        self.build_timeout = self.timeout if build_timeout is None else float(build_timeout)
        self.memory_limit_mb = memory_limit_mb
        self.file = file
        self.cuda_arch = cuda_arch
        self.poison_intermediates = bool(poison_intermediates)
        self.builds = 0  # successful builds (1 unless a crash forced a restart)
        self.requests = 0
        self.startup_s: Optional[float] = None  # spawn -> built (TVM import + check + build), last worker
        self._ready: Optional[dict] = None  # the build reply of the live worker
        self._last_ready: Optional[dict] = None
        self._failure: Optional[tuple[str, str]] = None
        self._building: Optional[str] = None
        self._deadline: Optional[float] = None
        self._gen = 0
        self._closed = False
        self._lock = threading.RLock()
        self.pool = pool
        self._ml_dtypes = needs_ml_dtypes(source)
        _install_handlers()
        st = pool.take(self._env(), self.memory_limit_mb, self._ml_dtypes) if pool is not None else None
        # a worker started elsewhere may have died before our build began (killed while it
        # imported TVM): that says nothing about this kernel, so it is replaced once
        self._adopted = st is not None
        self._state = st if st is not None else _new_state()
        self._finalizer = weakref.finalize(self, _State.cleanup, self._state)
        try:
            if self._state.worker is not None:
                self._send_build()  # a started worker from the pool: TVM is imported already
            else:
                self._start()
        except BaseException:
            self.close()
            raise

    # -- life cycle -----------------------------------------------------------------
    def __enter__(self) -> "KernelSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker and remove the session directory (idempotent)."""
        if self._closed:
            return
        self._closed = True
        w, self._state.worker = self._state.worker, None
        if w is not None:
            # the worker holds nothing worth a clean exit, and tearing down TVM takes ~1 s
            w.kill()
        self._finalizer()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def directory(self) -> str:
        return self._state.dir

    @property
    def worker_pid(self) -> Optional[int]:
        """Process id of the live worker (None between a lost worker and its restart)."""
        w = self._state.worker
        return None if w is None else w.p.pid

    def _env(self) -> dict:
        return _worker_env(self.threads)

    def _start(self) -> None:
        self._gen += 1
        self._state.worker = _Worker(self._state.dir, self._gen, self._env(), self.memory_limit_mb, self._ml_dtypes)
        self._send_build()

    def _send_build(self) -> None:
        w = self._state.worker
        self._ready = None
        self._building = None
        self._deadline = time.monotonic() + self.build_timeout
        self._spawned_at = time.time()
        w.send({"op": "build", "source": self.source, "file": self.file, "kernel": self.kernel,
                "target": self.target.to_json() if isinstance(self.target, Target) else self.target,
                "cuda_arch": self.cuda_arch,
                "poison_intermediates": self.poison_intermediates})

    def _drop_worker(self) -> None:
        w, self._state.worker = self._state.worker, None
        if w is not None:
            w.kill()
        self._ready = None

    def _what_building(self) -> str:
        if self._building:
            return f"building kernel '{self._building}'"
        return "the worker (before building)"

    def _ensure(self, restart: bool = True) -> Optional[tuple[str, str]]:
        """None when a built worker is ready, else the (error, kind) of the failed build.
        With ``restart=False`` a worker lost to a failed request is not replaced."""
        if self._closed:
            raise ValueError("the kernel session is closed")
        if self._failure is not None:
            return self._failure
        if self._state.worker is None:
            if not restart:
                return None
            self._start()
        if self._ready is not None:
            return None
        w = self._state.worker
        while True:
            msg = w.recv(self._deadline)
            if msg is _TIMEOUT:
                self._drop_worker()
                self._failure = (f"{self._what_building()} did not finish within {self.build_timeout:g} s "
                                 f"(worker killed)", "timeout")
                return self._failure
            if msg is _EOF:
                rc = w.returncode()
                if self._adopted and self._building is None:
                    self._adopted = False
                    self._drop_worker()
                    self._start()
                    w = self._state.worker
                    continue
                self._failure = classify_exit(rc, tail(w.err_path), self._what_building())
                self._drop_worker()
                return self._failure
            if msg.get("event") == "building":
                self._building = msg.get("kernel")
                continue
            if msg.get("ok"):
                self._adopted = False
                self._ready = msg
                self._last_ready = msg
                # measured by the worker's clock, so a parent busy elsewhere does not inflate it
                self.startup_s = max(0.0, float(msg.get("ready_at", time.time())) - self._spawned_at)
                self.builds += 1
                return None
            self._failure = (str(msg.get("error")), str(msg.get("error_kind") or "build"))
            self._drop_worker()
            return self._failure

    # -- facts ----------------------------------------------------------------------
    # These wait for the build in progress but never start a new worker.
    @property
    def build_failure(self) -> Optional[tuple[str, str]]:
        """(error, error_kind) if the kernel cannot be built."""
        return self._ensure(restart=False)

    @property
    def build_s(self) -> Optional[float]:
        """Seconds the last successful build took inside the worker; None if none did."""
        self._ensure(restart=False)
        return None if self._last_ready is None else float(self._last_ready["build_s"])

    @property
    def kernel_name(self) -> Optional[str]:
        self._ensure(restart=False)
        return self.kernel if self._last_ready is None else self._last_ready["kernel"]

    @property
    def diagnostics(self) -> list:
        self._ensure(restart=False)
        return [] if self._last_ready is None else list(self._last_ready.get("diagnostics", []))

    # -- requests -------------------------------------------------------------------
    def _request(self, msg: dict, timeout: Optional[float]):
        """Send one request; (reply dict, None) or (None, (error, kind))."""
        w = self._state.worker
        self.requests += 1
        limit = self.timeout if timeout is None else float(timeout)
        what = f"kernel '{self._ready['kernel']}'"
        if not w.send(msg):
            rc = w.returncode()
            fail = classify_exit(rc, tail(w.err_path), what)
            self._drop_worker()
            return None, fail
        deadline = time.monotonic() + limit
        while True:
            rep = w.recv(deadline)
            if rep is _TIMEOUT:
                self._drop_worker()
                return None, (f"{what} did not finish within {limit:g} s (worker killed)", "timeout")
            if rep is _EOF:
                rc = w.returncode()
                fail = classify_exit(rc, tail(w.err_path), what)
                self._drop_worker()
                return None, fail
            if rep.get("id") != msg["id"]:
                continue
            if not rep.get("ok") and rep.get("error_kind") == "memory":
                # the worker leaves after a MemoryError; after a TVM allocation failure its
                # heap is suspect: start afresh next time either way
                self._drop_worker()
            return rep, None

    def _save(self, name: str, a) -> str:
        path = os.path.join(self._state.dir, name)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            np.save(f, np.asarray(a, order="C"), allow_pickle=False)
        os.replace(tmp, path)
        return name

    def _load(self, name: str):
        # a private copy-on-write mapping: no read copy, the data outlives the file's
        # removal, and writes by the caller stay in this process
        a = np.load(os.path.join(self._state.dir, name), allow_pickle=False, mmap_mode="c")
        return a.view(np.ndarray)

    def _remove(self, prefix: str) -> None:
        d = self._state.dir
        # stale request files only cost space: a directory already removed is fine
        with contextlib.suppress(OSError):
            for fn in os.listdir(d):
                if fn.startswith(prefix):
                    os.unlink(os.path.join(d, fn))

    def run(self, inputs: dict, outputs: dict, *, timeout: Optional[float] = None) -> RunResult:
        """Run the kernel once. ``outputs`` are the initial output arrays. Returns the
        outputs and the inputs as they are after the run (an input the kernel did not change
        comes back as a read-only view of the array passed in)."""
        with self._lock:  # one worker, one request at a time
            return self._run(inputs, outputs, timeout)

    def _run(self, inputs: dict, outputs: dict, timeout: Optional[float]) -> RunResult:
        fail = self._ensure()
        if fail is not None:
            return RunResult(False, error=fail[0], error_kind=fail[1])
        rid = self.requests
        prefix = f"r{rid}."
        try:
            in_names = self._ready["inputs"]
            out_names = self._ready["outputs"]
            arrays_in = {n: np.asarray(inputs[n]) for n in in_names if n in inputs}
            files_in = {n: self._save(f"{prefix}in.{i}.npy", arrays_in[n]) for i, n in enumerate(in_names)
                        if n in arrays_in}
            files_out = {n: self._save(f"{prefix}out.{i}.npy", outputs[n]) for i, n in enumerate(out_names)
                         if n in outputs}
        except (OSError, ValueError, TypeError) as e:
            self._remove(prefix)
            return RunResult(False, error=f"cannot pass the arrays to the worker: {e}", error_kind="runtime")
        try:
            rep, fail = self._request({"op": "run", "id": rid, "inputs": files_in, "outputs": files_out}, timeout)
            if fail is not None:
                return RunResult(False, error=fail[0], error_kind=fail[1])
            if not rep.get("ok"):
                return RunResult(False, error=rep.get("error"), error_kind=rep.get("error_kind"))
            outs = {n: _like(self._load(fn), outputs.get(n)) for n, fn in rep["outputs"].items()}
            changed = rep.get("inputs_changed", {})
            after = {n: (_like(self._load(changed[n]), a) if n in changed else _readonly(a))
                     for n, a in arrays_in.items()}
        except (OSError, ValueError) as e:
            return RunResult(False, error=f"cannot read the worker's results: {e}", error_kind="runtime")
        finally:
            if self._state.dir:
                self._remove(prefix)
        r = self._ready
        return RunResult(True, outs, after, None, None, r.get("build_s"), rep.get("run_s"), rep.get("threads"),
                         list(r.get("diagnostics", [])))

    def time(self, input_sets: list, warmup: int = 3, repeat: int = 10, min_repeat_ms: float = 50.0, *,
             timeout: Optional[float] = None) -> TimingResult:
        """Median of ``repeat`` measurements over rotating input sets (protocol of
        :func:`leirc.lower.runner.time_kernel`)."""
        if not input_sets:
            raise ValueError("timing needs at least one input set")
        with self._lock:
            return self._time(input_sets, warmup, repeat, min_repeat_ms, timeout)

    def _time(self, input_sets, warmup, repeat, min_repeat_ms, timeout) -> TimingResult:
        tname = target_name(self.target)
        fail = self._ensure()
        if fail is not None:
            return TimingResult(False, target=tname, threads=self.threads, error=fail[0], error_kind=fail[1])
        rid = self.requests
        prefix = f"r{rid}."
        in_names = self._ready["inputs"]
        try:
            sets = []
            for k, s in enumerate(input_sets):
                sets.append({n: self._save(f"{prefix}set{k}.{i}.npy", np.asarray(s[n]))
                             for i, n in enumerate(in_names) if n in s})
        except (OSError, ValueError, TypeError) as e:
            self._remove(prefix)
            return TimingResult(False, target=tname, threads=self.threads,
                                error=f"cannot pass the arrays to the worker: {e}", error_kind="runtime")
        wait_for_quiet(exclude=(self.worker_pid,))
        try:
            rep, fail = self._request({"op": "time", "id": rid, "sets": sets, "warmup": int(warmup),
                                       "repeat": int(repeat), "min_repeat_ms": float(min_repeat_ms)}, timeout)
        finally:
            if self._state.dir:
                self._remove(prefix)
        if fail is not None:
            return TimingResult(False, target=tname, threads=self.threads, error=fail[0], error_kind=fail[1])
        if not rep.get("ok"):
            return TimingResult(False, target=tname, threads=self.threads, error=rep.get("error"),
                                error_kind=rep.get("error_kind"))
        runs = [float(x) for x in rep["runs"]]
        return TimingResult(True, statistics.median(runs), min(runs), max(runs),
                            statistics.pstdev(runs) if len(runs) > 1 else 0.0, runs, rep.get("threads"),
                            self._ready.get("target", tname), number=rep.get("number"),
                            build_s=self._ready.get("build_s"))

    # -- the verifier's runner interface -----------------------------------------------
    @property
    def runner(self):
        """A callable with :func:`leirc.lower.runner.run_kernel`'s signature served by this
        session. It raises ValueError when asked for another source, kernel or target."""

        def runner(source: str, inputs: dict, outputs: dict, *, kernel: Optional[str] = None, target=None,
                   threads: Optional[int] = None, timeout: Optional[float] = None,
                   memory_limit_mb: Optional[int] = None, file: Optional[str] = None,
                   cuda_arch: Optional[str] = None) -> RunResult:
            self.check_same(source, kernel=kernel, target=target, threads=threads, memory_limit_mb=memory_limit_mb,
                            cuda_arch=cuda_arch)
            return self.run(inputs, outputs, timeout=timeout)

        runner.session = self
        return runner

    def check_same(self, source: str, *, kernel=None, target=None, threads=None, memory_limit_mb=None,
                   cuda_arch=None) -> None:
        """Raise ValueError unless a request for these parameters can be served here."""
        if source != self.source:
            raise ValueError("this kernel session serves another source text")
        if kernel is not None and kernel != self.kernel:
            name = self.kernel_name
            if name is not None and kernel != name:
                raise ValueError(f"this kernel session serves kernel '{name}', not '{kernel}'")
        if target is not None and target != self.target and target_name(target) != target_name(self.target):
            raise ValueError(f"this kernel session builds for {target_name(self.target)}, not {target_name(target)}")
        if threads is not None and threads != self.threads:
            raise ValueError(f"this kernel session runs with threads={self.threads}, not {threads}")
        if memory_limit_mb is not None and memory_limit_mb != self.memory_limit_mb:
            raise ValueError(f"this kernel session has memory_limit_mb={self.memory_limit_mb}")
        if cuda_arch is not None and cuda_arch != self.cuda_arch:
            raise ValueError(f"this kernel session builds for {self.cuda_arch}, not {cuda_arch}")
