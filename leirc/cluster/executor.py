"""Where jobs run: one :class:`Executor` protocol, a local process pool and a Ray cluster.

A job is a :class:`Task`: a stable key (:func:`job_key` of the program's fingerprint, the
step and the target fingerprint), a module-level function and its arguments, and whether it
*times* (then it may run only on a node whose target fingerprint is the requested one, alone
there: see :mod:`.hostid`). Executors run tasks anywhere they like and hand back one
:class:`Outcome` per key, stamped with the node and its target fingerprint. A task's function
never writes shared state: its value comes back to the driver, the single writer of every
store, so a task that runs twice (a retry after a node died) cannot write twice.

Failures of the *job* (the function raised) are outcomes with ``ok=False`` and are not retried:
they would fail again. Failures of the *place* (a worker process or a node died, a timing task
landed on a node with another fingerprint) are retried elsewhere up to ``max_attempts`` times,
then reported as failed outcomes.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import os
import signal
import socket
import sys
import time
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Protocol

from .hostid import target_fingerprint, timer_resource

#: a place failure (a dead worker or node) is retried until a task has run this many times
MAX_ATTEMPTS = 3
#: how often a waiting driver wakes up (progress lines, Ctrl-C)
POLL_S = 0.25


class ClusterError(Exception):
    """The cluster cannot run what was asked (no Ray installed, no node can time, ...);
    the message is one line for the user."""


def job_key(program_fingerprint: str, step, target_fingerprint: str) -> str:
    """The idempotent key of a job: the same program, step and target are the same job."""
    blob = json.dumps([program_fingerprint, step, target_fingerprint], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Task:
    key: str
    fn: Callable  # a module-level function: it travels by reference to other processes
    args: tuple = ()
    times: bool = False  # measures time: only on a node of the requested target fingerprint
    cpus: int = 1  # cores it holds (a timing task holds its cores alone)
    label: str = ""  # for progress lines and error messages


@dataclass
class Outcome:
    key: str
    ok: bool
    value: Any = None
    error: Optional[str] = None
    node: str = ""  # where it ran
    fingerprint: str = ""  # that node's target fingerprint
    attempts: int = 1  # 1: the first try
    label: str = ""


class Executor(Protocol):
    #: "local (N processes)", "ray://HOST:PORT (3 nodes)", ...
    where: str
    #: place failures retried so far
    retries: int

    def submit(self, task: Task) -> None:
        """Queue ``task``; a key already queued or finished is ignored (idempotent)."""

    def as_completed(self) -> Iterator[Outcome]:
        """The outcomes of the queued tasks as they finish (tasks submitted meanwhile included)."""

    def nodes(self) -> list:
        """Names of the nodes that can run tasks now."""

    def cancel(self) -> None:
        """Stop every running task at once (Ctrl-C): nothing more comes back."""

    def close(self) -> None:
        """Release processes and connections."""


def node_name() -> str:
    """This process's node: the Ray node id (short) inside a Ray worker, else the host name."""
    ray = sys.modules.get("ray")
    if ray is not None:
        try:
            if ray.is_initialized():
                return f"{socket.gethostname()}/{ray.get_runtime_context().get_node_id()[:8]}"
        except Exception:  # noqa: BLE001 - not inside a Ray worker after all
            pass
    return socket.gethostname()


def run_task(fn: Callable, args: tuple, target: str, required: Optional[str]) -> tuple:
    """Runs in the worker: (status, value or message, node, fingerprint). ``status`` is
    ``ok``, ``error`` (the function raised: a result) or ``misplaced`` (a timing task on a
    node of another fingerprint: a place failure, retried elsewhere)."""
    fp = target_fingerprint(target)
    node = node_name()
    if required is not None and fp != required:
        return "misplaced", f"node {node} has target fingerprint {fp[:12]}, the timing needs {required[:12]}", node, fp
    try:
        return "ok", fn(*args), node, fp
    except Exception as e:  # noqa: BLE001 - the job's own failure is its result
        return "error", f"{type(e).__name__}: {e}"[:2000], node, fp


