"""``-O2`` on CUDA.

The launch shape is :class:`GpuTiles`, arguments a search can
tune). Element-wise producer/consumer nests are fused (``operator_fusion``, never into a
nest that reduces), then per top-level nest, first family that applies:

* **GEMM-like** (:func:`gemm_like` without the unit-stride condition): block tile
  ``by*tm × bx*tn``, thread tile ``tm × tn`` -- ``i = io*(by*tm) + ty*tm + ii``,
  ``j = jo*(bx*tn) + tx*tn + jj`` by ``loop_split``/``loop_reorder``, ``cache_write`` of the
  accumulator into a private ``l`` tile at the ``tx`` loop (registers, once ``ii``/``jj`` are
  unrolled), batch loops fused over ``blockIdx.z``, ``io``/``jo``/thread loops bound over
  ``blockIdx.y/x``, ``threadIdx.y/x``; then ``shared_memory_tiling``: each ``kt``-slice of the
  block's operand tiles is loaded into shared memory by all threads of the block (coalesced)
  and the thread tiles read it from there. Dimensions the block tile does not divide go on.
* **reductions** (one reduction statement): when the outputs are few (< ``FEW_OUTPUTS``)
  or the reduction is read at unit stride while the outputs are not, one block per output
  (spatial loops over ``blockIdx``) and ``threads`` threads over the reduction (reduction
  loops fused, split, the thread part outermost): a cross-thread reduction, which the
  lowering turns into TVM's thread allreduce. Otherwise one thread per output (spatial loops
  over ``blockIdx`` × ``threadIdx``, the reduction serial in the thread).
* **element-wise** (independent iterations): the innermost loop over ``threadIdx.x``
  (split exactly by up to ``threads``, its outer part over ``blockIdx.x``), the outer loops
  over ``blockIdx.y``/``z`` -- one launch, no host loop. After a row reduction of at least
  ``ROW_BLOCKS`` rows, a nest over the same rows takes the reduction's shape instead.
* anything else (scans, imperfect nests): the longest bindable loop over
  ``blockIdx.x`` × ``threadIdx.x``.

Finally consecutive nests that run one block per row (at least ``ROW_BLOCKS`` rows) share
one launch (``outer_fusion``): softmax's max, sum and normalisation become three allreduce
phases of one block, and the row results no other launch reads move to shared memory
(``set_storage_scope``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ..lang import ast as A
from ..lang.affine import affine
from ..lang.checker import CheckResult
from ..strategies import get
from ..strategies import gpu as _gpu_strategies  # noqa: F401  (registers outer_fusion, shared_memory_tiling)
from ..strategies.rewrite import iter_loops, iter_stmts, nest_chain, refs_at
from .o1 import O1Result
from .o2 import PipelineRun, gemm_like

# ---------------------------------------------------------------------------
# CUDA


@dataclass(frozen=True)
class GpuTiles:
    """Launch shape of the CUDA pipeline: ``threads`` per block for reductions and
    element-wise nests; GEMM-like nests run ``by`` × ``bx`` threads per block, each computing
    a ``tm`` × ``tn`` register tile (block tile ``by*tm`` × ``bx*tn``), staging ``kt`` steps of the
    reduction of the block's operand tiles in shared memory (0: no shared tiles)."""

    threads: int = 256
    by: int = 16
    bx: int = 16
    tm: int = 4
    tn: int = 4
    kt: int = 16


#: dtypes the CUDA lowering reduces across threads (leirc.lower.tir.ALLREDUCE_DTYPES)
_ALLREDUCE_DTYPES = ("f32", "f64", "i32", "i64", "u32", "u64")


def _chain_refs(kernel: A.Kernel, idx: int) -> list[tuple[A.Loop, str]]:
    """The perfect chain of loops of top-level item ``idx`` with their references."""
    item = kernel.body[idx]
    if not isinstance(item, A.Loop):
        return []
    chain = nest_chain(item)
    paths = [(idx,) + (0,) * k for k in range(len(chain))]
    refs = refs_at(kernel, paths)
    return [(lp, refs[p]) for lp, p in zip(chain, paths)]


