"""``leirc dataset gen``: verified one-step records from sources, shapes and strategy sites.

The plan (in the parent, cheap and deterministic): every source kernel is instantiated at
``shapes`` sizes (:mod:`.shapes`); each (source, instance) is a *unit*; for each unit the
strategy sites are enumerated (:func:`leirc.strategies.enumerate_sites`) and up to
``per_strategy`` concrete steps per strategy are drawn with an RNG seeded by (seed, unit,
strategy), so adding a strategy or a source does not change the draws of the others. Every
(unit, step) is a *job* with a stable key. ``--shard i/n`` keeps the units whose key hashes
to ``i`` mod ``n``: shards are disjoint, cover the plan, and merge to the unsharded set.

The work (in ``workers`` processes, one unit at a time each): evaluate the instance itself
once (its timing is the baseline), then for each job ``Program.apply(step)``, reject no-ops
and duplicates (a transformed fingerprint already produced in this unit), and evaluate the
result with the engine's :class:`~leirc.engine.Evaluator` against the instance: a sandboxed
worker builds it once, verifies it against the literal interpreter (the oracle under which
``bitwise`` means bit-for-bit the semantics of the original) and times it. Each finished job
is committed to ``DIR/dataset.sqlite`` at once (:mod:`.store`), so a killed run loses no
finished record and a rerun resumes where it stopped; evaluations are also cached on disk
(``DIR/evalcache``).

Bounded runs: ``per_unit`` keeps at most that many strategies per unit (the hard ones
first), units run breadth first over shape instances, and ``budget_s`` stops starting jobs
after that many seconds (a rerun resumes). With ``rpc``/``rpc_key`` the timings come from a
server of TVM's RPC tracker (:mod:`leirc.lower.rpc`); verification stays here.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

from .. import __version__
from ..io import write_atomic
from ..lang.printer import COMPACT, PRETTY, print_kernel
from ..strategies import base as S
from ..verify import evidence
from . import reasoning as R
from ..lang.canonical import fingerprint
from .filtering import HARD
from .shapes import MAX_ITERATIONS, ShapeInstance, at_dtype, instances
from .sources import Source, discover, load
from .store import Store

#: concrete steps taken from one site's argument grid before sampling (a tiling grid can be large)
SITE_STEPS = 64


@dataclass(frozen=True)
class GenOptions:
    """What defines a dataset (recorded in the store; a rerun must use the same)."""

    seed: int = 0
    shapes: int = 2
    dtypes: tuple = ()  # float dtypes to instantiate every shape at; () = as written
    per_strategy: int = 2
    target: str = "llvm"
    strategies: Optional[tuple] = None  # None: all registered
    max_iterations: int = MAX_ITERATIONS
    verify_seeds: tuple = (0, 1)
    oracle: str = "literal"
    time: bool = True
    repeat: int = 5
    tokens: bool = False
    #: also run the compiled original and the compiled candidate on the same inputs and compare
    #: their outputs bit for bit (one more build per verified record)
    compare_compiled: bool = True
    shard: tuple = (0, 1)  # (i, n)
    limit: Optional[int] = None
    #: at most this many strategies per unit (the hard ones first, the rest drawn by the
    #: seeded RNG); None: every applicable strategy. A bounded run over many sources wants
    #: few steps per instance so that every source gets some
    per_unit: Optional[int] = None
    #: time on a server that TVM's RPC tracker at ``rpc`` (``HOST:PORT``) hands out for
    #: ``rpc_key`` (verification stays here); None: time here. The key names the device and
    #: is part of the dataset; the tracker's address is not (a rerun may reach it elsewhere)
    rpc: Optional[str] = None
    rpc_key: Optional[str] = None

    def __post_init__(self):
        # a key without a tracker is a dataset's recorded options (from_json); generate refuses it
        if self.rpc is not None and not self.rpc_key:
            raise ValueError("remote timing needs both the tracker (--rpc HOST:PORT) and the device key (--key)")
        if self.rpc is not None:
            from ..lower.device import parse_address

            parse_address(self.rpc)  # ValueError with the reason

    def to_json(self) -> dict:
        d = asdict(self)
        del d["rpc"]
        for k in ("per_unit", "rpc_key"):  # datasets generated before these options existed stay resumable
            if d[k] is None:
                del d[k]
        d["strategies"] = None if self.strategies is None else list(self.strategies)
        d["verify_seeds"] = list(self.verify_seeds)
        d["dtypes"] = list(self.dtypes)
        d["shard"] = list(self.shard)
        d["leirc"] = __version__
        return d

    @staticmethod
    def from_json(d: dict) -> "GenOptions":
        kw = {k: v for k, v in d.items() if k in GenOptions.__dataclass_fields__}
        for k in ("strategies", "verify_seeds", "shard", "dtypes"):
            if kw.get(k) is not None:
                kw[k] = tuple(kw[k])
        return GenOptions(**kw)


@dataclass
class Job:
    key: str
    order: str
    step: dict  # Step.to_json()
    site: dict


@dataclass
class Unit:
    key: str
    order: int
    source: dict
    instance: dict
    text: str  # the instance, pretty-printed
    jobs: list = field(default_factory=list)


@dataclass
class Plan:
    units: list
    sources: list  # source ids
    problems: list  # messages
    instances: dict  # source id -> number of instances

    def jobs(self) -> int:
        return sum(len(u.jobs) for u in self.units)

    def to_json(self) -> dict:
        return {"sources": self.sources, "problems": self.problems, "instances": self.instances,
                "units": len(self.units), "jobs": self.jobs()}


def _h(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _rng(*parts) -> random.Random:
    return random.Random(int(_h(*parts)[:16], 16))


def record_id(original_fp: str, transformed_fp: str) -> str:
    """The id of a record: the pair of program fingerprints (one transition of the IR state)."""
    return _h(original_fp, transformed_fp)[:24]


def shard_of(unit_key: str, n: int) -> int:
    return int(unit_key[:16], 16) % n


def pick_steps(result, opts: GenOptions, unit_key: str) -> list[tuple[S.Step, S.Site]]:
    names = None if opts.strategies is None else set(opts.strategies)
    by_strategy: dict = defaultdict(dict)
    for site in S.enumerate_sites(result.kernel, names, result=result):
        for st in site.steps(limit=SITE_STEPS):
            by_strategy[site.strategy].setdefault(st, site)
    names_here = sorted(by_strategy)
    if opts.per_unit is not None and len(names_here) > opts.per_unit:
        hard = [n for n in names_here if n in HARD]
        easy = [n for n in names_here if n not in HARD]
        rest = _rng(opts.seed, unit_key, "per_unit").sample(easy, max(0, opts.per_unit - len(hard)))
        names_here = sorted((hard + rest)[:opts.per_unit])
    out = []
    for name in names_here:
        cands = list(by_strategy[name].items())  # enumeration order: deterministic
        k = min(opts.per_strategy, len(cands))
        for st, site in _rng(opts.seed, unit_key, name).sample(cands, k):
            out.append((st, site))
    return out


def plan(paths, opts: GenOptions, log: Callable[[str], None] = lambda m: None) -> Plan:
    files, problems = discover(paths)
    if not files and not problems:
        problems.append(f"no sources in {', '.join(map(str, paths))} (.leir files or KernelBench-format .py modules)")
    sources: list[Source] = []
    for f in files:
        got, problem = load(f)
        if problem:
            problems.append(problem)
        sources.extend(got)
    units: list[Unit] = []
    counts: dict = {}
    order = 0
    for src in sources:
        insts = instances(src.result, opts.shapes, seed=opts.seed, key=src.id, max_iterations=opts.max_iterations)
        counts[src.id] = len(insts)
        if not insts:
            problems.append(f"{src.id}: no instance within {opts.max_iterations} statement instances")
        for inst in insts:
            variants = [(None, inst.result)]
            if opts.dtypes:
                variants = []
                for dt in opts.dtypes:
                    r = at_dtype(inst.result, dt)
                    if r is None:
                        problems.append(f"{src.id} #{inst.index}: does not check at {dt}")
                    elif all(fingerprint(r.kernel) != fingerprint(v.kernel) for _, v in variants):
                        variants.append((dt, r))
            for dt, result in variants:
                text = print_kernel(result.kernel, PRETTY)
                ukey = _h(src.id, src.sha256, inst.index, text)
                info = dict(inst.to_json(), dtype=dt or "as written")
                if dt is not None:
                    sig = ShapeInstance(inst.index, result, inst.moved, inst.how).signature()
                    info.update(sig)
                unit = Unit(ukey, order, src.to_json(), info, text)
                order += 1
                if shard_of(ukey, opts.shard[1]) != opts.shard[0]:
                    continue
                for j, (st, site) in enumerate(pick_steps(result, opts, ukey)):
                    unit.jobs.append(Job(_h(ukey, st.to_json()), f"{unit.order:06d}.{j:04d}", st.to_json(),
                                         site.to_json()))
                units.append(unit)
        log(f"planned {src.id}: {counts[src.id]} instance(s)")
    if opts.limit is not None:
        left = opts.limit
        for u in units:
            u.jobs = u.jobs[:max(0, left)]
            left -= len(u.jobs)
        units = [u for u in units if u.jobs]
    return Plan(units, [s.id for s in sources], problems, counts)


# ---------------------------------------------------------------------------
# workers

#: this process's evaluator, kept across units (its worker pool and reference cache), with
#: the (options, directory) it was made for
_EVALUATOR: Optional[tuple] = None


def _evaluator(opts: GenOptions, cache_dir: str, timing: bool = True):
    global _EVALUATOR
    timed = timing and opts.time and opts.rpc is None
    key = (opts.target, opts.verify_seeds, timed, opts.repeat, opts.oracle, os.path.abspath(cache_dir))
    if _EVALUATOR is None or _EVALUATOR[0] != key:
        from ..engine.evaluate import Evaluator

        if _EVALUATOR is not None:
            _EVALUATOR[1].close()
        ev = Evaluator(opts.target, seeds=opts.verify_seeds, dists=None, time=timed,
                       cache_dir=cache_dir, threads=1, warmup=1,
                       repeat=opts.repeat, min_repeat_ms=5.0, verify_options={"oracle": opts.oracle})
        _EVALUATOR = (key, ev)
    return _EVALUATOR[1]


def _verification(ev) -> dict:
    rep = ev.verify.to_json() if ev.verify is not None else {}
    return {"ok": ev.ok, "error_kind": ev.error_kind, "equal": rep.get("equal", False),
            "bitwise": rep.get("bitwise", False), "max_abs_err": rep.get("max_abs_err"),
            "max_rel_err": rep.get("max_rel_err"), "norm_rel_err": rep.get("norm_rel_err"),
            "runs": rep.get("runs", 0), "seeds": rep.get("seeds", []), "dists": rep.get("dists", []),
            "probes": rep.get("probes", []), "oracle": rep.get("oracle"), "tolerance": rep.get("tolerance", ""),
            "numerics": rep.get("numerics"), "failures": list(rep.get("failures", []))[:3],
            "error": (ev.error or "")[:2000] or None}


def compiled_outputs(text: str, kernel, opts: GenOptions, pool=None) -> Optional[list]:
    """Outputs of the compiled ``text`` (sandboxed session, one build) on the verification
    seeds' standard-normal inputs, or None when it does not build or run. ``pool``: a
    :class:`~leirc.lower.device.WorkerPool` whose started worker (TVM imported) it adopts."""
    from ..lower.device import LocalDevice, make_inputs, zero_outputs

    outs = []
    with LocalDevice(opts.target).open(text, threads=1, timeout=120.0, pool=pool) as s:
        for seed in opts.verify_seeds:
            r = s.run(make_inputs(kernel, seed, "normal"), zero_outputs(kernel))
            if not r.ok:
                return None
            outs.append(r.outputs)
    return outs


def same_bits(a: Optional[list], b: Optional[list]) -> Optional[bool]:
    if a is None or b is None:
        return None
    from ..verify import bitwise_equal

    return all(set(x) == set(y) and all(bitwise_equal(x[n], y[n]) for n in x) for x, y in zip(a, b))


def _bitwise(ev) -> bool:
    return bool(ev.ok and ev.verify is not None and ev.verify.bitwise)


def _ms(ev) -> Optional[float]:
    return ev.timing.median_ms if ev.timing is not None and ev.timing.ok else None


class _Remote:
    """The timings of one unit on the RPC server (:class:`leirc.lower.rpc.RemoteTimer`): the
    original and each verified candidate are timed in one remote session, one after the
    other, on the verification seeds' inputs, so every speedup compares two runs of the
    same session."""

    def __init__(self, opts: GenOptions, original_text: str, kernel):
        from ..lower.device import RemoteTimer, make_inputs

        self.timer = RemoteTimer(opts.rpc, opts.rpc_key, target=opts.target)
        self.where = self.timer.where
        self.original = original_text
        self.sets = [make_inputs(kernel, seed, "normal") for seed in opts.verify_seeds]
        self.repeat = opts.repeat

    def pair(self, text: str) -> tuple:
        """(original ms, candidate ms, error or None)."""
        a, b = self.timer.time([self.original, text], self.sets, repeat=self.repeat, min_repeat_ms=5.0)
        err = next((t.error for t in (a, b) if not t.ok), None)
        return (a.median_ms if a.ok else None), (b.median_ms if b.ok else None), err


def _past(deadline: Optional[float]) -> bool:
    return deadline is not None and time.time() >= deadline


def run_unit(unit: Unit, opts: GenOptions, directory: str, deadline: Optional[float] = None) -> dict:
    """Evaluate every job of ``unit`` not yet in the store, in this process, committing each
    record as it finishes; returns counts by status. ``deadline`` (``time.time()`` seconds):
    start no job after it; the rest stay to do, for a rerun to resume."""
    store = Store(directory)
    counts: dict = defaultdict(int)
    done, seen = unit_state(store, unit)

    def emit(rec: dict) -> None:
        rec["node"] = _here(opts)
        store.put(rec)
        counts[rec["status"]] += 1

    unit_records(unit, opts, os.path.join(directory, "evalcache"), done, seen, deadline, emit=emit)
    return dict(counts)


def unit_state(store: Store, unit: Unit, done: Optional[set] = None) -> tuple[set, dict]:
    """What a resumed ``unit`` needs from the store: its finished job keys, and the programs
    those jobs produced (fingerprint -> job; they still count for duplicates). ``done``: the
    store's finished keys when the caller has them."""
    done = (store.done() if done is None else done) & {j.key for j in unit.jobs}
    seen: dict = {}
    for r in store.records(unit=unit.key):
        if r.get("transformed") and r["status"] not in ("noop", "duplicate"):
            seen.setdefault(r["transformed"]["fingerprint"], r["job"])
    return done, seen


