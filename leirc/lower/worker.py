"""Worker process for :mod:`leirc.lower.runner`: ``python -m leirc.lower.worker DIR``.

Untrusted kernels run here, never in the caller: a segfault, abort, hang or runaway
allocation ends this process only. The parent prepares ``DIR``:

* ``request.json`` -- ``{"mode": "run"|"time", "source", "file", "kernel", "target",
  "cuda_arch", "n_sets", "warmup", "repeat", "min_repeat_ms", "memory_limit_mb"}``
* ``in_<k>.npz`` -- input set k (``run`` uses set 0); ``out_init.npz`` -- the initial
  output arrays (``run``; ``time`` allocates fresh zero outputs per input set)

and reads back ``result.json`` (``{"ok", "error", "error_kind", ...}``), plus
``outputs.npz`` and ``inputs_after.npz`` for ``run``. Every file is written to a
temporary name first and renamed into place, so the parent never sees half a file.

The memory limit is applied with ``RLIMIT_AS`` before TVM is imported. Threads:
the parent sets ``TVM_NUM_THREADS``; the count actually used is reported.

Test hook (used by the test suite only): ``LEIRC_WORKER_TEST_HOOK`` set to ``abort``,
``segfault``, ``hang`` or ``alloc`` makes the worker call ``os.abort()``, raise SIGSEGV,
sleep forever, or allocate memory until it fails, right before the kernel runs.
"""

from __future__ import annotations

import json
import math
import os
import resource
import signal
import sys
import time
import traceback