def _threads_for(extent: int, most: int) -> int:
    """Threads for a loop of ``extent`` iterations: all of them when they fit, else the
    largest divisor of ``extent`` up to ``most``, a multiple of the warp (32) if one divides."""
    if extent <= most:
        return extent
    divs = [d for d in range(1, most + 1) if extent % d == 0]
    warp = [d for d in divs if d % 32 == 0]
    return max(warp or divs)


def _fuse_chain(run: PipelineRun, idx: int, refs: list[str]) -> Optional[str]:
    """Fuse the consecutive loops ``refs`` (outermost first, directly nested) into one;
    the fused loop's reference, or None when a fusion does not apply."""
    cur = refs[0]
    for _ in refs[1:]:
        rw = run.step("loop_fusion", loop=cur)
        if rw is None:
            return None
        cur = rw.created["fused"]
    return cur


def _split_bind(run: PipelineRun, ref: str, extent: int, most: int, outer_axis: str, inner_axis: str) -> bool:
    """Bind loop ``ref`` to ``outer_axis`` × ``inner_axis`` (split by :func:`_threads_for`),
    or to ``inner_axis`` alone when it fits."""
    t = _threads_for(extent, most)
    if t == extent:
        return run.step("loop_binding", loop=ref, axis=inner_axis) is not None
    split = run.step("loop_split", loop=ref, factor=t)
    if split is None:
        return False
    bound = run.step("loop_binding", loop=split.created["outer"], axis=outer_axis)
    inner = bound.forward(split.created["inner"]) if bound is not None else None
    return inner is not None and run.step("loop_binding", loop=inner, axis=inner_axis) is not None


#: most blocks along blockIdx.y / blockIdx.z
_BLOCK_YZ = 65535


def _bind_spatial(run: PipelineRun, idx: int, n: int, gt: GpuTiles) -> bool:
    """Bind the first ``n`` loops of nest ``idx``'s chain (independent, outermost first) in one
    launch: the innermost over ``threadIdx.x`` (split by up to ``threads``, its outer part over
    ``blockIdx.x``), the next ones outwards over the remaining block axes (x, y, z). Loops are
    bound as they are, not fused into one flat index: fusing three or more would leave nested
    ``//``/``%`` subscripts that the dependence test cannot tell apart; only the outermost two
    are fused when there are more loops than axes. No host loop is left."""
    cr = _chain_refs(run.res.kernel, idx)
    if n == 4:
        if run.step("loop_fusion", loop=cr[0][1]) is None:
            return False
        n -= 1
        cr = _chain_refs(run.res.kernel, idx)
    if n > 3:
        return False
    inner, iref = cr[n - 1]
    t = _threads_for(inner.extent, gt.threads)
    outer_refs = [r for _, r in cr[: n - 1]]
    blocks = ["bx", "by", "bz"]
    if t < inner.extent:
        split = run.step("loop_split", loop=iref, factor=t)
        if split is None:
            return False
        outer_refs = [split.forward(r) for r in outer_refs] + [split.created["outer"]]
        iref = split.created["inner"]
    if len(outer_refs) > 3:
        return False
    handles = [iref] + list(reversed(outer_refs))  # tx, then block loops from the innermost outwards
    for pos, axis in enumerate(["tx"] + blocks[: len(outer_refs)]):
        ref = handles[pos]
        lp = next((l for r, l, _ in iter_loops(run.res.kernel) if r == ref), None)
        if ref is None or lp is None or (axis in ("by", "bz") and lp.extent > _BLOCK_YZ):
            return False
        rw = run.step("loop_binding", loop=ref, axis=axis)
        if rw is None:
            return False
        handles = [rw.forward(h) if h is not None else None for h in handles]
    return True


