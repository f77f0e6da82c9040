"""Worker process of :class:`leirc.lower.session.KernelSession`:
``python -m leirc.lower.worker --serve DIR --reply-fd FD [--memory-limit-mb N]``.

Untrusted kernels run here, never in the caller: a segfault, abort, hang or runaway
allocation ends this process only. One worker builds one kernel once and then serves any
number of requests.

Protocol. The parent writes one JSON object per line to the worker's stdin; the worker
answers with one JSON line per request on the pipe ``FD`` (stdout and stderr go to a file
the parent reads when the worker dies, so native output cannot corrupt the protocol):

* ``{"op": "build", "source", "file", "kernel", "target", "cuda_arch",
  "poison_intermediates"}`` -- first message. The worker replies
  ``{"event": "building", "kernel"}`` before compiling (so that a crash can be attributed)
  and then ``{"ok": true, "kernel", "build_s", "threads", "diagnostics", "inputs",
  "outputs"}`` or ``{"ok": false, "error", "error_kind": "build"}`` (and exits).
* ``{"op": "run", "id", "inputs": {name: file}, "outputs": {name: file}}`` -- arrays are
  ``.npy`` files in ``DIR``, written by the parent before the line is sent. The reply names
  the files holding the outputs (``"outputs"``: on the CPU the request's own output files,
  which the kernel wrote in place) and, only for inputs the kernel changed, their contents
  after the run (``"inputs_changed"``): the parent already holds the unchanged ones.
* ``{"op": "time", "id", "sets": [{name: file}, ...], "warmup", "repeat",
  "min_repeat_ms"}`` -- the timing protocol of :func:`leirc.lower.runner.time_kernel`.
* ``{"op": "quit"}``. End of stdin without ``quit`` means the parent died: the worker
  removes ``DIR`` (if it is a session directory) and exits.

Every reply to a request is sent after its files are complete, so the parent never sees
half a file. ``RLIMIT_AS`` (``--memory-limit-mb``) is applied before TVM is imported; TVM is
imported while the parent is still preparing the first request. Threads: the parent sets
``TVM_NUM_THREADS``; the count the runtime reports is returned.

Environment hooks: ``LEIRC_WORKER_TEST_HOOK`` (test suite only) set to ``abort``,
``segfault``, ``hang``, ``sleep:SECONDS`` or ``alloc`` makes the worker call ``os.abort()``, raise
SIGSEGV, sleep forever, sleep that long, or allocate memory until it fails, right before each
kernel call;
``mutate`` changes the first element of the first input after each run.
``LEIRC_WORKER_BUILD_LOG=PATH`` appends one line per build to PATH (used by the tests and
``benchmarks/bench_evaluate.py`` to count builds).
"""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import signal
import sys
import time
import traceback

SESSION_DIR_PREFIX = "leirc-session-"
#: wall-clock moments of this worker's start-up, reported with the build (profiling)
_STAMPS: dict = {}
#: whether TVM was imported with ml_dtypes (see _import_tvm)
_TVM_HAS_ML_DTYPES = True


def _test_hook() -> None:
    hook = os.environ.get("LEIRC_WORKER_TEST_HOOK")
    if not hook:
        return
    if hook == "abort":
        os.abort()
    if hook == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if hook == "hang":
        while True:
            time.sleep(3600)
    if hook.startswith("sleep:"):  # a slow kernel: keeps a long command running for signal tests
        time.sleep(float(hook.split(":", 1)[1]))
    if hook == "alloc":
        hog = []
        while True:
            hog.append(bytearray(64 << 20))


def _mutate(t) -> None:
    """The ``mutate`` hook: change one element of an input tensor, as a kernel writing
    through an input pointer would (the checker rejects such kernels before they get here)."""
    a = t.numpy()
    flat = a.reshape(-1)
    if flat.size:
        flat[0] = not flat[0] if a.dtype == bool else flat[0] + 1
        t.copyfrom(a)


def np_dtype(leir_dtype: str):
    """The NumPy dtype of a LEIR dtype (the interpreter's table: one vocabulary)."""
    from ..interp.dtypes import np_dtype as interp_np_dtype

    return interp_np_dtype(leir_dtype)




