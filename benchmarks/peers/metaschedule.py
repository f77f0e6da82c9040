"""MetaSchedule baseline: tune a TE version of a stdlib kernel, keep the database, reload it.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE TVM_NUM_THREADS=2 OMP_NUM_THREADS=2 \\
        .venv/bin/python benchmarks/peers/metaschedule.py --db /work/bench_out/msdb --trials 64

tunes every kernel of ``MS_DEFAULT`` (or ``--only``) one after the other, each into its own
work directory ``DB/<kernel>/`` (a JSON database), and writes ``DB/<kernel>/tuning.json``:
the tuning wall-clock, the trial count, the valid records, the best time MetaSchedule's runner
saw, the host CPU, the load average. ``bench_peers.py --ms-db DB`` reloads the best schedule
from there (``load``) and times it next to the other columns; it tunes a kernel only when
its directory has no database yet and ``--ms-trials`` > 0.

Each candidate is measured by MetaSchedule's LocalRunner with ``number=3, repeat=3,
min_repeat_ms=100`` (the default is ``repeat=1``: one noisy sample per candidate, and the
minimum over 64 such samples is biased low; see ``best_during_tuning`` in the JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from peers.te_kernels import MS_DEFAULT, prim_func  # noqa: E402


def target(threads: int):
    import tvm

    cpu = tvm.target.codegen.llvm_get_system_cpu()
    return tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": threads})


def build_without_intrinsics(mod, target, _params):
    """MetaSchedule's ``default_build`` minus its ``import tvm.s_tir.tensor_intrin``: that import
    registers every tensor intrinsic (AMX, VNNI, CUDA MMA...) by parsing TVMScript and took
    125 s on this 2-core host under load, once per builder worker, so every candidate of a
    tuning run hit the builder's timeout ("Sending 0 valid sample(s) to runner"). The CPU
    schedule rules used here tensorize nothing, so the intrinsics are not needed."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def builder(timeout_sec: float = 120.0):
    import cloudpickle
    from tvm.s_tir import meta_schedule as ms

    # the builder workers do not have benchmarks/ on their path: send the function by value
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return ms.builder.LocalBuilder(timeout_sec=timeout_sec, f_build=build_without_intrinsics)


def _records(db) -> list:
    out = []
    for rec in db.get_all_tuning_records():
        secs = [float(x) for x in (rec.run_secs or [])]
        out.append(sum(secs) / len(secs) if secs and all(s < 1e9 for s in secs) else None)
    return out


def tune(name: str, db_root: str, trials: int, threads: int, log=print) -> dict:
    """Tune ``name`` for ``trials`` trials into ``db_root/name``; return (and write) its summary."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    wd = Path(db_root) / name
    wd.mkdir(parents=True, exist_ok=True)
    tgt = target(threads)
    mod = tvm.IRModule({"main": prim_func(name)})
    summary = {"kernel": name, "trials": trials, "threads": threads, "cpu": str(tgt.attrs.get("mcpu", "")),
               "cost_model": "random", "seed": 0, "load_start": os.getloadavg(),
               "evaluator": {"number": 3, "repeat": 3, "min_repeat_ms": 100},
               "source": "TE compute of the stdlib kernel (benchmarks/peers/te_kernels.py)"}
    t0 = time.perf_counter()
    try:
        db = ms.tune_tir(mod, tgt, work_dir=str(wd), max_trials_global=trials, num_trials_per_iter=32,
                         cost_model="random", database="json", seed=0,
                         builder=builder(),
                         runner=ms.runner.LocalRunner(timeout_sec=60.0, evaluator_config=ms.runner.EvaluatorConfig(
                             number=3, repeat=3, min_repeat_ms=100)))
        recs = _records(db)
        valid = [r for r in recs if r is not None]
        summary.update(ok=bool(valid), records=len(recs), valid=len(valid),
                       best_during_tuning_ms=min(valid) * 1e3 if valid else None)
    except Exception as e:  # noqa: BLE001 - one kernel's failure must not stop the others
        summary.update(ok=False, error=f"{type(e).__name__}: {e}"[:400])
    summary["tuning_wall_s"] = time.perf_counter() - t0
    summary["load_end"] = os.getloadavg()
    (wd / "tuning.json").write_text(json.dumps(summary, indent=1))
    log(json.dumps(summary))
    return summary


def summary_of(name: str, db_root: str):
    p = Path(db_root) / name / "tuning.json"
    return json.loads(p.read_text()) if p.exists() else None


def has_db(name: str, db_root: str) -> bool:
    s = summary_of(name, db_root)
    return bool(s and s.get("ok"))


def load(name: str, db_root: str, threads: int):
    """(runtime function, trace text) of the best schedule in ``db_root/name``, or raise."""
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.tir_integration import compile_tir

    tgt = target(threads)
    mod = tvm.IRModule({"main": prim_func(name)})
    db = ms.database.JSONDatabase(work_dir=str(Path(db_root) / name))
    sch = compile_tir(db, mod, tgt)
    if sch is None:
        raise RuntimeError(f"no valid schedule for {name} in {db_root}/{name}")
    rt = tvm.compile(sch.mod, target=tgt).jit()
    return rt["main"], str(sch.trace)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="tune the MetaSchedule baselines")
    ap.add_argument("--db", required=True)
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--force", action="store_true", help="tune again where a database exists")
    args = ap.parse_args(argv)
    threads = int(os.environ.get("TVM_NUM_THREADS", "2"))
    os.environ.setdefault("TVM_NUM_THREADS", str(threads))
    print(f"start {time.strftime('%H:%M:%S')} load average {os.getloadavg()}", flush=True)
    for name in args.only or MS_DEFAULT:
        if has_db(name, args.db) and not args.force:
            print(f"{name}: database exists, skipped", flush=True)
            continue
        tune(name, args.db, args.trials, threads, log=lambda m: print(m, flush=True))
    print(f"end {time.strftime('%H:%M:%S')} load average {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