def _write_atomic(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _save_npz(path: str, arrays: dict) -> None:
    import io

    import numpy as np

    buf = io.BytesIO()
    np.savez(buf, **arrays)
    _write_atomic(path, buf.getvalue())


def _load_npz(path: str) -> dict:
    import numpy as np

    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _result(d: str, **kw) -> None:
    _write_atomic(os.path.join(d, "result.json"), json.dumps(kw).encode())


def _stage(d: str, stage: str, kernel: str | None = None) -> None:
    """Record what the worker is doing, so that the parent can say what crashed."""
    _write_atomic(os.path.join(d, "stage.json"), json.dumps({"stage": stage, "kernel": kernel}).encode())


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
    if hook == "alloc":
        hog = []
        while True:
            hog.append(bytearray(64 << 20))


def _np_dtype(leir_dtype: str):
    import numpy as np

    if leir_dtype == "bf16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    from .tir import DTYPES

    return np.dtype(DTYPES[leir_dtype])


def _check_arrays(kernel, arrays: dict, params, what: str) -> str | None:
    for p in params:
        if p.name not in arrays:
            return f"missing {what} '{p.name}'"
        a = arrays[p.name]
        if tuple(a.shape) != tuple(p.shape):
            return f"{what} '{p.name}' has shape {list(a.shape)}, kernel '{kernel.name}' declares {list(p.shape)}"
        want = _np_dtype(p.dtype)
        if a.dtype != want:
            return f"{what} '{p.name}' has dtype {a.dtype}, kernel '{kernel.name}' declares {p.dtype} ({want})"
    return None


def main(d: str) -> int:
    with open(os.path.join(d, "request.json"), encoding="utf-8") as f:
        req = json.load(f)
    mem = req.get("memory_limit_mb")
    if mem:
        lim = int(mem) << 20
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    try:
        return _main(d, req)
    except MemoryError:
        _result(d, ok=False, error="out of memory (MemoryError) in the worker", error_kind="memory")
        return 0


def _main(d: str, req: dict) -> int:
    from ..lang.checker import check_text
    from ..lang.diagnostics import render

    file = req.get("file") or "<input>"
    cf = check_text(req["source"], file)
    source_text = cf.parse.source
    if not cf.ok:
        errs = [d_ for d_ in cf.diagnostics if d_.is_error]
        _result(d, ok=False, error="\n".join(render(x, source_text) for x in errs), error_kind="build")
        return 0
    results = cf.results
    name = req.get("kernel")
    if name is None:
        if len(results) != 1:
            _result(d, ok=False, error=f"{file} defines {len(results)} kernels; name one with kernel=",
                    error_kind="build")
            return 0
        res = results[0]
    else:
        cand = [r for r in results if r.kernel.name == name]
        if not cand:
            names = ", ".join(r.kernel.name for r in results)
            _result(d, ok=False, error=f"no kernel '{name}' in {file} (kernels: {names})", error_kind="build")
            return 0
        res = cand[0]
    kernel = res.kernel

    from . import LowerError, build

    _stage(d, "build", kernel.name)
    t0 = time.perf_counter()
    try:
        built = build(res, req.get("target", "llvm"), cuda_arch=req.get("cuda_arch", "sm_90"), file=file)
    except LowerError as e:
        _result(d, ok=False, error=render(e.diagnostic, source_text), error_kind="build")
        return 0
    build_s = time.perf_counter() - t0

    from ._tvm import tvm as _t

    tvm = _t()
    import numpy as np

    kind = built.target["kind"]
    dev = tvm.cuda(0) if kind == "cuda" else tvm.cpu(0)
    try:
        threads = int(tvm.get_global_func("runtime.NumThreads")())
    except Exception:  # noqa: BLE001
        threads = None
    try:
        func = built.jit()[built.symbol]
    except Exception as e:  # noqa: BLE001
        _result(d, ok=False, error=f"cannot load kernel '{kernel.name}': {_short(e)}", error_kind="runtime")
        return 0

    n_sets = int(req.get("n_sets", 1))
    sets = [_load_npz(os.path.join(d, f"in_{k}.npz")) for k in range(n_sets)]
    for s in sets:
        err = _check_arrays(kernel, s, kernel.inputs, "input")
        if err:
            _result(d, ok=False, error=err, error_kind="runtime")
            return 0

    if req["mode"] == "run":
        outs = _load_npz(os.path.join(d, "out_init.npz"))
        err = _check_arrays(kernel, outs, kernel.outputs, "output")
        if err:
            _result(d, ok=False, error=err, error_kind="runtime")
            return 0
        args_in = [tvm.runtime.tensor(sets[0][p.name], dev) for p in kernel.inputs]
        args_out = [tvm.runtime.tensor(outs[p.name], dev) for p in kernel.outputs]
        _stage(d, "run", kernel.name)
        _test_hook()
        t0 = time.perf_counter()
        try:
            func(*args_in, *args_out)
            dev.sync()
        except MemoryError:
            raise
        except Exception as e:  # noqa: BLE001
            msg = _short(e)
            kind_ = "memory" if _is_memory_message(msg) else "runtime"
            _result(d, ok=False, error=f"kernel '{kernel.name}' failed at run time: {msg}", error_kind=kind_)
            return 0
        run_s = time.perf_counter() - t0
        _save_npz(os.path.join(d, "outputs.npz"), {p.name: a.numpy() for p, a in zip(kernel.outputs, args_out)})
        _save_npz(os.path.join(d, "inputs_after.npz"), {p.name: a.numpy() for p, a in zip(kernel.inputs, args_in)})
        _result(d, ok=True, error=None, error_kind=None, build_s=build_s, run_s=run_s, threads=threads,
                diagnostics=[x.to_json() for x in built.diagnostics])
        return 0

    # timing
    warmup = int(req.get("warmup", 3))
    repeat = int(req.get("repeat", 10))
    min_repeat_ms = float(req.get("min_repeat_ms", 50.0))
    arg_sets = []
    for s in sets:
        ins = [tvm.runtime.tensor(s[p.name], dev) for p in kernel.inputs]
        outs = [tvm.runtime.tensor(np.zeros(p.shape, _np_dtype(p.dtype)), dev) for p in kernel.outputs]
        arg_sets.append(ins + outs)
    _stage(d, "run", kernel.name)
    _test_hook()
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
        k = 0
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(number):
                func(*arg_sets[k % len(arg_sets)])
                k += 1
            dev.sync()
            runs.append((time.perf_counter() - t0) / number * 1000.0)
    except Exception as e:  # noqa: BLE001
        msg = _short(e)
        _result(d, ok=False, error=f"kernel '{kernel.name}' failed at run time: {msg}",
                error_kind="memory" if _is_memory_message(msg) else "runtime")
        return 0
    _result(d, ok=True, error=None, error_kind=None, runs=runs, number=number, threads=threads, target=kind,
            build_s=build_s)
    return 0


def _short(e: BaseException) -> str:
    from .tir import _tvm_message

    return _tvm_message(e)


def _is_memory_message(msg: str) -> bool:
    m = msg.lower()
    return any(s in m for s in ("out of memory", "cannot allocate", "bad_alloc", "allocation fail", "alloc failed",
                                "failed to allocate", "memoryerror"))


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1]))
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001 - report, never hide
        traceback.print_exc()
        sys.exit(3)
