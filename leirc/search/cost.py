"""An analytical cost model: how long a LEIR program should take on a target, and why.

It ranks proposals before anything is built, so it must be cheap (no lowering) and
explainable (every estimate says what bounds it). Per statement, over its enclosing loops:

* **work** = iterations x operations per iteration (transcendental calls weigh more);
* **bytes moved** = for every access, the elements it touches times how often they are
  fetched again: walking the loops from the innermost outward, a loop the access depends on
  grows its footprint, a loop it does not depend on re-fetches the footprint unless all
  accesses of the loops inside it fit in the cache (reuse); a non-unit innermost stride
  costs a cache line per element while the footprint does not fit; ``l`` (register) scope
  is free, ``s`` (shared) scope costs a quarter;
* **vector width**: an innermost ``V`` loop runs ``min(extent, lanes)`` elements per
  instruction; an innermost serial loop with unit strides and no carried dependence is
  assumed half auto-vectorized by LLVM;
* **parallelism**: ``P`` loops (llvm) or bound ``B`` loops (cuda) spread the iterations
  over cores or threads, with load imbalance (``ceil``) and a start-up cost per entry into a
  parallel region;
* a **roofline** per statement: time = max(work / compute peak, bytes / bandwidth) plus the
  overheads; a program's time is the sum over statements.

The numbers are rough (the machine is not modelled beyond one cache level); the search
uses their *ratios* as priors and the measured times decide. ``TargetModel`` holds the
peaks; :func:`measured_feedback` turns a measured latency into achieved GFLOP/s and GB/s
against them (the hardware feedback of the report).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

from ..lang import ast as A
from ..lang.affine import affine

#: transcendental and division weights in "operations"
CALL_WEIGHT = {"exp": 8, "log": 8, "sqrt": 4, "rsqrt": 4, "tanh": 10, "sigmoid": 10, "erf": 10, "pow": 16,
               "abs": 1, "max": 1, "min": 1, "if_then_else": 1}
DTYPE_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4,
               "u32": 4, "i64": 8, "u64": 8, "bool": 1}


@dataclass(frozen=True)
class TargetModel:
    """Peaks of a target, per the roofline. ``cores`` = parallel units (CPU cores, or CUDA
    threads that keep the device busy)."""

    name: str
    cores: int
    scalar_gops: float  # operations per second and core, scalar, in G
    lanes: int  # f32 vector lanes
    bandwidth_gbs: float  # DRAM bandwidth with every core streaming
    bandwidth_per_core_gbs: float
    cache_bytes: int  # the one cache level the model knows (per core)
    line_bytes: int = 64
    parallel_entry_s: float = 1e-6  # starting a parallel region (llvm) or a kernel launch (cuda)

    def peak_gflops(self) -> float:
        return self.scalar_gops * self.lanes * self.cores


#: the peaks of a 2-core x86 laptop-class CPU (AVX2), and an H100-class GPU; a CPU target's lanes,
#: cores and cache come from :class:`leirc.target.Target` (:func:`target_model`)
LLVM = TargetModel("llvm", cores=2, scalar_gops=3.0, lanes=8, bandwidth_gbs=20.0, bandwidth_per_core_gbs=12.0,
                   cache_bytes=1 << 20)
CUDA = TargetModel("cuda", cores=132 * 2048, scalar_gops=1.5, lanes=1, bandwidth_gbs=3000.0,
                   bandwidth_per_core_gbs=0.05, cache_bytes=48 << 20, line_bytes=128, parallel_entry_s=4e-6)


def target_model(target, *, threads: Optional[int] = None) -> TargetModel:
    """The roofline of ``target`` (a spec or :class:`leirc.target.Target`): on a CPU the f32
    lanes its granted features give, its cores (or ``threads``: the run's thread count), its
    L2 per core; the per-core rates stay :data:`LLVM`'s (nothing measures them here)."""
    from dataclasses import replace

    from ..target import target_of

    t = target_of(target)
    if t.kind == "cuda":
        return CUDA
    cores = int(threads) if threads else t.cores
    return replace(LLVM, cores=cores, lanes=t.lanes(), bandwidth_gbs=min(LLVM.bandwidth_gbs, cores * 12.0),
                   cache_bytes=t.cache("L2") or LLVM.cache_bytes)


@dataclass
class StmtCost:
    ref: str  # N<i>.S<j>
    iterations: int
    ops: float
    bytes: float
    parallel: float  # effective parallel units
    lanes: float  # effective vector width
    seconds: float
    bound: str  # "compute" | "memory"


@dataclass
class CostEstimate:
    seconds: float
    ops: float
    bytes: float
    stmts: list = field(default_factory=list)

    @property
    def parallel(self) -> float:
        """Work-weighted mean of the statements' parallelism."""
        w = sum(s.ops for s in self.stmts) or 1.0
        return sum(s.parallel * s.ops for s in self.stmts) / w

    @property
    def lanes(self) -> float:
        w = sum(s.ops for s in self.stmts) or 1.0
        return sum(s.lanes * s.ops for s in self.stmts) / w

    def summary(self) -> str:
        return (f"{self.seconds * 1e3:.3g} ms est., {self.bytes / 1e6:.3g} MB moved, {self.ops / 1e6:.3g} Mop, "
                f"x{self.parallel:.3g} parallel, {self.lanes:.3g} lanes")


def _ops(e: A.Expr) -> float:
    """Operations of an expression; subscripts are address arithmetic, not work."""
    n = 0.0
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, A.Access):
            continue
        stack.extend(A.children(x))
        if isinstance(x, A.BinOp):
            n += 4.0 if x.op in ("/", "//", "%") else 1.0
        elif isinstance(x, A.Call):
            n += CALL_WEIGHT.get(x.func, 4)
        elif isinstance(x, (A.Compare, A.Neg)):
            n += 1.0
    return n