def _bind_rows(run: PipelineRun, idx: int, n: int) -> bool:
    """Bind the first ``n`` chain loops of nest ``idx`` over blockIdx x, y, z (innermost
    first); two of them are fused first when there are four."""
    cr = _chain_refs(run.res.kernel, idx)
    if n == 4:
        if run.step("loop_fusion", loop=cr[0][1]) is None:
            return False
        n -= 1
    for pos, axis in zip(range(n - 1, -1, -1), ("bx", "by", "bz")):
        cr = _chain_refs(run.res.kernel, idx)
        lp, ref = cr[pos]
        if axis != "bx" and lp.extent > _BLOCK_YZ:
            return False
        if run.step("loop_binding", loop=ref, axis=axis) is None:
            return False
    return n <= 3


def _gpu_reduction(run: PipelineRun, idx: int, gt: GpuTiles) -> bool:
    """One block per output element (the spatial loops fused and bound to ``blockIdx.x``),
    ``threads`` threads over the reduction (the reduction loops fused, split by the thread
    count, the thread part outermost and bound to ``threadIdx.x``): a cross-thread reduction
    that the lowering turns into a thread allreduce."""
    k = run.res.kernel
    cr = _chain_refs(k, idx)
    if not cr:
        return False
    body = cr[-1][0].body
    if len(body) != 1 or not isinstance(body[0], A.Assign):
        return False
    si = run.res.result.info(body[0])
    if (si.kind != "reduce" or si.op not in ("+", "-", "*", "max", "min") or not si.reduce_vars
            or si.stmt.target.dtype not in _ALLREDUCE_DTYPES or any(l.kind != "L" or l.start for l, _ in cr)):
        return False
    red_vars = set(si.reduce_vars)
    spatial = [l.var for l, _ in cr if l.var not in red_vars]
    reds = [l.var for l, _ in cr if l.var in red_vars]
    total = math.prod(l.extent for l, _ in cr if l.var in red_vars)
    if total < 32:
        return False  # too short to share among threads: an ordinary spatial binding does better
    mark = run.res.mark()
    if [l.var for l, _ in cr] != spatial + reds and not run.step(
            "loop_reorder", loop=cr[0][1], order=",".join(spatial + reds)):
        return False
    cr = _chain_refs(run.res.kernel, idx)
    n = len(spatial)
    red = _fuse_chain(run, idx, [r for _, r in cr[n:]])
    ok = red is not None
    if ok:
        t = _threads_for(total, gt.threads)
        if t < total:
            split = run.step("loop_split", loop=red, factor=t)
            ok = split is not None
            if ok:
                cr = _chain_refs(run.res.kernel, idx)
                names = [l.var for l, _ in cr]
                outer, inner = names[n], names[n + 1]
                ok = run.step("loop_reorder", loop=cr[n][1], order=f"{inner},{outer}") is not None
                red = _chain_refs(run.res.kernel, idx)[n][1] if ok else None
        ok = ok and run.step("loop_binding", loop=red, axis="tx") is not None
    if ok and n:
        ok = _bind_rows(run, idx, n)
    if not ok:
        run.res.undo(mark, f"nest N{idx}: undo the cross-thread reduction schedule")
    return ok