def _here(opts: GenOptions) -> dict:
    from ..cluster import target_fingerprint
    from ..cluster.executor import node_name

    return {"name": node_name(), "target_fingerprint": target_fingerprint(opts.target)}


def unit_task(unit: Unit, opts: GenOptions, cache_dir: Optional[str], done: set, seen: dict,
              deadline: Optional[float], timing: bool = True) -> list:
    """The executor's job for one unit: its new records, in job order. Writes nothing shared
    (the driver stores them), so running it twice -- a retry after its node died -- is safe.
    ``cache_dir`` None: this node's own evaluation cache (a cluster node cannot reach the
    driver's directory). ``timing`` False: build and verify only (any node may do that);
    :func:`time_task` times the verified programs where timing is allowed."""
    if cache_dir is None:
        from ..search.optimizer import default_dir

        cache_dir = os.path.join(default_dir(), "evalcache")
    out: list = []
    unit_records(unit, opts, cache_dir, set(done), dict(seen), deadline, emit=out.append, timing=timing)
    return out


def time_task(original: str, candidates: list, opts: GenOptions) -> dict:
    """Times the unit's instance and its verified candidates (``[(job, text)]``) on this node,
    one sandboxed session each, on the verification seeds' standard-normal inputs (the
    protocol of the in-process evaluator: 1 warm-up, ``repeat`` runs of at least 5 ms, one
    thread); returns ``{"original": ms, job: ms, ...}`` with None where a timing failed."""
    from ..engine.program import Program
    from ..lower.device import LocalDevice, make_inputs

    kernel = Program.from_text(original).kernel
    sets = [make_inputs(kernel, seed, "normal") for seed in opts.verify_seeds]

    def one(text: str) -> Optional[float]:
        with LocalDevice(opts.target).open(text, threads=1, timeout=120.0) as s:
            t = s.time(sets, warmup=1, repeat=opts.repeat, min_repeat_ms=5.0)
        return t.median_ms if t.ok else None

    out = {"original": one(original)}
    for job, text in candidates:
        out[job] = one(text)
    return out


