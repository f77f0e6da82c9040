"""MetaSchedule at a wall-clock budget: tune in a worker process, stop it at the deadline, take
the best schedule recorded so far.

    python benchmarks/search_matrix/ms_tune.py --kernel relu --work-dir WD [--threads 2]   # the worker

``tune(kernel, leir_text, work_dir, seconds)`` (the bench's side) starts that worker in its own
session with a trial count it cannot reach, kills the whole process group (MetaSchedule's
builder and runner pools included) at ``seconds``, keeps the tuning records that were fully
written, and ``load`` compiles the best of them in this process. MetaSchedule needs a
block-structured PrimFunc; leirc's -O0 lowering emits plain loops (no blocks), so the
computation is the TE version of the same kernel (``benchmarks/peers/te_kernels.py``, or
:data:`TE_EXTRA` here) with the LEIR kernel's shapes and argument order (inputs, then
outputs); the bench checks the tuned kernel's outputs against leirc's before timing it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from peers.metaschedule import builder, target  # noqa: E402 - one MetaSchedule target and builder for both benches


def _relu():
    from tvm import te, tirx

    X = te.placeholder((256, 24576), "float32", name="X")
    Y = te.compute(X.shape, lambda i, j: te.max(X[i, j], tirx.const(0.0, "float32")), name="Y")
    return [X, Y]


def _gelu():
    from tvm import te, tirx

    X = te.placeholder((256, 24576), "float32", name="X")
    Y = te.compute(X.shape, lambda i, j: tirx.const(0.5, "float32") * X[i, j] * (
        tirx.const(1.0, "float32") + te.erf(X[i, j] / tirx.const(2.0 ** 0.5, "float32"))), name="Y")
    return [X, Y]


def _reduce(kind: str):
    def build():
        from tvm import te, tirx

        X = te.placeholder((16, 512, 511), "float32", name="X")
        r = te.reduce_axis((0, 512), name="r")
        if kind == "sum":
            return [X, te.compute((16, 1, 511), lambda n, o, j: te.sum(X[n, r, j], axis=r), name="C")]
        if kind == "mean":
            S = te.compute((16, 511), lambda n, j: te.sum(X[n, r, j], axis=r), name="Sum")
            return [X, te.compute((16, 511), lambda n, j: S[n, j] / tirx.const(512.0, "float32"), name="C")]
        # the LEIR kernel starts from the zero-initialized output: max(0, max_r X)
        M = te.compute((16, 511), lambda n, j: te.max(X[n, r, j], axis=r), name="M")
        return [X, te.compute((16, 511), lambda n, j: te.max(M[n, j], tirx.const(0.0, "float32")), name="C")]
    return build


#: TE versions of stdlib kernels that ``peers/te_kernels.py`` does not have
TE_EXTRA = {"relu": _relu, "gelu": _gelu, "sum_reduce_dim1": _reduce("sum"), "mean_reduce_dim1": _reduce("mean"),
            "max_reduce_dim1": _reduce("max")}


def has_prim_func(kernel: str) -> bool:
    from peers.te_kernels import TE_KERNELS

    return kernel in TE_KERNELS or kernel in TE_EXTRA


def prim_func(kernel: str):
    """(PrimFunc, where it came from); KeyError when no TE version exists."""
    from tvm import te

    from peers import te_kernels

    if kernel in te_kernels.TE_KERNELS:
        return te_kernels.prim_func(kernel), "benchmarks/peers/te_kernels.py"
    if kernel in TE_EXTRA:
        return te.create_prim_func(TE_EXTRA[kernel]()).with_attr("global_symbol", "main"), \
            "benchmarks/search_matrix/ms_tune.py"
    raise KeyError(kernel)


def _worker(kernel: str, work_dir: str, threads: int, per_iter: int) -> int:
    import tvm
    from tvm.s_tir import meta_schedule as ms

    func, _ = prim_func(kernel)
    ms.tune_tir(tvm.IRModule({"main": func}), target(threads), work_dir=work_dir, max_trials_global=1_000_000,
                num_trials_per_iter=per_iter, cost_model="random", database="json", seed=0,
                builder=builder(),  # without the tensor-intrinsic import that timed every build out
                runner=ms.runner.LocalRunner(timeout_sec=60.0, evaluator_config=ms.runner.EvaluatorConfig(
                    number=3, repeat=3, min_repeat_ms=100)))
    return 0


def _complete_lines(path: Path) -> int:
    """Keep the lines of a JSON-lines file that parse (a killed writer may leave half a line);
    returns how many were kept."""
    if not path.exists():
        return 0
    good = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            json.loads(line)
        except ValueError:
            continue
        good.append(line)
    path.write_text("".join(x + "\n" for x in good))
    return len(good)


def tune(kernel: str, work_dir: str, seconds: float, *, threads: int = 2, per_iter: int = 16, log=print) -> dict:
    """Tune ``kernel`` for ``seconds`` of wall-clock in a worker; the summary (trials recorded,
    wall, how it ended)."""
    wd = Path(work_dir)
    wd.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TVM_NUM_THREADS=str(threads))
    t0 = time.perf_counter()
    with open(wd / "worker.log", "w") as out:
        p = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--kernel", kernel, "--work-dir", str(wd),
                              "--threads", str(threads), "--per-iter", str(per_iter)],
                             stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=seconds)
            how = f"worker exited ({rc})"
        except subprocess.TimeoutExpired:
            how = f"stopped at {seconds:.0f} s"
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the builder / runner pools too
            except ProcessLookupError:
                pass
            p.wait()
    wall = time.perf_counter() - t0
    trials = _complete_lines(wd / "database_tuning_record.json")
    _complete_lines(wd / "database_workload.json")
    summary = {"kernel": kernel, "wall_s": wall, "budget_s": seconds, "trials": trials, "ended": how,
               "threads": threads, "cost_model": "random", "seed": 0, "trials_per_iter": per_iter}
    log(f"metaschedule {kernel}: {trials} trials in {wall:.0f} s ({how})")
    return summary


def load(kernel: str, work_dir: str, threads: int = 2):
    """(runtime function, trace text, best recorded run time in ms) of the best schedule."""
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.tir_integration import compile_tir

    func, _ = prim_func(kernel)
    mod = tvm.IRModule({"main": func})
    db = ms.database.JSONDatabase(work_dir=str(work_dir))
    recs = [[float(x) for x in (r.run_secs or [])] for r in db.get_all_tuning_records()]
    valid = [sum(s) / len(s) for s in recs if s and all(x < 1e9 for x in s)]
    if not valid:
        raise RuntimeError("no valid schedule recorded")
    sch = compile_tir(db, mod, target(threads))
    if sch is None:
        raise RuntimeError("no valid schedule recorded")
    rt = tvm.compile(sch.mod, target=target(threads)).jit()
    return rt["main"], str(sch.trace), min(valid) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="MetaSchedule tuning worker (stopped by its parent)")
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--per-iter", type=int, default=16)
    a = ap.parse_args(argv)
    return _worker(a.kernel, a.work_dir, a.threads, a.per_iter)


if __name__ == "__main__":
    sys.exit(main())