def _gpu_gemm(run: PipelineRun, idx: int, gt: GpuTiles) -> bool:
    """Block tile × thread tile for a GEMM-like nest (:func:`gemm_like` without the
    unit-stride condition): ``i = io*(by*tm) + ty*tm + ii`` and ``j = jo*(bx*tn) + tx*tn + jj``;
    batch loops fused and bound to ``blockIdx.z``, ``io``/``jo`` to ``blockIdx.y``/``x``, the
    thread loops to ``threadIdx.y``/``x``; ``cache_write`` at the ``tx`` loop gives each thread a
    private ``tm × tn`` accumulator (``local``: registers once ``ii``/``jj`` are unrolled)
    that it writes back once."""
    g = gemm_like(run.res.kernel, run.res.result, idx, unit_stride=False)
    if g is None:
        return False
    ext = {l.var: l.extent for l, _ in _chain_refs(run.res.kernel, idx)}
    bm, bn = gt.by * gt.tm, gt.bx * gt.tn
    if ext[g.i] % bm or ext[g.j] % bn:
        run.res.log.append(f"nest N{idx}: the {bm}x{bn} block tile does not divide {g.i}={ext[g.i]}, {g.j}={ext[g.j]}")
        return False
    if math.prod(ext[b] for b in g.batch) > 65535:
        return False
    mark = run.res.mark()
    handles: dict = {}

    def step(name, **args):
        rw = run.step(name, **args)
        if rw is not None:
            for key in list(handles):
                handles[key] = rw.forward(handles[key]) if handles[key] is not None else None
        return rw

    def ok_undo(why):
        run.res.undo(mark, f"nest N{idx}: undo the GEMM tiles ({why})")
        return False

    order = g.batch + [g.i, g.j] + g.reductions
    cr = _chain_refs(run.res.kernel, idx)
    if [l.var for l, _ in cr] != order and not step("loop_reorder", loop=cr[0][1], order=",".join(order)):
        return ok_undo("reorder")
    refs = {l.var: r for l, r in _chain_refs(run.res.kernel, idx)}
    handles.update({"i": refs[g.i], "j": refs[g.j]})
    if g.batch:
        handles["batch"] = refs[g.batch[0]]
    for dim, block, thread, names in ((g.i, bm, gt.tm, ("io", "ty", "ii")), (g.j, bn, gt.tn, ("jo", "tx", "jj"))):
        key = "i" if dim == g.i else "j"
        inner = handles[key]
        handles[names[0]] = None
        if ext[dim] > block:  # (a dimension of exactly one block tile needs no block loop)
            outer = step("loop_split", loop=handles[key], factor=block)
            if outer is None:
                return ok_undo(f"split {dim}")
            handles[names[0]] = outer.created["outer"]
            inner = outer.created["inner"]
        thr = step("loop_split", loop=inner, factor=thread)
        if thr is None:
            return ok_undo(f"split {dim} by the thread tile")
        handles[names[1]], handles[names[2]] = thr.created["outer"], thr.created["inner"]
    # batch, io, ty, ii, jo, tx, jj, reductions -> batch, io, jo, ty, tx, reductions, ii, jj
    cr = _chain_refs(run.res.kernel, idx)
    var_of = {r: l.var for l, r in cr}
    blocks = [h for h in ("io", "jo") if handles[h] is not None]
    want = [var_of[handles[h]] for h in blocks + ["ty", "tx"]] + g.reductions + [var_of[handles["ii"]], var_of[handles["jj"]]]
    ii, jj = want[-2], want[-1]
    nb = len(g.batch)
    if not step("loop_reorder", loop=cr[nb][1], order=",".join(want)):
        return ok_undo("reorder the tiles")
    stmt = next(r for r, _, p in iter_stmts(run.res.kernel) if p[0] == idx)
    if not step("cache_write", stmt=stmt, loop=handles["tx"], scope="l"):
        return ok_undo("cache_write")
    if nb > 1:
        cr = _chain_refs(run.res.kernel, idx)
        fused = _fuse_chain(run, idx, [r for _, r in cr[:nb]])
        if fused is None:
            return ok_undo("fuse the batch loops")
    axes = (["bz"] if nb else []) + [{"io": "by", "jo": "bx"}[h] for h in blocks] + ["ty", "tx"]
    for pos, axis in enumerate(axes):
        cr = _chain_refs(run.res.kernel, idx)
        if not step("loop_binding", loop=cr[pos][1], axis=axis):
            return ok_undo(f"bind {axis}")
    # from here on a skipped step costs speed only
    for var in (ii, jj):
        for nth in (0, 1):
            ref = run.loop(idx, var, nth)
            if ref is not None:
                run.step("loop_unrolling", loop=ref)
    if gt.kt:
        # every thread streamed its operands from global memory so far: stage the block's
        # tiles in shared memory (skipped, with the reason logged, where they do not fit)
        run.step("shared_memory_tiling", loop=_chain_refs(run.res.kernel, idx)[0][1], kt=gt.kt)
    return True