def with_times(records: list, times: Optional[dict], where: dict, error: Optional[str] = None) -> list:
    """``records`` (verified elsewhere, untimed) with the times of :func:`time_task` measured
    at ``where`` (``{"name", "target_fingerprint"}``): ``timing`` and ``reasoning.measured``
    as an in-process run fills them."""
    base = (times or {}).get("original")
    for rec in records:
        if rec.get("timing") is None or rec["status"] != "ok":
            continue
        ms = (times or {}).get(rec["job"])
        sp = round(base / ms, 4) if base and ms else None
        rec["timing"].update(original_ms=base, transformed_ms=ms, speedup=sp, on=where.get("name") or "?",
                             target_fingerprint=where.get("target_fingerprint"))
        if error:
            rec["timing"]["error"] = error
        rec["reasoning"]["measured"].update(original_ms=base, transformed_ms=ms, speedup=sp,
                                            on=rec["timing"]["on"])
    return records


def unit_records(unit: Unit, opts: GenOptions, cache_dir: str, done: set, seen: dict,
                 deadline: Optional[float] = None, *, emit: Callable[[dict], None], timing: bool = True) -> None:
    """Evaluate the jobs of ``unit`` not in ``done`` and hand each record to ``emit`` as it
    finishes. ``seen``: fingerprint -> job of the programs this unit's finished jobs made."""
    from ..engine.program import Program, apply
    from ..strategies import NotApplicable, StrategyBug

    todo = [j for j in unit.jobs if j.key not in done]
    if not todo or _past(deadline):
        return
    prog = Program.from_text(unit.text)
    if not getattr(prog, "ok", False):  # the plan checked it: only a leirc bug lands here
        raise RuntimeError(f"{unit.source['id']}: the planned instance does not check")
    ev = _evaluator(opts, cache_dir, timing)
    remote = _Remote(opts, unit.text, prog.kernel) if opts.rpc is not None and opts.time else None
    t0 = time.perf_counter()
    base = ev.evaluate(unit.text)
    base_ms = _ms(base)
    base_s = time.perf_counter() - t0
    base_outputs = compiled_outputs(unit.text, prog.kernel, opts, ev.pool) if opts.compare_compiled else None
    orig_tokens = None
    if opts.tokens:
        from .tokens import counts as token_counts

        orig_tokens = token_counts(prog.result)
    seen = {prog.fingerprint: "original", **seen}
    for job in unit.jobs:
        if job.key in done:
            continue
        if _past(deadline):
            break
        step = S.Step.from_json(job.step)
        strat = S.get(step.name)
        rec = {"job": job.key, "order": job.order, "unit": unit.key, "source": unit.source, "instance": unit.instance,
               "strategy": step.name, "level": strat.level, "step": job.step, "site": job.site,
               "original": {"leir": unit.text, "leir_compact": print_kernel(prog.kernel, COMPACT),
                            "fingerprint": prog.fingerprint}, "transformed": None, "id": None,
               "numerics": None, "reasoning": None, "verification": None, "error": None,
               "baseline": {"ok": base.ok, "error_kind": base.error_kind, "bitwise": _bitwise(base)},
               "generator": {"leirc": __version__, "seed": opts.seed, "target": opts.target}}
        t1 = time.perf_counter()
        try:
            rw = apply(prog, step)
        except NotApplicable as e:
            rec.update(status="not_applicable", error=str(e))
        except StrategyBug as e:
            rec.update(status="strategy_bug", error=str(e)[:2000])
        except Exception as e:  # noqa: BLE001 - a leirc bug in one strategy must not stop the run
            rec.update(status="error", error=f"{type(e).__name__}: {e}"[:2000])
        else:
            new = rw.program
            text = print_kernel(new.kernel, PRETTY)
            rec["transformed"] = {"leir": text, "leir_compact": print_kernel(new.kernel, COMPACT),
                                  "fingerprint": new.fingerprint}
            rec["id"] = record_id(prog.fingerprint, new.fingerprint)
            rec["numerics"] = rw.numerics
            # proven (legal by construction) or only tested (approximate): a training set says which
            rec["evidence"] = evidence(rw.numerics)
            rec["reasoning"] = R.trace(strat, prog, rw, job.site, step.kwargs, opts.target)
            apply_s = time.perf_counter() - t1
            if new.fingerprint in seen:
                rec.update(status="noop" if seen[new.fingerprint] == "original" else "duplicate",
                           error=None if seen[new.fingerprint] == "original" else f"same program as job {seen[new.fingerprint]}")
            else:
                seen[new.fingerprint] = job.key
                t2 = time.perf_counter()
                e = ev.evaluate(text, reference=unit.text, numerics=rw.numerics)
                rec["verification"] = _verification(e)
                rec["verification"]["passed_on"] = e.verify.passed_on() if e.verify is not None else None
                # the oracle is the literal interpreter: when the compiled original matches it bit
                # for bit, so does a bitwise candidate, and the pair says whether the step kept
                # the compiled results; otherwise that question stays open (None)
                rec["verification"]["bitwise_vs_original"] = (
                    rec["verification"]["bitwise"] if _bitwise(base) else None)
                if opts.compare_compiled and e.ok:
                    same = same_bits(base_outputs, compiled_outputs(text, new.kernel, opts, ev.pool))
                    rec["verification"]["bitwise_compiled"] = same
                    if same is not None:
                        rec["verification"]["bitwise_vs_original"] = same
                rec["status"] = "ok" if e.ok else (e.error_kind or "error")
                measured = R.measured(e, base_ms, opts.target)
                timing = {"original_ms": base_ms, "transformed_ms": _ms(e), "target": opts.target, "threads": 1,
                          "on": "local"}
                if remote is not None:
                    timing.update(on=remote.where, threads=None, original_ms=None, transformed_ms=None)
                    if e.ok:
                        a, b, err = remote.pair(text)
                        timing.update(original_ms=a, transformed_ms=b, error=err)
                    sp = (timing["original_ms"] / timing["transformed_ms"]
                          if timing["original_ms"] and timing["transformed_ms"] else None)
                    measured.update(original_ms=timing["original_ms"], transformed_ms=timing["transformed_ms"],
                                    speedup=round(sp, 4) if sp else None)
                measured["on"] = timing["on"]
                rec["reasoning"]["measured"] = measured
                timing["speedup"] = measured["speedup"]
                rec["timing"] = timing
                rec["timings"] = {"apply_s": round(apply_s, 4), "evaluate_s": round(time.perf_counter() - t2, 4),
                                  "build_s": e.build_s, "baseline_s": round(base_s, 4), "cached": e.cached}
                if opts.tokens and e.ok:
                    from .tokens import counts as token_counts

                    rec["tokens"] = {"original": orig_tokens, "transformed": token_counts(new.result)}
        emit(rec)