def _init_local_worker() -> None:
    # Ctrl-C belongs to the driver, which decides what to keep and stops the workers itself
    # (a worker interrupted inside a build took a minute to wind down); stdout is the
    # driver's progress line
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.stdout = sys.stderr


class LocalExecutor:
    """Today's local path: ``workers`` spawned processes on this machine (0: run each task in
    this process, in submission order). A dead worker process breaks the whole pool, and which
    task killed it is unknown, so every unfinished task counts one attempt and runs again."""

    def __init__(self, workers: int = 1, *, target: str = "llvm", max_attempts: int = MAX_ATTEMPTS):
        self.workers = workers
        self.target = target
        self.max_attempts = max_attempts
        self.fingerprint = target_fingerprint(target)
        self.where = f"local ({workers} process{'es' if workers != 1 else ''})" if workers else "local (in process)"
        self.retries = 0
        self._tasks: dict = {}  # key -> Task, queued or running
        self._seen: set = set()
        self._attempts: dict = {}
        self._futures: dict = {}  # future -> key
        self._pool: Optional[cf.ProcessPoolExecutor] = None

    def nodes(self) -> list:
        return [node_name()]

    def submit(self, task: Task) -> None:
        if task.key in self._seen:
            return
        self._seen.add(task.key)
        self._tasks[task.key] = task
        self._attempts[task.key] = 0

    def _start(self, task: Task) -> None:
        if self._pool is None:
            import multiprocessing as mp

            self._pool = cf.ProcessPoolExecutor(max_workers=self.workers, mp_context=mp.get_context("spawn"),
                                                initializer=_init_local_worker)
        self._attempts[task.key] += 1
        fut = self._pool.submit(run_task, task.fn, task.args, self.target, None)
        self._futures[fut] = task.key

    def _outcome(self, key: str, res: tuple) -> Outcome:
        task = self._tasks.pop(key)
        status, value, node, fp = res
        ok = status == "ok"
        return Outcome(key, ok, value if ok else None, None if ok else value, node, fp, self._attempts[key], task.label)

    def as_completed(self) -> Iterator[Outcome]:
        if self.workers <= 0:
            while self._tasks:
                key, task = next(iter(self._tasks.items()))
                self._attempts[key] += 1
                yield self._outcome(key, run_task(task.fn, task.args, self.target, None))
            return
        while self._tasks:
            running = set(self._futures.values())
            for key, task in list(self._tasks.items()):
                if key not in running:
                    self._start(task)
            done, _ = cf.wait(list(self._futures), timeout=POLL_S, return_when=cf.FIRST_COMPLETED)
            broken = False
            for fut in done:
                key = self._futures.pop(fut)
                try:
                    res = fut.result()
                except BrokenProcessPool:
                    broken = True
                    self._futures[fut] = key  # still unfinished: handled below with the others
                    continue
                yield self._outcome(key, res)
            if broken:
                yield from self._after_broken_pool()

    def _after_broken_pool(self) -> Iterator[Outcome]:
        keys = list(self._futures.values())
        self._futures.clear()
        self._stop_pool()
        for key in keys:
            if self._attempts[key] >= self.max_attempts:
                task = self._tasks.pop(key)
                yield Outcome(key, False, None, f"the worker process died on it {self._attempts[key]} times",
                              node_name(), self.fingerprint, self._attempts[key], task.label)
            else:
                self.retries += 1

    def _stop_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:  # SIGTERM: a worker's sessions kill their own process groups on the way out
            if p.is_alive():
                p.terminate()
        deadline = time.monotonic() + 3.0
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(1.0)

    def cancel(self) -> None:
        self._tasks.clear()
        self._futures.clear()
        self._stop_pool()

    def close(self) -> None:
        self._stop_pool()


def _ray():
    try:
        import ray
    except ImportError:
        raise ClusterError("--cluster needs Ray: install the extra with pip install 'leirc[cluster]'") from None
    return ray