def _unit_stride_in(st: A.Assign, var: str) -> bool:
    """``var`` is the last, unit-stride subscript of some read of ``st``: threads over it
    read consecutive addresses."""
    for a in (n for n in A.walk(st.value) if isinstance(n, A.Access) and n.indices and n.name != st.target.name):
        aff = affine(a.indices[-1])
        if aff is not None and aff[0].get(var) == 1:
            return True
    return False


def _unit_stride_reduction(st: A.Assign, si) -> bool:
    red = [l for l in si.loops if l.var in si.reduce_vars]
    return bool(red) and _unit_stride_in(st, red[-1].var)


def _gpu_rowwise(run: PipelineRun, idx: int, gt: GpuTiles) -> bool:
    """A reduction whose threads are better spent on outputs (the reduction is short, or
    strided while there are many outputs): spatial loops first, fused and bound over
    ``blockIdx.x`` × ``threadIdx.x``; each thread runs the whole reduction of its element."""
    cr = _chain_refs(run.res.kernel, idx)
    if not cr or any(l.kind != "L" or l.start for l, _ in cr):
        return False
    body = cr[-1][0].body
    if len(body) != 1 or not isinstance(body[0], A.Assign):
        return False
    si = run.res.result.info(body[0])
    if si.kind != "reduce":
        return False
    red = set(si.reduce_vars)
    spatial = [l.var for l, _ in cr if l.var not in red]
    if not spatial:
        return False
    mark = run.res.mark()
    order = spatial + [l.var for l, _ in cr if l.var in red]
    if [l.var for l, _ in cr] != order and not run.step("loop_reorder", loop=cr[0][1], order=",".join(order)):
        return False
    ok = _bind_spatial(run, idx, len(spatial), gt)
    if not ok:
        run.res.undo(mark, f"nest N{idx}: undo the thread-per-output schedule")
    return ok


def _gpu_reduction_or_rowwise(run: PipelineRun, idx: int, gt: GpuTiles) -> bool:
    """Cross-thread reduction when the reduction is read at unit stride or there are too few
    outputs to keep the device busy; else one thread per output."""
    cr = _chain_refs(run.res.kernel, idx)
    body = cr[-1][0].body if cr else ()
    if len(body) != 1 or not isinstance(body[0], A.Assign):
        return False
    si = run.res.result.info(body[0])
    if si.kind != "reduce" or not si.reduce_vars:
        return False
    outputs = math.prod(l.extent for l, _ in cr if l.var not in si.reduce_vars)
    spatial = [l for l, _ in cr if l.var not in si.reduce_vars]
    coalesced_outputs = bool(spatial) and _unit_stride_in(body[0], spatial[-1].var)
    if outputs < FEW_OUTPUTS or (_unit_stride_reduction(body[0], si) and not coalesced_outputs):
        if _gpu_reduction(run, idx, gt):
            return True
    return _gpu_rowwise(run, idx, gt)


#: fewer outputs than this leave most of a GPU idle with one thread per output
FEW_OUTPUTS = 8192


def _elementwise(si) -> bool:
    """An assignment, or an update without reduction loops (``G = G + Bias``), carrying no
    dependence: its iterations are independent."""
    return si.kind in ("assign", "update") and not si.reduce_vars and not si.carried