def crash_records(unit: Unit, done: set, message: str) -> list:
    """Records for the jobs of ``unit`` not in ``done`` when the unit itself failed (its
    worker died every time it ran, or leirc raised)."""
    out = []
    for job in unit.jobs:
        if job.key in done:
            continue
        step = S.Step.from_json(job.step)
        out.append({"job": job.key, "order": job.order, "unit": unit.key, "source": unit.source,
                    "instance": unit.instance, "strategy": step.name, "level": S.get(step.name).level,
                    "step": job.step, "site": job.site, "status": "crash", "error": message, "id": None,
                    "original": {"leir": unit.text}, "transformed": None})
    return out


def run_order(units: list) -> list:
    """Breadth first over shape instances: every source's instance 0 (in plan order), then
    every instance 1, ... -- a run stopped early has covered every source it could."""
    return sorted(units, key=lambda u: (u.instance["index"], u.order))


def generate(paths, directory: str, opts: GenOptions, *, workers: int = 1, budget_s: Optional[float] = None,
             log: Callable[[str], None] = lambda m: None, cluster: Optional[str] = None, executor=None,
             progress: Optional[bool] = None) -> dict:
    """Plan, run (resuming what the store already has), export; returns a summary.

    Units run breadth first over shape instances (every source's instance 0, then every
    instance 1, ...), so a run stopped early covers every source instead of the first few.
    ``budget_s``: seconds from the start after which no job starts (the plan's time
    included); the summary's ``complete`` says whether every job is done, and a rerun
    resumes the rest. The records do not depend on the order or on where a run stopped.

    Where units run: ``workers`` local processes (0: this process), or the Ray cluster at
    ``cluster`` (:func:`leirc.cluster.open_executor`), or a given ``executor``. A unit that
    times runs only where the target fingerprint matches; each unit's records come back to
    this process, which alone writes the store (one transaction per record), stamped with
    the node and its target fingerprint. Ctrl-C stops the workers at once; the summary then
    says ``interrupted`` and what was saved (a rerun resumes)."""
    from ..cluster import Progress, Task, job_key, open_executor, target_fingerprint

    if opts.rpc_key is not None and opts.rpc is None:
        raise ValueError(f"the device key {opts.rpc_key!r} needs the tracker that hands it out (--rpc HOST:PORT)")
    store = Store(directory)
    store.claim(opts.to_json())
    t0 = time.perf_counter()
    deadline = None if budget_s is None else time.time() + budget_s
    p = plan(paths, opts, log)
    write_atomic(os.path.join(directory, "plan.json"), json.dumps(p.to_json(), indent=2, sort_keys=True) + "\n")
    done = store.done()
    pending = run_order([u for u in p.units if any(j.key not in done for j in u.jobs)])
    log(f"{len(p.units)} unit(s), {p.jobs()} job(s); {len(done)} already done, {len(pending)} unit(s) to run")
    totals: dict = defaultdict(int)
    before = len(done)
    interrupted = False
    run_info: dict = {}
    if workers <= 0 and cluster is None and executor is None:
        # in this process: each record is committed the moment it is finished
        try:
            for u in pending:
                if _past(deadline):
                    break
                for k, v in run_unit(u, opts, directory, deadline).items():
                    totals[k] += v
                log(f"done {u.source['id']} #{u.instance['index']}")
        except KeyboardInterrupt:
            interrupted = True
    elif pending and not _past(deadline):
        own = executor is None
        ex = executor or open_executor(cluster, workers=workers, target=opts.target)
        # local processes share the dataset's evaluation cache; cluster nodes keep their own
        cache_dir = os.path.abspath(os.path.join(directory, "evalcache")) if cluster is None else None
        fp = target_fingerprint(opts.target)
        timed = opts.time and opts.rpc is None
        # on a cluster a unit is built and verified on any node, and its verified programs are
        # then timed in a task of their own on a node of the target's fingerprint; locally the
        # evaluator times each program in the session that verified it
        split = timed and cluster is not None
        by_key: dict = {}
        timing: dict = {}  # key of a timing task -> (unit key, its verified records)
        bar = Progress(len(pending), where=ex.where, live=progress, what="units")

        def store_unit(recs: list, label: str, how: str) -> None:
            # a unit that ran twice (its first node died after finishing): the first copy stays
            recs = [r for r in recs if r["job"] not in done]
            for rec in recs:
                totals[rec["status"]] += 1
            store.put_many(recs)  # the unit's result: one transaction
            done.update(r["job"] for r in recs)
            if not bar.live:
                log(f"done {label} {how}: {len(recs)} record(s)")

        try:
            for u in pending:
                udone, seen = unit_state(store, u, done)
                key = job_key(u.key, sorted(j.key for j in u.jobs if j.key not in udone), fp)
                by_key[key] = (u, udone)
                ex.submit(Task(key, unit_task, (u, opts, cache_dir, udone, seen, deadline, not split),
                               times=timed and not split, label=f"{u.source['id']} #{u.instance['index']}"))
            for out in ex.as_completed():
                bar.retried = ex.retries
                bar.add(out)
                where = {"name": out.node, "target_fingerprint": out.fingerprint}
                if out.key in timing:
                    _, recs = timing.pop(out.key)
                    store_unit(with_times(recs, out.value if out.ok else None, where, out.error), out.label,
                               f"(timed on {out.node or '?'})")
                    continue
                u, udone = by_key[out.key]
                recs = out.value if out.ok else crash_records(u, udone, out.error or "the unit failed")
                for rec in recs:
                    rec["node"] = dict(where)
                verified = [(r["job"], r["transformed"]["leir"]) for r in recs if r["status"] == "ok"]
                if split and verified and out.ok:
                    tkey = job_key(u.key, {"time": sorted(j for j, _ in verified)}, fp)
                    timing[tkey] = (u.key, recs)
                    bar.total += 1
                    ex.submit(Task(tkey, time_task, (u.text, verified, opts), times=True,
                                   label=f"timing {u.source['id']} #{u.instance['index']}"))
                    continue
                store_unit(recs, out.label, f"on {out.node or '?'}" + (f" ({out.error})" if not out.ok else ""))
        except KeyboardInterrupt:
            interrupted = True
            ex.cancel()
        finally:
            bar.retried = ex.retries
            bar.finish()
            if own:
                ex.close()
        run_info = bar.summary()
    n_ok, n_bad = store.export_jsonl()
    left = p.jobs() - len(store.done() & {j.key for u in p.units for j in u.jobs})
    summary = {"units": len(p.units), "jobs": p.jobs(), "ran": dict(totals), "status": store.counts(),
               "records": n_ok, "rejected": n_bad, "problems": p.problems, "seconds": round(time.perf_counter() - t0, 2),
               "complete": left == 0, "jobs_left": left}
    if run_info:
        summary["executor"] = run_info
    if interrupted:
        summary.update(interrupted=True, saved_this_run=len(store) - before)
    return summary


__all__ = ["GenOptions", "Plan", "Unit", "Job", "plan", "generate", "run_unit", "unit_task", "unit_records", "unit_state",
           "time_task", "with_times", "crash_records", "run_order", "record_id", "shard_of", "pick_steps"]