def _strides(shape) -> list[int]:
    out, s = [], 1
    for d in reversed(shape or ()):
        out.append(s)
        s *= max(1, int(d))
    return list(reversed(out))


class _Access:
    __slots__ = ("name", "bytes", "scope", "stride", "depends", "size")

    def __init__(self, acc: A.Access, shape, loop_vars):
        self.name = acc.name
        self.bytes = DTYPE_BYTES.get(acc.dtype, 4)
        self.scope = acc.scope
        strides = _strides(shape) if shape and len(shape) == len(acc.indices) else [1] * len(acc.indices)
        self.size = math.prod(shape) if shape else 1
        self.stride: dict[str, Optional[int]] = {}
        self.depends: set[str] = set()
        for d, ix in enumerate(acc.indices):
            names = {x.name for x in A.walk(ix) if isinstance(x, A.Var)} & loop_vars
            if not names:
                continue
            self.depends |= names
            af = affine(ix)
            for v in names:
                if af is None or v not in af[0]:
                    self.stride[v] = None  # not affine: unknown, treated as scattered
                elif self.stride.get(v, 0) is not None:
                    self.stride[v] = self.stride.get(v, 0) + af[0][v] * strides[d]

    def weight(self) -> float:
        return {"l": 0.0, "s": 0.25}.get(self.scope, 1.0) * self.bytes