def _gpu_elementwise(run: PipelineRun, idx: int, gt: GpuTiles) -> bool:
    """A nest of independent iterations: its loops fused into one, split exactly by up to
    ``threads`` and bound to ``blockIdx.x`` × ``threadIdx.x`` -- one launch, no host loop."""
    cr = _chain_refs(run.res.kernel, idx)
    if not cr or any(l.kind != "L" or l.start for l, _ in cr):
        return False
    stmts = [b for b in cr[-1][0].body]
    if not stmts or not all(isinstance(b, A.Assign) for b in stmts):
        return False
    infos = [run.res.result.info(b) for b in stmts]
    if not all(_elementwise(si) for si in infos):
        return False
    mark = run.res.mark()
    ok = _bind_spatial(run, idx, len(cr), gt)
    if not ok:
        run.res.undo(mark, f"nest N{idx}: undo the element-wise launch")
    return ok


def _gpu_fallback(run: PipelineRun, idx: int, gt: GpuTiles) -> bool:
    """Any other nest: the longest loop of its perfect chain that may be bound (no carried
    dependence) over ``blockIdx.x`` × ``threadIdx.x``; loops outside it stay host loops."""
    ctx = run.res.context()
    legal = {s.fixed["loop"] for s in get("loop_binding").sites(ctx)}
    cr = _chain_refs(run.res.kernel, idx)
    carried = {v for si in ctx.result.stmts if si.loops and si.loops[0] is run.res.kernel.body[idx] for v in si.carried}
    cands = [(l, r) for l, r in cr if l.kind == "L" and l.start == 0 and r in legal and l.var not in carried]
    if not cands:
        run.res.log.append(f"nest N{idx}: no loop can be bound; it runs on one thread")
        return False
    lp, ref = max(cands, key=lambda c: c[0].extent)
    mark = run.res.mark()
    ok = _split_bind(run, ref, lp.extent, gt.threads, "bx", "tx")
    if not ok:
        run.res.undo(mark, f"nest N{idx}: undo the binding of {ref}")
    return ok


def _gpu_fuse(run: PipelineRun) -> None:
    """Fuse element-wise producer/consumer nests (``operator_fusion``), but never into a
    nest that reduces: a reduction nest keeps its own schedule (threads over the reduction),
    which the statements of a fused element-wise chain would not share."""
    fusion = get("operator_fusion")
    rejected: set = set()
    for _ in range(64):  # each fusion removes a nest
        applied = False
        for site in fusion.sites(run.res.context()):
            step = site.first_step()
            if step in rejected:
                continue
            mark = run.res.mark()
            if run.step(step.name, **dict(step.args)) is None:
                rejected.add(step)
                continue
            nest = int(str(dict(step.args)["nest"]).lstrip("N"))
            if not all(_elementwise(si) for si in run.res.result.stmts if si.loops and si.loops[0] is run.res.kernel.body[nest]):
                run.res.undo(mark, f"undo {step}: it would fuse into a reduction nest")
                rejected.add(step)
                continue
            applied = True
            break
        if not applied:
            return


#: rows (blocks) from which the phases of a row-wise computation share one launch
ROW_BLOCKS = 128


def _row_loop(kernel: A.Kernel, idx: int) -> Optional[A.Loop]:
    """The block loop of a nest scheduled one block per row (``B^{rows}_{bx..}`` outermost)."""
    item = kernel.body[idx] if idx < len(kernel.body) else None
    if isinstance(item, A.Loop) and item.kind == "B" and item.var.startswith("bx"):
        return item
    return None