class RayExecutor:
    """Tasks on a Ray cluster. ``address``: ``local`` (start a one-node cluster in this
    process), ``auto`` (the cluster this machine belongs to), ``ray://HOST:PORT`` (a Ray
    client server) or ``HOST:PORT`` (the head's GCS). Builds and verification run on any
    node; a timing task asks for one unit of :func:`~.hostid.timer_resource` of the
    requested fingerprint (each timing node offers one: one timing at a time there) and
    ``cpus`` cores, and checks the fingerprint again where it lands. Ray's own retries are
    off: a task lost with its worker or node is resubmitted here, counted, up to
    ``max_attempts`` runs."""

    def __init__(self, address: str, *, target: str = "llvm", workers: Optional[int] = None,
                 timing_fingerprint: Optional[str] = None, max_attempts: int = MAX_ATTEMPTS):
        ray = _ray()
        self.ray = ray
        self.target = target
        self.max_attempts = max_attempts
        self.fingerprint = timing_fingerprint or target_fingerprint(target)
        self.resource = timer_resource(self.fingerprint)
        self.retries = 0
        self._owns = not ray.is_initialized()
        quiet = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR", configure_logging=False)
        if self._owns:
            _reachable(address)
            try:
                if address == "local":
                    # this node times for its own fingerprint
                    ray.init(num_cpus=workers or None, resources={timer_resource(target_fingerprint(target)): 1},
                             **quiet)
                else:
                    ray.init(address=address, **{k: v for k, v in quiet.items() if k != "include_dashboard"})
            except Exception as e:  # noqa: BLE001 - unreachable address, version mismatch: one line
                raise ClusterError(f"cannot connect to the Ray cluster at {address}: {str(e).splitlines()[0]}") \
                    from None
        self.address = address
        self._remote = ray.remote(run_task)
        self._tasks: dict = {}
        self._seen: set = set()
        self._attempts: dict = {}
        self._refs: dict = {}  # ObjectRef -> key
        n = len(self.nodes())
        self.where = f"ray {address} ({n} node{'s' if n != 1 else ''})"

    def nodes(self) -> list:
        return [n["NodeID"][:8] for n in self.ray.nodes() if n.get("Alive")]

    def timing_nodes(self) -> int:
        return sum(1 for n in self.ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(self.resource))

    def submit(self, task: Task) -> None:
        if task.key in self._seen:
            return
        if task.times and not self.timing_nodes():
            raise ClusterError(
                f"no node of the cluster can time for target fingerprint {self.fingerprint[:16]}: start the nodes "
                f"whose CPU matches with ray start ... --resources '{json.dumps({self.resource: 1})}' "
                "(python -m leirc.cluster resources prints it), or run without timing")
        self._seen.add(task.key)
        self._tasks[task.key] = task
        self._attempts[task.key] = 0
        self._start(task)

    def _start(self, task: Task) -> None:
        self._attempts[task.key] += 1
        opts = {"num_cpus": task.cpus, "max_retries": 0, "name": task.label or task.key}
        if task.times:
            opts["resources"] = {self.resource: 1}
        ref = self._remote.options(**opts).remote(task.fn, task.args, self.target,
                                                  self.fingerprint if task.times else None)
        self._refs[ref] = task.key

    def _retry_or_fail(self, key: str, why: str) -> Optional[Outcome]:
        task = self._tasks[key]
        if task.times and not self.timing_nodes():
            # the last timing node died: Ray would hold the retry forever as infeasible
            del self._tasks[key]
            return Outcome(key, False, None, f"{why}; no node left that can time for target fingerprint "
                           f"{self.fingerprint[:16]}", "", "", self._attempts[key], task.label)
        if self._attempts[key] >= self.max_attempts:
            del self._tasks[key]
            return Outcome(key, False, None, f"{why} ({self._attempts[key]} attempts)", "", "",
                           self._attempts[key], task.label)
        self.retries += 1
        self._start(task)
        return None

    def as_completed(self) -> Iterator[Outcome]:
        ray = self.ray
        checked = time.monotonic()
        while self._refs:
            ready, _ = ray.wait(list(self._refs), num_returns=1, timeout=POLL_S)
            if not ready and time.monotonic() - checked > 10.0:
                checked = time.monotonic()
                yield from self._orphaned_timings()
            for ref in ready:
                key = self._refs.pop(ref)
                try:
                    status, value, node, fp = ray.get(ref)
                except ray.exceptions.TaskCancelledError:
                    continue
                except ray.exceptions.RayError as e:  # the worker or its node died: the place failed
                    out = self._retry_or_fail(key, f"lost with its worker or node: {type(e).__name__}")
                    if out is not None:
                        yield out
                    continue
                if status == "misplaced":
                    out = self._retry_or_fail(key, value)
                    if out is not None:
                        yield out
                    continue
                task = self._tasks.pop(key)
                ok = status == "ok"
                yield Outcome(key, ok, value if ok else None, None if ok else value, node, fp,
                              self._attempts[key], task.label)

    def _orphaned_timings(self) -> Iterator[Outcome]:
        """Queued timing tasks when no timing node is left: Ray would keep them forever."""
        if self.timing_nodes():
            return
        for ref, key in list(self._refs.items()):
            task = self._tasks[key]
            if not task.times:
                continue
            del self._refs[ref], self._tasks[key]
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - it never started
                pass
            yield Outcome(key, False, None, f"no node left that can time for target fingerprint "
                          f"{self.fingerprint[:16]}", "", "", self._attempts[key], task.label)

    def cancel(self) -> None:
        for ref in list(self._refs):
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - already finished or its node is gone
                pass
        self._refs.clear()
        self._tasks.clear()

    def close(self) -> None:
        if self._owns and self.ray.is_initialized():
            self.ray.shutdown()