def _stmt_cost(ref: str, si, tensors: dict, tm: TargetModel) -> StmtCost:
    loops = [lp for lp in si.loops]
    loop_vars = {lp.var for lp in loops}
    st = si.stmt
    accs = [st.target] + [x for x in A.walk(st.value) if isinstance(x, A.Access)]
    if si.kind in ("reduce", "update", "scan"):
        accs.append(st.target)  # read-modify-write
    shape_of = {n: t.shape for n, t in tensors.items()}
    xs = [_Access(a, shape_of.get(a.name), loop_vars) for a in accs]
    iterations = math.prod(max(1, lp.extent) for lp in loops) if loops else 1
    ops = iterations * max(1.0, _ops(st.value))
    # bytes moved: innermost outward, footprints and re-fetches
    fp = [1.0] * len(xs)
    mult = [1.0] * len(xs)
    for lp in reversed(loops):
        inner_bytes = sum(f * x.bytes for f, x in zip(fp, xs) if x.scope != "l")
        # what this loop's iterations touch together: the reuse distance of an element that a
        # dependent access touches again (a fused i*j loop re-reading a row of B)
        level_bytes = sum(min(f * (lp.extent if lp.var in x.depends else 1), x.size) * x.bytes
                          for f, x in zip(fp, xs) if x.scope != "l")
        for i, x in enumerate(xs):
            if lp.var in x.depends:
                grown = fp[i] * lp.extent
                if grown > x.size:  # elements touched again: re-fetched unless they stay cached
                    if level_bytes > tm.cache_bytes:
                        mult[i] *= grown / x.size
                    grown = float(x.size)
                fp[i] = grown
            elif inner_bytes > tm.cache_bytes:
                mult[i] *= lp.extent
    moved = 0.0
    total_fp = sum(f * x.bytes for f, x in zip(fp, xs))
    innermost = next((lp for lp in reversed(loops) if lp.extent > 1), None)
    for f, m, x in zip(fp, mult, xs):
        pen = 1.0
        if innermost is not None and innermost.var in x.depends and total_fp > tm.cache_bytes:
            s = x.stride.get(innermost.var)
            pen = float(tm.line_bytes // x.bytes) if s is None else min(float(tm.line_bytes // x.bytes), abs(s) or 1)
        moved += f * m * x.weight() * pen
    # vector lanes
    lanes = 1.0
    if innermost is not None:
        unit = all(x.stride.get(innermost.var, 0) in (0, 1) for x in xs)
        if innermost.kind == "V":
            lanes = float(min(innermost.extent, tm.lanes)) if unit else 1.5
        elif innermost.kind in ("L", "U") and unit and innermost.var not in si.carried and tm.lanes > 1:
            lanes = max(1.0, tm.lanes / 4)
        if innermost.kind == "U":
            lanes *= 1.15  # less loop overhead
    # parallelism: P loops on llvm, bound loops on cuda
    par_kind = "B" if tm.name == "cuda" else "P"
    par_ext = 1
    entries = 1
    seen_par = False
    for lp in loops:
        if lp.kind == par_kind:
            par_ext *= lp.extent
            seen_par = True
        elif not seen_par:
            entries *= lp.extent
    if par_ext > 1:
        waves = math.ceil(par_ext / tm.cores)
        parallel = par_ext / waves
    else:
        parallel = 1.0
        entries = 0 if tm.name != "cuda" else 1
    compute_s = ops / (tm.scalar_gops * 1e9 * lanes * parallel)
    bw = min(tm.bandwidth_gbs, tm.bandwidth_per_core_gbs * parallel) * 1e9
    memory_s = moved / bw
    seconds = max(compute_s, memory_s) + entries * tm.parallel_entry_s
    return StmtCost(ref, iterations, ops, moved, parallel, lanes, seconds,
                    "memory" if memory_s > compute_s else "compute")


def estimate(program, target: str = "llvm", *, threads: Optional[int] = None) -> CostEstimate:
    """The estimate for a :class:`leirc.engine.Program` (or anything with ``.result``,
    a :class:`~leirc.lang.checker.CheckResult`)."""
    result = getattr(program, "result", program)
    tm = target if isinstance(target, TargetModel) else target_model(target, threads=threads)
    stmts = []
    top = {id(item): i for i, item in enumerate(result.kernel.body)}
    counters: dict[int, int] = {}
    for si in result.stmts:
        nest = top.get(id(si.loops[0]), -1) if si.loops else top.get(id(si.stmt), -1)
        j = counters.get(nest, 0)
        counters[nest] = j + 1
        stmts.append(_stmt_cost(f"N{nest}.S{j}", si, result.tensors, tm))
    return CostEstimate(sum(s.seconds for s in stmts), sum(s.ops for s in stmts), sum(s.bytes for s in stmts), stmts)


def explain(before: CostEstimate, after: CostEstimate) -> str:
    """One line: what the model expects a step to change."""
    parts = []
    if abs(after.bytes - before.bytes) > 0.02 * max(before.bytes, 1.0):
        parts.append(f"bytes {before.bytes / 1e6:.3g}->{after.bytes / 1e6:.3g} MB")
    if abs(after.parallel - before.parallel) > 0.05:
        parts.append(f"parallel x{before.parallel:.3g}->x{after.parallel:.3g}")
    if abs(after.lanes - before.lanes) > 0.05:
        parts.append(f"lanes {before.lanes:.3g}->{after.lanes:.3g}")
    if abs(after.ops - before.ops) > 0.02 * max(before.ops, 1.0):
        parts.append(f"work {before.ops / 1e6:.3g}->{after.ops / 1e6:.3g} Mop")
    ratio = before.seconds / after.seconds if after.seconds > 0 else 1.0
    return (", ".join(parts) or "no modelled effect") + f"; predicted x{ratio:.3g}"


def measured_feedback(est: CostEstimate, ms: Optional[float], target: str = "llvm",
                      threads: Optional[int] = None) -> dict:
    """Achieved GFLOP/s and GB/s of a measured latency, against the target's peaks."""
    tm = target_model(target, threads=threads)
    if not ms or ms <= 0:
        return {}
    s = ms / 1e3
    gops, gbs = est.ops / s / 1e9, est.bytes / s / 1e9
    return {"ms": ms, "gops": gops, "gbs": gbs, "peak_gops": tm.peak_gflops(), "peak_gbs": tm.bandwidth_gbs,
            "compute_util": gops / tm.peak_gflops(), "bandwidth_util": gbs / tm.bandwidth_gbs,
            "model_ms": est.seconds * 1e3}