def _as_declared(arrays: dict, params) -> dict:
    """``.npy`` has no bfloat16: such an array arrives as raw 2-byte voids (``|V2``); view
    it as the dtype the kernel declares."""
    for p in params:
        a = arrays.get(p.name)
        if a is not None and a.dtype.kind == "V":
            want = np_dtype(p.dtype)
            if want.itemsize == a.dtype.itemsize:
                arrays[p.name] = a.view(want)
    return arrays


def _check_arrays(kernel, arrays: dict, params, what: str) -> str | None:
    for p in params:
        if p.name not in arrays:
            return f"missing {what} '{p.name}'"
        a = arrays[p.name]
        if tuple(a.shape) != tuple(p.shape):
            return f"{what} '{p.name}' has shape {list(a.shape)}, kernel '{kernel.name}' declares {list(p.shape)}"
        want = np_dtype(p.dtype)
        if a.dtype != want:
            return f"{what} '{p.name}' has dtype {a.dtype}, kernel '{kernel.name}' declares {p.dtype} ({want})"
    return None


def _short(e: BaseException) -> str:
    from .tir import tvm_message

    return tvm_message(e)


def _is_memory_message(msg: str) -> bool:
    m = msg.lower()
    return any(s in m for s in ("out of memory", "cannot allocate", "bad_alloc", "allocation fail", "alloc failed",
                                "failed to allocate", "memoryerror"))


def _save_npy(path: str, a) -> None:
    import numpy as np

    # no fsync: the files only have to outlive this process's page cache, not a reboot
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        np.save(f, np.asarray(a, order="C"), allow_pickle=False)
    os.replace(tmp, path)


def _load_npy(path: str, mode: str = "r"):
    import numpy as np

    # mapped, not read: at most one copy follows, into a TVM tensor (none on the CPU)
    return np.load(path, allow_pickle=False, mmap_mode=mode)


def _tensor_over(tvm, a):
    """A TVM tensor sharing ``a``'s memory, or None where TVM cannot take the array as it is
    (bf16 has no DLPack export; the data must be 64-byte aligned, as ``.npy`` data in a
    mapped file is)."""
    if a.dtype.name == "bfloat16":
        return None
    try:
        return tvm.runtime.from_dlpack(a)
    except Exception:  # noqa: BLE001 - any refusal means: copy instead
        return None


def _same_bits(a, b) -> bool:
    import numpy as np

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(np.array_equal(np.ascontiguousarray(a).reshape(-1).view(np.uint8),
                               np.ascontiguousarray(b).reshape(-1).view(np.uint8)))


class _Built:
    """The kernel of this worker, built once."""

    def __init__(self, kernel, func, dev, threads, cpu: bool = False):
        self.kernel = kernel
        self.func = func
        self.dev = dev
        self.threads = threads
        self.cpu = cpu  # host memory: runs read and write the request's mapped files in place