def open_executor(cluster: Optional[str], *, workers: int = 1, target: str = "llvm",
                  timing_fingerprint: Optional[str] = None) -> "Executor":
    """``cluster`` None: the local process pool; otherwise Ray at that address (``local``,
    ``auto``, ``ray://HOST:PORT``, ``HOST:PORT``). Raises :class:`ClusterError`."""
    if not cluster:
        return LocalExecutor(workers, target=target)
    check_address(cluster)
    return RayExecutor(cluster, target=target, workers=workers if cluster == "local" and workers > 0 else None,
                       timing_fingerprint=timing_fingerprint)


def _reachable(address: str, timeout: float = 5.0) -> None:
    """Refuse an address nothing listens on at once: Ray itself retries a dead GCS for
    minutes. ``auto`` is checked at the address Ray would pick (``RAY_ADDRESS``, or the
    cluster this machine's last ``ray start`` recorded) when one is known."""
    if address == "local":
        return
    target = address
    if address == "auto":
        target = os.environ.get("RAY_ADDRESS", "")
        if not target:
            try:
                with open(os.path.join(os.environ.get("RAY_TMPDIR", "/tmp"), "ray", "ray_current_cluster"),
                          encoding="utf-8") as f:
                    target = f.read().strip()
            except OSError:
                raise ClusterError("--cluster auto: this machine has joined no Ray cluster (start one with "
                                   "ray start --head, or name its address)") from None
    host, _, port = target.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # a form Ray resolves itself
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise ClusterError(f"cannot reach the Ray cluster at {address}"
                           f"{'' if target == address else f' ({target})'}: {e.strerror or e}") from None


def check_address(cluster: str) -> None:
    """Refuse a ``--cluster`` value that is no Ray address before any work (ClusterError)."""
    host, _, port = cluster.removeprefix("ray://").rpartition(":")
    if cluster in ("local", "auto") or (host and port.isdigit() and " " not in cluster):
        return
    raise ClusterError(f"--cluster expects local, auto, ray://HOST:PORT or HOST:PORT, got {cluster!r}")


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


__all__ = ["Task", "Outcome", "Executor", "LocalExecutor", "RayExecutor", "ClusterError", "job_key", "open_executor",
           "run_task", "node_name", "ray_available", "check_address", "MAX_ATTEMPTS"]