def _gpu_rowform(run: PipelineRun, idx: int, rows: int, gt: GpuTiles) -> bool:
    """An element-wise nest after a row reduction of ``rows`` rows, in the same shape: its
    outer loop (``rows`` iterations) over ``blockIdx.x``, its innermost loop split by the
    thread count with the thread part outermost (``B bx B tx L jo``), so that
    ``outer_fusion`` can put it into the reduction's launch."""
    cr = _chain_refs(run.res.kernel, idx)
    if len(cr) != 2 or cr[0][0].extent != rows or any(l.kind != "L" or l.start for l, _ in cr):
        return False
    if not all(isinstance(b, A.Assign) and _elementwise(run.res.result.info(b)) for b in cr[-1][0].body):
        return False
    mark = run.res.mark()
    inner = cr[1][0]
    t = _threads_for(inner.extent, gt.threads)
    ok = True
    if t < inner.extent:
        split = run.step("loop_split", loop=cr[1][1], factor=t)
        ok = split is not None
        if ok:
            names = [l.var for l, _ in _chain_refs(run.res.kernel, idx)]
            ok = run.step("loop_reorder", loop=_chain_refs(run.res.kernel, idx)[1][1], order=f"{names[2]},{names[1]}") is not None
    ok = ok and run.step("loop_binding", loop=_chain_refs(run.res.kernel, idx)[1][1], axis="tx") is not None
    ok = ok and run.step("loop_binding", loop=_chain_refs(run.res.kernel, idx)[0][1], axis="bx") is not None
    if not ok:
        run.res.undo(mark, f"nest N{idx}: undo the row form")
    return ok


def _fuse_rows(run: PipelineRun) -> None:
    """``outer_fusion`` of consecutive nests that run one block per row (at least
    :data:`ROW_BLOCKS` rows): the phases of a softmax or a norm in one launch."""
    idx = 0
    while idx < len(run.res.kernel.body) - 1:
        a, b = _row_loop(run.res.kernel, idx), _row_loop(run.res.kernel, idx + 1)
        if a is not None and b is not None and a.extent == b.extent >= ROW_BLOCKS:
            if run.step("outer_fusion", nest=idx) is not None:
                continue
        idx += 1
    # a row result that no other launch reads lives in the block's shared memory
    k = run.res.kernel
    for idx in range(len(k.body)):
        if _row_loop(k, idx) is None or not isinstance(k.body[idx].body[0], A.Loop):
            continue
        inside = {a.name for a in A.walk(k.body[idx]) if isinstance(a, A.Access)}
        outside = {a.name for j, it in enumerate(k.body) if j != idx for a in A.walk(it) if isinstance(a, A.Access)}
        for name in sorted(inside - outside):
            info = run.res.result.tensors.get(name)
            if info is not None and info.role == "intermediate" and info.scope == "g" and not info.private:
                run.step("set_storage_scope", tensor=name, scope="s")


def optimize_cuda(kernel: A.Kernel, result: CheckResult, gpu: Optional[GpuTiles] = None) -> O1Result:
    """The CUDA -O2 pipeline (module docstring)."""
    gt = gpu or GpuTiles()
    run = PipelineRun(kernel, result)
    run.res.log.append(f"cuda launch threads={gt.threads} gemm tile {gt.by}x{gt.bx} threads x {gt.tm}x{gt.tn}, kt={gt.kt}")
    _gpu_fuse(run)
    for idx in range(len(run.res.kernel.body)):
        if not isinstance(run.res.kernel.body[idx], A.Loop):
            continue
        prev = _row_loop(run.res.kernel, idx - 1) if idx else None
        rows = prev.extent if prev is not None and prev.extent >= ROW_BLOCKS else None
        families = [("GEMM", _gpu_gemm), ("reduction", _gpu_reduction_or_rowwise),
                    ("element-wise", _gpu_elementwise), ("other", _gpu_fallback)]
        if rows is not None:
            families.insert(2, ("row-wise element-wise", lambda r, i, g: _gpu_rowform(r, i, rows, g)))
        for family, schedule in families:
            if schedule(run, idx, gt):
                run.res.log.append(f"nest N{idx}: {family} schedule")
                break
    _fuse_rows(run)
    return run.res



__all__ = ["FEW_OUTPUTS", "GpuTiles", "ROW_BLOCKS", "optimize_cuda"]
