"""Devices: where compiled kernels run. The one door to execution for everything above
``leirc/lower`` (``tests/test_layers.py`` refuses imports of ``lower.session``,
``lower.runner``, ``lower.rpc`` or ``lower.worker`` from outside this package).

A :class:`Device` opens sessions: one kernel built once and served (run, time) until closed.

* :class:`LocalDevice` -- sandboxed worker processes on this machine
  (:class:`KernelSession`), for a :class:`leirc.target.Target` (the host's by default),
  optionally drawing started workers from a :class:`WorkerPool`.
* :class:`RemoteDevice` -- a server that TVM's RPC tracker hands out for a key
  (:class:`RemoteSession`: built here, run and timed there).

The engine's :class:`leirc.engine.evaluate.Evaluator` takes a device and opens one
:class:`~leirc.engine.evaluate.Candidate` per program through it; clients that only need
to run a trusted, already-built library use :func:`load_library`.
"""

from __future__ import annotations

from typing import Optional, Protocol

from ..target import Target, target_of
from .rpc import RemoteDevice, RemoteSession, RemoteTimer, RPCError, parse_address
from .runner import (Library, RunResult, TimingResult, TorchCall, device_available, load_library, make_inputs,
                     run_kernel, time_kernel, tvm_threads, zero_outputs)
from .session import (DEFAULT_MEMORY_LIMIT_MB, POOL_SPIN_COUNT, KernelSession, WorkerPool, classify_exit,
                      needs_ml_dtypes, target_name, wait_for_quiet)

__all__ = [
    "Device", "LocalDevice", "RemoteDevice", "KernelSession", "RemoteSession", "RemoteTimer", "WorkerPool",
    "RunResult", "TimingResult", "Library", "TorchCall", "RPCError", "DEFAULT_MEMORY_LIMIT_MB", "POOL_SPIN_COUNT",
    "classify_exit", "device_available", "load_library", "make_inputs", "needs_ml_dtypes", "parse_address",
    "run_kernel", "target_name", "time_kernel", "tvm_threads", "wait_for_quiet", "zero_outputs",
]


class Device(Protocol):
    """Where sessions run. ``where``: ``local`` or ``rpc://HOST:PORT/KEY``."""

    where: str

    def open(self, source: str, *, kernel: Optional[str] = None, target=None, threads: Optional[int] = None,
             timeout: float = 120.0, memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB,
             poison_intermediates: bool = False, build_timeout: Optional[float] = None, pool=None): ...


class LocalDevice:
    """This machine: one sandboxed worker process per session (see
    :class:`KernelSession`), built for ``target`` (default: the host as the OS describes it)."""

    where = "local"

    def __init__(self, target=None):
        self.target: Target = target_of(target)

    def open(self, source: str, *, kernel: Optional[str] = None, target=None, threads: Optional[int] = None,
             timeout: float = 120.0, memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB,
             poison_intermediates: bool = False, build_timeout: Optional[float] = None,
             pool: Optional[WorkerPool] = None) -> KernelSession:
        return KernelSession(source, kernel=kernel, target=self.target if target is None else target,
                             threads=threads, timeout=timeout, memory_limit_mb=memory_limit_mb,
                             poison_intermediates=poison_intermediates, build_timeout=build_timeout, pool=pool)