def _build(msg: dict, send) -> _Built | None:
    from ..lang.checker import check_text
    from ..lang.diagnostics import render

    def fail(error: str) -> None:
        send({"ok": False, "error": error, "error_kind": "build"})

    file = msg.get("file") or "<input>"
    cf = check_text(msg["source"], file)
    source_text = cf.parse.source
    if not cf.ok:
        fail("\n".join(render(x, source_text) for x in cf.diagnostics if x.is_error))
        return None
    results = cf.results
    name = msg.get("kernel")
    if name is None:
        if len(results) != 1:
            fail(f"{file} defines {len(results)} kernels; name one with kernel=")
            return None
        res = results[0]
    else:
        cand = [r for r in results if r.kernel.name == name]
        if not cand:
            fail(f"no kernel '{name}' in {file} (kernels: {', '.join(r.kernel.name for r in results)})")
            return None
        res = cand[0]
    kernel = res.kernel
    if not _TVM_HAS_ML_DTYPES and "bf16" in msg["source"]:
        # the parent decides from the same text (session.needs_ml_dtypes): this is a leirc bug
        fail(f"internal error: the worker for kernel '{kernel.name}' was started without ml_dtypes, "
             f"which its bf16 arrays need")
        return None

    import inspect

    from . import LowerError, build

    kw = {"cuda_arch": msg.get("cuda_arch", "sm_90"), "file": file}
    if msg.get("poison_intermediates") and "poison_intermediates" in inspect.signature(build).parameters:
        kw["poison_intermediates"] = True
    _STAMPS["checked_at"] = time.time()
    send({"event": "building", "kernel": kernel.name})
    log = os.environ.get("LEIRC_WORKER_BUILD_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            from ..lang.canonical import fingerprint  # which program: tests count builds per program

            f.write(f"{kernel.name} {os.getpid()} {fingerprint(kernel)}\n")
    t0 = time.perf_counter()
    try:
        built = build(res, msg.get("target", "llvm"), **kw)
    except LowerError as e:
        fail(render(e.diagnostic, source_text))
        return None
    build_s = time.perf_counter() - t0

    from ._tvm import tvm as _t

    tvm = _t()
    dev = tvm.cuda(0) if built.target["kind"] == "cuda" else tvm.cpu(0)
    try:
        threads = int(tvm.get_global_func("runtime.NumThreads")())
    except Exception:  # noqa: BLE001 - older runtimes lack the function
        threads = None
    try:
        func = built.jit()[built.symbol]
    except Exception as e:  # noqa: BLE001
        send({"ok": False, "error": f"cannot load kernel '{kernel.name}': {_short(e)}", "error_kind": "runtime"})
        return None
    send({"ok": True, "kernel": kernel.name, "build_s": build_s, "ready_at": time.time(), "stamps": dict(_STAMPS),
          "threads": threads, "target": built.target["kind"],
          "diagnostics": [x.to_json() for x in built.diagnostics],
          "inputs": [p.name for p in kernel.inputs], "outputs": [p.name for p in kernel.outputs]})
    return _Built(kernel, func, dev, threads, cpu=built.target["kind"] != "cuda")


def _load_set(d: str, files: dict, mode: str = "r") -> dict:
    return {name: _load_npy(os.path.join(d, fn), mode) for name, fn in files.items()}


def _run(d: str, b: _Built, msg: dict) -> dict:
    from ._tvm import tvm as _t

    tvm = _t()
    k = b.kernel
    rid = int(msg["id"])
    in_files, out_req = msg.get("inputs", {}), msg.get("outputs", {})
    # On the CPU the kernel works on the mapped request files themselves: inputs privately
    # (copy-on-write: a write by the kernel changes this process's pages, never the file,
    # so the file still holds what the parent sent), outputs shared (what the kernel wrote
    # is the result file). A run of a 6.3M-element kernel then copies nothing.
    ins = _as_declared(_load_set(d, in_files, "c" if b.cpu else "r"), k.inputs)
    err = _check_arrays(k, ins, k.inputs, "input")
    if err:
        return {"ok": False, "error": err, "error_kind": "runtime"}
    outs = _as_declared(_load_set(d, out_req, "r+" if b.cpu else "r"), k.outputs)
    err = _check_arrays(k, outs, k.outputs, "output")
    if err:
        return {"ok": False, "error": err, "error_kind": "runtime"}
    shared_in = [_tensor_over(tvm, ins[p.name]) if b.cpu else None for p in k.inputs]
    shared_out = [_tensor_over(tvm, outs[p.name]) if b.cpu else None for p in k.outputs]
    args_in = [t if t is not None else tvm.runtime.tensor(ins[p.name], b.dev) for p, t in zip(k.inputs, shared_in)]
    args_out = [t if t is not None else tvm.runtime.tensor(outs[p.name], b.dev)
                for p, t in zip(k.outputs, shared_out)]
    _test_hook()
    t0 = time.perf_counter()
    try:
        b.func(*args_in, *args_out)
        b.dev.sync()
    except MemoryError:
        raise
    except Exception as e:  # noqa: BLE001
        msg_ = _short(e)
        return {"ok": False, "error": f"kernel '{k.name}' failed at run time: {msg_}",
                "error_kind": "memory" if _is_memory_message(msg_) else "runtime"}
    run_s = time.perf_counter() - t0
    if os.environ.get("LEIRC_WORKER_TEST_HOOK") == "mutate" and args_in:
        _mutate(args_in[0])
    out_files = {}
    for i, (p, a, shared) in enumerate(zip(k.outputs, args_out, shared_out)):
        if shared is not None:
            out_files[p.name] = out_req[p.name]
            continue
        fn = f"r{rid}.result.{i}.npy"
        _save_npy(os.path.join(d, fn), a.numpy())
        out_files[p.name] = fn
    changed = {}
    for i, (p, a, shared) in enumerate(zip(k.inputs, args_in, shared_in)):
        if shared is not None:
            after, sent = ins[p.name], _load_npy(os.path.join(d, in_files[p.name])).view(ins[p.name].dtype)
        else:
            after, sent = a.numpy(), ins[p.name]
        if not _same_bits(after, sent):
            fn = f"r{rid}.after.{i}.npy"
            _save_npy(os.path.join(d, fn), after)
            changed[p.name] = fn
    return {"ok": True, "outputs": out_files, "inputs_changed": changed, "run_s": run_s, "threads": b.threads}


def _time(d: str, b: _Built, msg: dict) -> dict:
    import numpy as np

    from ._tvm import tvm as _t

    tvm = _t()
    k = b.kernel
    sets = [_as_declared(_load_set(d, s), k.inputs) for s in msg["sets"]]
    for s in sets:
        err = _check_arrays(k, s, k.inputs, "input")
        if err:
            return {"ok": False, "error": err, "error_kind": "runtime"}
    warmup = int(msg.get("warmup", 3))
    repeat = int(msg.get("repeat", 10))
    min_repeat_ms = float(msg.get("min_repeat_ms", 50.0))
    arg_sets = []
    for s in sets:
        ins = [tvm.runtime.tensor(s[p.name], b.dev) for p in k.inputs]
        outs = [tvm.runtime.tensor(np.zeros(p.shape, np_dtype(p.dtype)), b.dev) for p in k.outputs]
        arg_sets.append(ins + outs)
    _test_hook()
    func, dev = b.func, b.dev
    try:
        wt = []
        for w in range(max(warmup, 1)):
            t0 = time.perf_counter()
            func(*arg_sets[w % len(arg_sets)])
            dev.sync()
            wt.append(time.perf_counter() - t0)
        per_call = sorted(wt)[len(wt) // 2]
        number = max(1, math.ceil(min_repeat_ms / 1000.0 / max(per_call, 1e-9))) if min_repeat_ms > 0 else 1
        runs = []
        n = 0
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(number):
                func(*arg_sets[n % len(arg_sets)])
                n += 1
            dev.sync()
            runs.append((time.perf_counter() - t0) / number * 1000.0)
    except MemoryError:
        raise
    except Exception as e:  # noqa: BLE001
        msg_ = _short(e)
        return {"ok": False, "error": f"kernel '{k.name}' failed at run time: {msg_}",
                "error_kind": "memory" if _is_memory_message(msg_) else "runtime"}
    return {"ok": True, "runs": runs, "number": number, "threads": b.threads}


class ParentGone(BaseException):
    """The parent closed our stdin or its end of the reply pipe: nobody will read another
    reply or remove the session directory. A BaseException, so that the handlers that turn a
    request's failure into a reply do not catch it."""


def _import_tvm(with_ml_dtypes: bool) -> None:
    """Import TVM. ``tvm_ffi`` imports ml_dtypes when it can, and ml_dtypes registers casts
    between its ~20 dtypes at import: about 1 s of CPU, the largest single part of a
    worker's start. Only bf16 arrays need it (as ``ml_dtypes.bfloat16``), so a worker for a
    kernel without bf16 hides it during the import, as ``_tvm`` hides torch; ``import
    ml_dtypes`` works normally afterwards, but this worker's TVM cannot convert bf16 arrays."""
    from ._tvm import tvm as _t

    hide = not with_ml_dtypes and "ml_dtypes" not in sys.modules
    if hide:
        sys.modules["ml_dtypes"] = None  # type: ignore[assignment]
    try:
        _t()
    finally:
        if hide and sys.modules.get("ml_dtypes", 0) is None:
            del sys.modules["ml_dtypes"]
    global _TVM_HAS_ML_DTYPES
    _TVM_HAS_ML_DTYPES = not hide


def serve(d: str, reply_fd: int, with_ml_dtypes: bool = True) -> int:
    try:
        return _serve(d, reply_fd, with_ml_dtypes)
    except ParentGone:
        # killed without its cleanup (SIGKILL, a crash): the directory is ours to remove
        if os.path.basename(os.path.normpath(d)).startswith(SESSION_DIR_PREFIX):
            shutil.rmtree(d, ignore_errors=True)
        return 0


def messages(stream):
    """The JSON requests on ``stream``, one per line (blank lines skipped), until it ends."""
    for line in stream:
        line = line.strip()
        if line:
            yield json.loads(line)


def _serve(d: str, reply_fd: int, with_ml_dtypes: bool) -> int:
    reply = os.fdopen(reply_fd, "w", encoding="utf-8", buffering=1)

    def send(obj: dict) -> None:
        try:
            reply.write(json.dumps(obj) + "\n")
            reply.flush()
        except BrokenPipeError:
            raise ParentGone from None

    # TVM's import is the bulk of the start-up; do it before the parent's first line arrives
    _import_tvm(with_ml_dtypes)
    _STAMPS["imported_at"] = time.time()
    built = None
    for msg in messages(sys.stdin):
        op = msg.get("op")
        if op == "quit":
            return 0
        try:
            if op == "build":
                _STAMPS["build_asked_at"] = time.time()
                built = _build(msg, send)
                if built is None:
                    return 0
                continue
            if built is None:
                send({"id": msg.get("id"), "ok": False, "error": "no kernel built yet", "error_kind": "runtime"})
                continue
            if op == "run":
                res = _run(d, built, msg)
            elif op == "time":
                res = _time(d, built, msg)
            else:
                res = {"ok": False, "error": f"unknown request {op!r}", "error_kind": "runtime"}
        except MemoryError:
            # the heap may be in a poor state after a failed allocation: answer and leave
            send({"id": msg.get("id"), "ok": False, "error": "out of memory (MemoryError) in the worker",
                  "error_kind": "memory"})
            return 0
        except Exception as e:  # noqa: BLE001 - a request must never take the session down silently
            if op == "build":
                send({"ok": False, "error": f"building failed: {type(e).__name__}: {_short(e)}",
                      "error_kind": "build"})
                return 0
            res = {"ok": False, "error": f"{type(e).__name__}: {_short(e)}", "error_kind": "runtime"}
        res["id"] = msg.get("id")
        send(res)
    # stdin closed without "quit": the parent is gone and cannot clean up after us
    raise ParentGone


def main(argv: list[str]) -> int:
    _STAMPS["main_at"] = time.time()
    # the parent starts workers with its termination signals blocked (session._Worker)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGTERM, signal.SIGINT, signal.SIGHUP))
    import argparse

    ap = argparse.ArgumentParser(prog="python -m leirc.lower.worker")
    ap.add_argument("--serve", required=True, metavar="DIR")
    ap.add_argument("--reply-fd", type=int, required=True)
    ap.add_argument("--memory-limit-mb", type=int, default=0)
    ap.add_argument("--no-ml-dtypes", action="store_true",
                    help="import TVM without ml_dtypes (faster; no bf16 arrays, see _import_tvm)")
    a = ap.parse_args(argv)
    if a.memory_limit_mb:
        lim = int(a.memory_limit_mb) << 20
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    try:
        return serve(a.serve, a.reply_fd, with_ml_dtypes=not a.no_ml_dtypes)
    except MemoryError:
        # before any request could answer (e.g. importing TVM under a tiny limit)
        print("MemoryError: out of memory in the worker", file=sys.stderr)
        return 4


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001 - report, never hide
        traceback.print_exc()
        sys.exit(3)
