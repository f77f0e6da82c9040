"""``-O2``: repeated libm calls computed once, passes over the same rows fused, register blocking for GEMM-like
nests, vector partial sums for other reductions, row intermediates private to their row loop, then ``-O1`` and
vector loops inside fused row loops.

A fixed pipeline of ordinary, checked strategy steps (every step recorded; one that does
not apply is skipped and logged). For each top-level nest that is **GEMM-like** — a
perfect chain around one sum reduction ``X_{..., i, j} += e`` whose target subscripts
are distinct loop indices (at least two; a constant, a squeezed batch of 1, is allowed), with one or more reduction
loops, and in which
every access that uses the last target index ``j`` has it in its last subscript with
coefficient 1 (unit stride: ``B_{k,j}``, ``X_{n,c,h,w+kw}``) and in which some operand is reused
across the tile (reads only one of ``i``, ``j``) or all operands fit in L2
(:func:`tile_reuses_an_operand`: a sum over a middle dimension of 16 MiB streams faster
unblocked) — on CPU:

0. every kernel input the statement reads under a box guard (a convolution's zero padding,
   ``if_then_else(0 <= i - p < 64 & ..., X_{n,c,i-p,j-q}, 0.0)``) gets ``pad_input``: one copy
   into a zero-padded tensor before the nest, plain loads in the hot loop (conv_transpose2d
   2.2 -> 1.0 ms); a guarded product whose guard speaks of each factor's own subscripts
   (``if_then_else(i <= k <= j, A_{i,k}*B_{k,j}, 0.0)`` of ``triu(A) @ triu(B)``) first gets
   ``distribute_guard`` (exact in the reals) and its factors ``mask_input``: two masked copies,
   then a plain GEMM; all of it undone if the nest is not blocked after all;
1. the rows ``i`` of the tile are the last target index (before ``j``) that an operand read
   along ``j`` does not use, so that operand's vector feeds every row: ``i`` of a matmul,
   the output channel ``o`` of a convolution ``C_{n,o,h,w}`` (its input ``X_{n,c,h,w}`` has
   no ``o``; blocking ``h`` instead reloads ``X`` for every row). The other target indices
   are batch loops;
2. ``loop_reorder``: batch loops, ``i``, ``j``, then the reduction loops;
3. ``loop_tiling`` of ``i``, ``j`` by ``mr`` × ``nr``; with ``Tiles.outer == "j"`` (the default)
   ``loop_reorder`` puts the ``j`` tile loop outside the ``i`` tile loop, so one ``K × nr``
   panel of ``B`` stays in L2 while the row blocks of ``A`` pass (``"i"``: the other way round,
   all of ``B`` streams past each row block: 1.7× slower on ``matmul_standard``, whose ``B``
   is as large as L2); ``loop_reorder`` of the point loops to ``reductions, i, j``: the
   register tile ``(i, j)`` is innermost;
4. a nest whose only obstacle is a **transposed operand** — a kernel input that reads ``j``
   as a plain index in another dimension than its last, and not ``i`` (``W_{j,k}`` of
   ``X @ W.T``) — gets ``pack_input`` of that operand along that dimension by ``nr`` right
   after tiling (``W_{jo*nr+j,k}`` -> ``P_{jo,k,j}``): the copy nest runs once before the
   hot nest and the tile then reads it at unit stride;
5. ``cache_write`` at the inner tile loop: the ``mr × nr`` accumulator is a private tile,
   fresh per tile, written back once;
6. ``loop_parallelization`` of the outermost loop; ``loop_unrolling`` of ``i``;
   ``loop_split`` of ``j`` by the vector width, ``loop_unrolling`` of the outer part,
   ``loop_vectorization`` of the inner part (also in the write-back nest).

After unrolling and vectorization every tile element has a constant position, so LLVM
keeps the whole tile in vector registers across the reduction loop (``mr * nr / lanes``
accumulators, one broadcast of ``A`` and ``nr / lanes`` loads of ``B`` per step).

Before any of this, an **expensive intrinsic computed twice** — ``exp``, ``log``, ``erf``,
``tanh``, ``sigmoid`` or ``pow`` of the same operands in two nests that -O1's fusion leaves
apart, e.g. softmax's ``exp(X_{i,j} - Rmax_i)`` in the normalizer's sum and again in the output
— is computed once into a new intermediate (``common_subexpression_elimination``, bitwise).
``pow`` is one scalar libm call per lane on CPU (LLVM has no vector
library here); ``exp``, ``log``, ``erf``, ``sigmoid`` and ``tanh`` are inline vector code
(:mod:`leirc.lower.libm`: exp and sigmoid in f32, the others in f64) that still costs more than
a store and a reload (softmax, with f64 exp: 5.5 ms with one exp, 6.6 ms with two). Occurrences that end up in one fused loop body are left alone: LLVM
computes a pure expression once per iteration there, and the stored copy would only add a write
pass. (It removes one of softmax's two exp passes, and one of sdpa's and matmul_gelu_softmax's;
log_softmax and gelu have one exp/erf each and are unchanged.)

Then **passes over the same rows share one row loop**: consecutive nests with the same
outermost loop of at least :data:`MIN_ROWS` iterations around statements or single loops (a row
pass), where the second reads what the first wrote and one row of both (the tensors
they access, per iteration of that loop) fits in :data:`ROW_FOOTPRINT` bytes, get
``outer_fusion`` (softmax's max, exp, sum and output; a norm's statistics and its output). Each
row then comes from memory once and the later passes find it in L2. Not fused: GEMM-like nests
(they are blocked below), element-wise neighbours that -O1's ``operator_fusion`` merges into one
loop body (better than two passes), and nests with a statement that does not write its own row
(``S = S + P_i`` over the rows would make the fused row loop serial; hinge loss at -O2 ran 3.7x
slower than -O1 that way).

Every other sum/max/min reduction whose innermost loop ``k`` is a reduction loop read at
unit stride in the row-major buffer (``A_{m,k}``, ``W_{j,k}``, ``B_{k,0}`` of a ``[K, 1]``
vector: GEMV, a GEMM with a transposed operand, row
reductions) and has at least ``4 * lanes`` iterations gets ``vectorized_partial_sums``
(one private partial result per lane, ``k = ko*lanes + kv``) and ``loop_vectorization``
of the lane loop. A reduction loop that no width divides is first ``loop_peel``-ed when the
remainder is at most 1/:data:`MAX_PEELED` of it (a min over 255 columns: 240 in partial sums,
then 15 scalar steps that continue the same reduction as an update).

A sum (or max, min) over the rows of each column, ``S_{i} += M_{j,i}`` with ``i`` the only
spatial loop (a batch norm's statistics over the batch), runs as parallel blocks of ``lanes``
columns with the rows summed in a vector loop (:func:`_column_reductions`); -O1 would open one
parallel region per row.

Then every intermediate that a top-level loop of at least :data:`MIN_ROWS` iterations uses
alone, one row per iteration (the loop index is the same subscript in every access), with at
most :data:`ROW_FOOTPRINT` bytes per row, gets ``privatize`` at that loop: softmax's stored
``exp(X - Rmax)`` row and its ``Rmax``/``Rsum`` statistics become private to the row loop —
allocated per iteration, so the row stays in cache and is never written back to memory
(softmax 4.2 -> 4.0 ms).

Then :func:`leirc.opt.o1.optimize` runs on the result (fusion, reordering, parallel and
vector loops for the other nests; on a blocked nest it only marks a nested loop parallel,
which the lowering runs serially). Where -O1 fused an expensive intrinsic with a reduction
along the same innermost loop (GELU and a global average pool), the reduction keeps that loop
serial: ``operator_fission`` splits the reduction off and the element-wise loop is vectorized
(:func:`_split_off_reductions`). -O1 vectorizes perfect chains only, so last, every innermost
serial loop of a nest that is not a perfect chain, that reads or writes at unit stride along
it, has at least ``4 * lanes`` iterations and a multiple of ``lanes``, does not reduce along it
and calls nothing without a vector form (:func:`leirc.opt.o1.scalar_only_calls`) gets
``loop_split`` by ``lanes`` and ``loop_vectorization`` (both undone if the second is refused):
the element-wise passes inside a fused row loop.

Tile sizes are arguments (``mr``, ``nr``, ``lanes``) so a search can tune them; the
defaults come from the target: ``lanes`` is the f32 vector width of the host CPU (16 with
AVX-512, 8 with AVX/AVX2, else 4, read from ``/proc/cpuinfo``), ``nr = 2 * lanes``,
``mr = 8`` (16 accumulators of 32 vector registers with AVX-512), ``outer = "j"``. A dimension that ``mr``
or ``nr`` does not divide takes the largest smaller candidate that does (``nr`` stays a
multiple of ``lanes``); one no wider than the tile and a multiple of half a vector is a tile
of its own (8 or 16 output channels of a small convolution: ``loop_split`` of the rows only, the
channels one vector of 8 or 16 lanes; l2_047's conv3d 0.36 -> 0.055 ms, lenet5 0.48 -> 0.13,
a stride-2 transposed convolution 2.4 -> 0.12 ms); otherwise the next **layout** is tried (:func:`_gemm_layouts`): another
target index as ``j``, from the inside out, if every operand that reads it can be packed as in
step 4 — a convolution whose output width (30, or read at stride 2) has no vector tile gets its
vector over the output channels ``o``: the weights are packed to ``P_{oo,c,kh,kw,o}``, the
input is one broadcast per tile row (``w``), ``cache_write(layout=loops)`` orders the tile
``[w, o]`` so the vector loop reads it at unit stride, and only the write-back is strided.
When no layout tiles as it is, the first one is tried once more with its untiled dimension
moved outermost and ``loop_peel``-ed (:func:`_peel_for_tiles`): ``j`` = 741 becomes a head of
736 = 23 × 32 that is blocked as above and a 5-column remainder, with its own initialization
nest, left to -O1 (matmul_irregular 11.7 -> 2.7 ms). Only where an operand is reused across
the tile's rows and the remainder is at most 1/:data:`MAX_PEELED` of the loop (a slow tail of
a short loop cost more than blocking saved).
Then the nest is left to ``-O1``. The blocked nest runs in parallel over its first loop of
more than one iteration (not a batch of 1).

CUDA has its own pipeline, :mod:`leirc.opt.o2_cuda`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from ..lang import ast as A
from ..lang.affine import affine
from ..lang.checker import CheckResult, check_kernel
from ..lang.types import DTYPE_BYTES
from ..strategies import NotApplicable, Step, get
from ..strategies.base import Context, plan_step
from ..strategies.rewrite import find_loop, iter_loops, iter_stmts, nest_chain, tensors_read, tensors_written
from . import o1
from .o1 import Choices as O1Choices, O1Result

if TYPE_CHECKING:
    from .o2_cuda import GpuTiles


@dataclass(frozen=True)
class Tiles:
    """Register tile of a GEMM-like nest: ``mr`` rows × ``nr`` columns, ``lanes`` f32 per vector;
    ``outer``: which tile loop runs outside the other (``"i"``: a row block of ``A`` stays in L1
    while all of ``B`` streams past it; ``"j"``: a ``K × nr`` panel of ``B`` stays in L2 while
    ``A`` streams)."""

    mr: int = 8
    nr: int = 32
    lanes: int = 16
    outer: str = "j"


@dataclass(frozen=True)
class Choices:
    """-O2's decisions besides the register tile, as arguments (a tuner's knobs,
    :mod:`leirc.search.space`); the defaults are the pipeline of the module docstring. Each
    flag turns one of its phases on or off: ``cse`` (a libm call computed once), ``outer_fusion``
    (passes over the same rows in one row loop), ``block`` (register blocking of GEMM-like nests),
    ``pack`` (packing transposed operands; without it only layouts read at unit stride are
    blocked), ``unroll`` (the tile rows and vector groups unrolled), ``partial_sums``,
    ``column_reductions``, ``privatize`` (row intermediates private to their row loop),
    ``fission`` (an intrinsic split off a reduction), ``vectorize_inner`` (vector loops inside
    fused row loops); ``o1``: the decisions of the ``-O1`` pass that runs in the middle."""

    cse: bool = True
    outer_fusion: bool = True
    block: bool = True
    pack: bool = True
    unroll: bool = True
    partial_sums: bool = True
    column_reductions: bool = True
    privatize: bool = True
    fission: bool = True
    vectorize_inner: bool = True
    o1: O1Choices = O1Choices()


def host_vector_lanes(cpuinfo: Optional[str] = None) -> int:
    """f32 lanes of the widest vector unit the host's OS grants (16, 8 or 4): the target's
    (:class:`leirc.target.Target`), from ``/proc/cpuinfo`` or the given cpuinfo text."""
    from ..target import Target, target_of

    return (target_of("llvm") if cpuinfo is None else Target.host(cpuinfo=cpuinfo)).lanes()


def default_tiles(target="llvm") -> Tiles:
    """The register tile for ``target`` (a spec or :class:`leirc.target.Target`): ``lanes``
    from the vector width its features grant, ``mr`` 8 rows with 32 vector registers (AVX-512)
    else 4, ``nr`` two vectors."""
    from ..target import target_of

    t = target_of(target)
    lanes = t.lanes() if t.kind == "llvm" else 4
    return Tiles(mr=8 if lanes >= 16 else 4, nr=2 * lanes, lanes=max(lanes, 4))


def tile_variants(target: str = "llvm") -> list[Tiles]:
    """The register tiles a search tries, :func:`default_tiles` first: ``mr`` rows (a divisor-
    friendly 4, 6, 8, 12 or 16) by ``nv`` vectors whose ``mr * nv`` accumulators, ``nv`` loads
    of ``B`` and one broadcast fit the vector registers (32 with AVX-512, else 16), at least half
    of them accumulating (fewer cannot hide the FMA latency); more accumulators first (more
    reuse per load), wider first among equals (unit-stride loads of ``B``); the default with
    the other tile-loop order third. Measured against the default on an AMD Zen 4 (AVX-512, 2
    threads, interleaved): 6x64 (4x64 where 6 rows do not divide) 1.03-1.07x on the 512^3,
    standard and batched GEMMs but 0.8x on matmul_irregular, the other order 0.86-1.06x: no tile
    is best everywhere, hence search knobs."""
    base = default_tiles(target)
    lanes = base.lanes
    regs = 32 if lanes >= 16 else 16
    fits = [(mr, nv) for nv in (4, 3, 2, 1) for mr in (16, 12, 8, 6, 4)
            if regs // 2 <= mr * nv and mr * nv + nv + 1 <= regs]
    fits.sort(key=lambda t: (-t[0] * t[1], -t[1]))
    out = [base]
    for mr, nv in fits:
        t = Tiles(mr=mr, nr=nv * lanes, lanes=lanes, outer=base.outer)
        if t not in out:
            out.append(t)
    out.insert(min(2, len(out)), Tiles(base.mr, base.nr, lanes, "i" if base.outer == "j" else "j"))
    return out


@dataclass
class Gemm:
    """What the recognizer found in one nest."""

    stmt: str  # statement reference
    batch: list  # loop vars
    i: str
    j: str
    reductions: list


def _uses(a: A.Access, v: str) -> list[int]:
    """Dimensions of ``a`` whose subscript mentions loop index ``v``."""
    return [k for k, e in enumerate(a.indices) if any(isinstance(n, A.Var) and n.name == v for n in A.walk(e))]


def _unit_stride_last(a: A.Access, j: str) -> bool:
    aff = affine(a.indices[-1])
    return _uses(a, j) == [len(a.indices) - 1] and aff is not None and aff[0].get(j) == 1


def gemm_like(kernel: A.Kernel, result: CheckResult, idx: int, *, unit_stride: bool = True,
              reuse_row: bool = False, j: Optional[str] = None) -> Optional[Gemm]:
    """The GEMM structure of top-level item ``idx`` (see the module docstring), or None.
    ``unit_stride=False`` drops the unit-stride condition on ``j`` (CUDA: threads, not
    vector lanes, run over ``j``). ``reuse_row=True`` picks as ``i`` the last target index
    that some operand read along ``j`` does not use (that operand's vector then feeds every
    row of the tile: ``o`` of a convolution ``C_{n,o,h,w}``, whose input ``X_{n,c,h,w}`` has
    no ``o``); without it, or when no index qualifies, ``i`` is the second-to-last index.
    ``j`` names another target index than the last as the vector dimension (a convolution's
    output channel ``o``, when the last extent has no vector tile); the accumulator's own
    read is then exempt from the unit-stride condition (it becomes the private tile)."""
    item = kernel.body[idx]
    if not isinstance(item, A.Loop):
        return None
    chain = nest_chain(item)
    body = chain[-1].body
    if len(body) != 1 or not isinstance(body[0], A.Assign):
        return None
    st = body[0]
    si = result.info(st)
    if si.kind != "reduce" or si.op != "+" or not si.reduce_vars:
        return None
    if any(l.start != 0 or l.kind != "L" for l in chain):
        return None
    if not all(isinstance(i, (A.Var, A.Const)) for i in st.target.indices):
        return None
    tvars = [i.name for i in st.target.indices if isinstance(i, A.Var)]  # a constant: a squeezed batch of 1
    if len(set(tvars)) != len(tvars) or len(tvars) < 2:
        return None
    if j is None:
        j = tvars[-1]
    elif j not in tvars:
        return None
    others = [v for v in tvars if v != j]
    reads = [n for n in A.walk(st.value) if isinstance(n, A.Access) and n != st.target]
    for a in reads:
        if unit_stride and _uses(a, j) and not _unit_stride_last(a, j):
            return None  # the vector dimension is not unit stride in this operand
    i = others[-1]
    if reuse_row:
        i = next((v for v in reversed(others) if any(_uses(a, j) and not _uses(a, v) for a in reads)), i)
    ref = next(r for r, s, _ in iter_stmts(kernel) if s is st)
    return Gemm(ref, [v for v in tvars if v not in (i, j)], i, j,
                [l.var for l in chain if l.var in si.reduce_vars])


#: operand bytes above which a register tile that reuses no operand is not worth blocking: they
#: come from memory, not from L2 (1 MiB per core on the Zen 4 measured; 1-2 MiB on current server cores)
STREAMED_BYTES = 1 << 20


def _operands(kernel: A.Kernel, g: Gemm) -> list:
    """The accesses ``g``'s statement reads, its accumulator's own read excluded."""
    st = next(s for r, s, _ in iter_stmts(kernel) if r == g.stmt)
    return [n for n in A.walk(st.value) if isinstance(n, A.Access) and n != st.target]


def tile_reuses_an_operand(kernel: A.Kernel, g: Gemm) -> bool:
    """Whether some operand of ``g``'s statement does not read ``g.i`` or ``g.j``: one load of it
    then feeds a row or a column of the register tile. Without one (``S_{n,h,w} += X_{n,c,h,w}**2``
    of rmsnorm, a sum over a middle dimension) the tile only keeps the partial sums in registers.
    That pays while the operands sit in L2 (a 512 KiB rmsnorm: 1.17x faster blocked), but on
    operands streamed from memory, walking ``mr`` strided rows per reduction step costs more than
    it saves (:data:`STREAMED_BYTES`): -O1's streaming order was 1.11x faster on the 16 MiB
    stdlib rmsnorm (medians of 40 interleaved timings each, 2026-12-07)."""
    return any(not _uses(a, g.i) or not _uses(a, g.j) for a in _operands(kernel, g))


def _operand_bytes(kernel: A.Kernel, result: CheckResult, g: Gemm) -> int:
    """Bytes of the distinct tensors ``g``'s statement reads (whole buffers)."""
    total = 0
    for name in sorted({a.name for a in _operands(kernel, g)}):
        t = result.tensors.get(name)
        if t is None or t.shape is None:
            return 0
        total += DTYPE_BYTES.get(t.dtype, 4) * math.prod(t.shape)
    return total


def transposed_operands(kernel: A.Kernel, result: CheckResult, g: Gemm) -> Optional[list[tuple[str, int]]]:
    """(tensor, dimension) of every operand of ``g``'s statement that reads ``j`` in another
    dimension than the last (``W_{j,k}``), if each is a kernel input indexed there by plain
    ``j`` alone and not by ``i``: packing it along that dimension by ``nr`` after tiling
    makes the tile's reads unit stride (``P_{jo,k,j}``). None if some operand cannot be."""
    out = []
    for a in _operands(kernel, g):
        if not _uses(a, g.j) or _unit_stride_last(a, g.j):
            continue
        info = result.tensors.get(a.name)
        dims = _uses(a, g.j)
        if (info is None or info.role != "input" or len(dims) != 1 or _uses(a, g.i)
                or not (isinstance(a.indices[dims[0]], A.Var) and a.indices[dims[0]].name == g.j)):
            return None
        if (a.name, dims[0]) not in out:
            out.append((a.name, dims[0]))
    return out


def _pad_guarded_inputs(run: PipelineRun, idx: int) -> int:
    """``pad_input`` for every kernel input that the statement of nest ``idx`` reads under a
    box guard (a convolution's zero padding), ``mask_input`` for one read under another
    guard over its subscripts (a triangle), after ``distribute_guard`` has moved a guarded
    product's comparisons onto its factors; returns how many copy nests went before it."""
    added = 0
    st_ref = next(r for r, _, p in iter_stmts(run.res.kernel) if p[0] == idx)
    if any(isinstance(n, A.Call) and n.func == "if_then_else" and len(n.args) == 3
           and isinstance(n.args[1], A.BinOp) and n.args[1].op == "*"
           for n in A.walk(next(s for r, s, _ in iter_stmts(run.res.kernel) if r == st_ref).value)):
        run.step("distribute_guard", stmt=st_ref)
    st = next(s for _, s, p in iter_stmts(run.res.kernel) if p[0] == idx)
    names = dict.fromkeys(n.args[1].name for n in A.walk(st.value)
                          if isinstance(n, A.Call) and n.func == "if_then_else" and len(n.args) == 3
                          and isinstance(n.args[1], A.Access))
    for name in names:
        info = run.res.result.tensors.get(name)
        if info is None or info.role != "input":
            continue
        ref = next(r for r, _, p in iter_stmts(run.res.kernel) if p[0] == idx + added)
        if run.step("pad_input", stmt=ref, tensor=name) is not None or \
                run.step("mask_input", stmt=ref, tensor=name) is not None:
            added += 1
    return added


def _gemm_layouts(kernel: A.Kernel, result: CheckResult, idx: int):
    """The ways to register-block nest ``idx``, best first, each as (Gemm, operands to pack):
    the last target index as the vector dimension, read at unit stride or after packing the
    operands that read it transposed; then each other target index from the inside out, if
    every operand that reads it can be packed. The second kind is a direct convolution whose
    output width has no vector tile (30, or read at stride 2): the vector runs over output
    channels ``o``, the packed weights ``P_{oo,c,kh,kw,o}`` are read at unit stride, the input
    is one broadcast per row, and only the write-back of each tile is strided."""
    g = gemm_like(kernel, result, idx, reuse_row=True)
    if g is not None:
        yield g, []
    item = kernel.body[idx]
    if not isinstance(item, A.Loop):
        return
    tried = {g.j} if g is not None else set()
    for j in [None] + [l.var for l in nest_chain(item)][::-1]:
        alt = gemm_like(kernel, result, idx, unit_stride=False, reuse_row=True, j=j)
        if alt is None or alt.j in tried:
            continue
        tried.add(alt.j)
        packs = transposed_operands(kernel, result, alt)
        if packs is not None:
            yield alt, packs


def fit_tile(extent: int, want: int, step: int) -> Optional[int]:
    """Largest multiple of ``step``, at most ``want``, that divides ``extent`` and is below it."""
    for f in range(want - want % step, 0, -step):
        if f < extent and extent % f == 0 and f > 1:
            return f
    return None


class PipelineRun:
    """One pipeline's state: the kernel so far, its check result, the steps and the log."""

    def __init__(self, kernel: A.Kernel, result: CheckResult):
        self.res = O1Result(kernel, result=result)

    def step(self, name: str, **args):
        try:
            rw = plan_step(self.res.kernel, Step.make(name, **args), result=self.res.result)
        except NotApplicable as e:
            self.res.log.append(f"skip {Step.make(name, **args)}: {e.reason}")
            return None
        self.res.kernel, self.res.result = rw.kernel, rw.result
        self.res.steps.append(rw.step)
        self.res.log.append(f"apply {rw.step}")
        return rw

    def loop(self, idx: int, var: str, nth: int = 0) -> Optional[str]:
        want = f"N{idx}.{var}" + (f"#{nth}" if nth else "")
        return want if any(r == want for r, _, _ in iter_loops(self.res.kernel)) else None


#: a peeled remainder is at most this fraction of its loop: it runs as -O1's scalar nest, about
#: ten times slower per element than the blocked head, and adds launches (257 x 93 x 185 with a
#: 25-column tail: 0.13 ms against 0.088 ms unblocked; 1025 x 369 x 741, 5 columns: 2.8 against 11.7)
MAX_PEELED = 16


def _peel_for_tiles(run: PipelineRun, idx: int, g: Gemm, tiles: Tiles,
                    peel: bool) -> tuple[Optional[int], Optional[int]]:
    """The register tile ``(mr, nr)`` of nest ``idx``. A dimension that no tile divides
    (``j`` = 741: no multiple of the vector width) is first moved outermost and
    ``loop_peel``-ed at the largest multiple of the widest tile that fits twice, so the head nest (still
    ``idx``) tiles and the remainder (741 % 32 = 5 columns) becomes a nest of its own after it,
    left to -O1. None where a dimension is too short for even one tile, or where ``peel`` is
    false or no operand read along ``j`` skips ``i``: without that reuse across the tile's rows
    (depthwise_conv2d's input, a row sum's) the blocked head was slower than -O1's whole nest
    (depthwise_conv2d 6.1 ms against 0.73)."""
    reused = any(_uses(a, g.j) and not _uses(a, g.i) for a in _operands(run.res.kernel, g))
    for v, want, step in ((g.j, tiles.nr, tiles.lanes), (g.i, tiles.mr, 1)):
        chain = nest_chain(run.res.kernel.body[idx])
        ext = {l.var: l.extent for l in chain}
        # a smaller tile that divides beats a peeled remainder (tried: peeling where
        # 4 * fit < 3 * want made conv_transpose2d and the row sums 1.8-3x slower)
        if _fit_or_whole(ext[v], want, step) is not None:
            continue
        if not (peel and reused):
            run.res.log.append(f"nest N{idx}: no register tile divides {v}={ext[v]}")
            return None, None
        # the widest tile of which at least two fit; the remainder is peeled off
        w = next((w for w in range(want - want % step, 1, -step) if ext[v] >= 2 * w and ext[v] % w), None)
        if w is None or MAX_PEELED * (ext[v] % w) > ext[v]:
            run.res.log.append(f"nest N{idx}: no register tile fits {v}={ext[v]} with a remainder of at most "
                               f"1/{MAX_PEELED}")
            return None, None
        head = ext[v] - ext[v] % w
        order = [v] + [l.var for l in chain if l.var != v]
        if chain[0].var != v and run.step("loop_reorder", loop=f"N{idx}.{chain[0].var}", order=",".join(order)) is None:
            return None, None
        if run.step("loop_peel", loop=f"N{idx}.{v}", at=head) is None:
            return None, None
    ext = {l.var: l.extent for l in nest_chain(run.res.kernel.body[idx])}
    return _fit_or_whole(ext[g.i], tiles.mr, 1), _fit_or_whole(ext[g.j], tiles.nr, tiles.lanes)


def _fit_or_whole(extent: int, want: int, step: int) -> Optional[int]:
    """:func:`fit_tile`, else the whole dimension when it is no wider than ``want`` and a
    multiple of half a vector (``step`` // 2): 8 or 16 output channels of a small
    convolution are one tile of half or one full vector, not a nest left to -O1."""
    fit = fit_tile(extent, want, step)
    if fit is None and 1 < extent <= want and extent % max(1, step // 2) == 0:
        return extent
    return fit


def _block_gemm(run: PipelineRun, idx: int, g: Gemm, tiles: Tiles, packs: list[tuple[str, int]] = (),
                peel: bool = False, unroll: bool = True) -> int:
    """Register-block the GEMM-like nest ``idx`` (``packs``: its transposed operands, packed
    along ``j`` after tiling; ``peel``: a remainder no tile divides may be peeled off,
    :func:`_peel_for_tiles`). Returns how many nests it added before ``idx`` (the packing
    copies), or -1 if the nest was left to -O1."""
    mark = run.res.mark()
    if not tile_reuses_an_operand(run.res.kernel, g) and _operand_bytes(run.res.kernel, run.res.result, g) > STREAMED_BYTES:
        run.res.log.append(f"nest N{idx}: not blocked: every operand reads both {g.i} and {g.j} and they exceed "
                           f"{STREAMED_BYTES >> 10} KiB (a reduction streamed from memory; -O1's order streams it)")
        return -1
    mr, nr = _peel_for_tiles(run, idx, g, tiles, peel)
    if mr is None or nr is None:
        run.res.undo(mark, f"nest N{idx}: not blocked along {g.i}, {g.j}")
        return -1
    k = run.res.kernel
    target = next(s for r, s, _ in iter_stmts(k) if r == g.stmt).target
    j_last = target.indices[-1] == A.Var(g.j)
    order = g.batch + [g.i, g.j] + g.reductions
    chain_vars = [l.var for l in nest_chain(k.body[idx])]
    ok = True
    if chain_vars != order:
        ok = run.step("loop_reorder", loop=f"N{idx}.{chain_vars[0]}", order=",".join(order)) is not None
    whole_j = nr == {l.var: l.extent for l in nest_chain(run.res.kernel.body[idx])}[g.j]
    if whole_j:  # the tile spans all of j (:func:`_fit_or_whole`): only the rows are tiled
        tiled = ok and run.step("loop_split", loop=f"N{idx}.{g.i}", factor=mr)
        jo = tiled.created["outer"] if tiled else None
    else:
        tiled = ok and run.step("loop_tiling", loop=f"N{idx}.{g.i}", factor_outer=mr, factor_inner=nr)
        jo = tiled.created["inner_tile"] if tiled else None  # the tile loop right around the point loops
    ok = bool(tiled)
    if ok and tiles.outer == "j" and not whole_j:
        io = tiled.created["outer_tile"]
        chain = [l.var for l in nest_chain(find_loop(run.res.kernel, io)[0])]
        swap = [chain[1], chain[0]] + chain[2:]
        swapped = run.step("loop_reorder", loop=io, order=",".join(swap))
        ok = swapped is not None
        jo = swapped.forward(io) if ok else None
        ok = ok and jo is not None
    added = 0
    for tensor, dim in packs:
        if not ok:
            break
        stmt = next(r for r, _, p in iter_stmts(run.res.kernel) if p[0] == idx)
        packed = run.step("pack_input", stmt=stmt, tensor=tensor, dim=dim, factor=nr)
        ok = packed is not None
        if ok:
            jo = packed.forward(jo)
            idx += 1
            added += 1
    if ok:
        ok = run.step("loop_reorder", loop=f"N{idx}.{g.i}", order=",".join(g.reductions + [g.i, g.j])) is not None
        stmt = next(r for r, _, p in iter_stmts(run.res.kernel) if p[0] == idx)
        # the tile's last dimension is j's, whatever X's subscript order: unit-stride vectors
        layout = {} if j_last else {"layout": "loops"}
        ok = ok and run.step("cache_write", stmt=stmt, loop=jo, scope="l", **layout) is not None
    if not ok:
        run.res.undo(mark, f"nest N{idx - added}: undo register blocking")
        return -1
    # from here on every step only changes loop kinds or splits: a skipped one costs speed only
    # the outermost loop that has more than one iteration (a batch of 1 would leave one core idle)
    chain = nest_chain(run.res.kernel.body[idx])
    outer = next((l for l in chain if l.extent > 1), chain[0])
    run.step("loop_parallelization", loop=f"N{idx}.{outer.var}")
    if unroll:
        run.step("loop_unrolling", loop=f"N{idx}.{g.i}")
    for nth in (0, 1):  # the accumulation nest, then the write-back nest
        j = run.loop(idx, g.j, nth)
        if j is None:
            continue
        if nr > tiles.lanes:
            split = run.step("loop_split", loop=j, factor=tiles.lanes)
            if split is None:
                continue
            if nth == 0 and unroll:
                run.step("loop_unrolling", loop=split.created["outer"])
            j = split.created["inner"]
        run.step("loop_vectorization", loop=j)
    return added


def _element_stride(access: A.Access, var: str, shape: Optional[tuple[int, ...]]) -> Optional[int]:
    """How many elements of the row-major buffer ``access`` moves when ``var`` grows by one
    (``B_{j*128+k,0}`` of a ``[16384, 1]`` tensor: 1, a GEMV's vector), or None when an index
    using ``var`` is not affine or the shape is unknown."""
    stride = 0
    for d, e in enumerate(access.indices):
        if not any(isinstance(v, A.Var) and v.name == var for v in A.walk(e)):
            continue
        aff = affine(e)
        if aff is None or shape is None:
            return None
        stride += aff[0].get(var, 0) * math.prod(shape[d + 1:])
    return stride


def _partial_sums_candidates(kernel: A.Kernel, result: CheckResult, lanes: int):
    """(statement reference, its innermost loop, the vector widths that fit four times) of
    every reduction that vector partial sums apply to (module docstring), in program order."""
    private = {n for n, t in result.tensors.items() if t.private}
    for ref, st, _ in iter_stmts(kernel):
        si = result.info(st)
        if si.kind != "reduce" or si.op not in ("+", "max", "min") or not si.loops:
            continue
        k = si.loops[-1]
        if k.var not in si.reduce_vars or k.body != (st,) or k.start != 0 or k.kind != "L":
            continue
        reads = [n for n in A.walk(st.value) if isinstance(n, A.Access)]
        if st.target.name in private or any(a.name in private for a in reads):
            continue
        strides = [_element_stride(a, k.var, result.tensors[a.name].shape) for a in reads]
        if not any(strides) or any(st not in (0, 1) for st in strides):
            continue
        yield ref, k, [w for w in (lanes, lanes // 2, lanes // 4) if w >= 4 and k.extent >= 4 * w]


def partial_sums_site(kernel: A.Kernel, result: CheckResult, lanes: int) -> Optional[tuple[str, int]]:
    """(statement reference, lanes) of the first reduction worth splitting into vector
    partial sums (module docstring), or None."""
    for ref, k, widths in _partial_sums_candidates(kernel, result, lanes):
        fit = next((w for w in widths if k.extent % w == 0), None)
        if fit is not None:
            return ref, fit
    return None


def partial_sums_peel(kernel: A.Kernel, result: CheckResult, lanes: int) -> Optional[tuple[str, int]]:
    """(loop reference, iterations) of the first such reduction whose loop no vector width
    divides but whose remainder is at most 1/:data:`MAX_PEELED` of it (a min over 255 = 240 +
    15): ``loop_peel`` there makes the head a :func:`partial_sums_site`."""
    for _, k, widths in _partial_sums_candidates(kernel, result, lanes):
        if any(k.extent % w == 0 for w in widths):
            continue
        w = next((w for w in widths if MAX_PEELED * (k.extent % w) <= k.extent), None)
        if w is not None:
            return next(r for r, lp, _ in iter_loops(kernel) if lp is k), k.extent - k.extent % w
    return None


#: intrinsics that cost more than storing and reloading their value: the scalar libm calls of
#: the CPU build (``pow``: LLVM has no vector library here, so ``llvm.pow.v16f32`` becomes 16
#: ``powf`` calls) and the inline ``exp``/``log``/``erf``/``sigmoid``/``tanh`` of
#: :mod:`leirc.lower.libm` (about 20 f32 operations per 16 lanes for exp, 30 for erf; softmax at
#: -O2 with the earlier f64 exp: 5.5 ms computing exp once, 6.6 ms twice); ``sqrt`` and ``rsqrt`` are instructions and not in the list
LIBM_CALLS = frozenset({"exp", "log", "erf", "tanh", "sigmoid", "pow"})


def _fused(kernel: A.Kernel, result: CheckResult) -> A.Kernel:
    """``kernel`` after -O1's first step, fusing nests until no ``operator_fusion`` site is left."""
    fusion = get("operator_fusion")
    for _ in range(64):  # each fusion removes a nest
        sites = fusion.sites(Context(kernel, result))
        if not sites:
            break
        try:
            rw = plan_step(kernel, sites[0].first_step(), result=result)
        except NotApplicable:
            break
        kernel, result = rw.kernel, rw.result
    return kernel


def _nests_reading(kernel: A.Kernel, tensor: str) -> int:
    return sum(1 for item in kernel.body if tensor in tensors_read(item))


def _share_libm_calls(run: PipelineRun) -> None:
    """Compute each libm call that occurs twice with the same operands once (module docstring)."""
    cse = get("common_subexpression_elimination")
    for _ in range(16):  # each application removes at least one repeated call
        for site in cse.sites(run.res.context()):
            step = site.first_step()
            try:
                rw = plan_step(run.res.kernel, step, result=run.res.result)
            except NotApplicable:
                continue
            name = rw.created["value"]
            value = next(st.value for _, st, _ in iter_stmts(rw.kernel) if st.target.name == name)
            # only a whole libm call: sharing a cheap operand (``X - Rmax``) would add a
            # memory pass to save one subtraction
            if (isinstance(value, A.Call) and value.func in LIBM_CALLS
                    and _nests_reading(_fused(rw.kernel, rw.result), name) >= 2):
                run.res.kernel, run.res.result = rw.kernel, rw.result
                run.res.steps.append(rw.step)
                run.res.log.append(f"apply {rw.step}")
                break
        else:
            return


#: bytes one iteration of a shared row loop may touch for :func:`_fuse_row_passes` to fuse its
#: passes: they then meet the row in L2 (512 KiB-2 MiB per core on current server cores)
ROW_FOOTPRINT = 512 * 1024
#: rows a fused row loop needs: its iterations are the parallel work
MIN_ROWS = 16


def _row_bytes(kernel: A.Kernel, result: CheckResult, items: list) -> Optional[int]:
    """Bytes of the tensors ``items`` access in one iteration of their outermost loop, or
    None when a tensor is accessed without that loop's index (all of it, every row)."""
    total = 0
    for name in sorted({n.name for it in items for n in A.walk(it) if isinstance(n, A.Access)}):
        t = result.tensors.get(name)
        if t is None or t.shape is None:
            return None
        size = DTYPE_BYTES.get(t.dtype, 4)
        for d in t.shape:
            size *= d
        if t.rank == 0 or math.prod(t.shape) <= 1:
            total += size
            continue
        rows = set()
        for it in items:
            for n in A.walk(it):
                if isinstance(n, A.Access) and n.name == name:
                    rows.add(bool(n.indices) and isinstance(n.indices[0], A.Var) and n.indices[0].name == it.var)
        if rows != {True}:
            return None
        total += size // items[0].extent
    return total


def _fuse_row_passes(run: PipelineRun) -> None:
    """``outer_fusion`` of consecutive nests that pass over the same rows, where the second
    reads what the first wrote and one row of both fits in L2 (softmax's max, exp, sum and
    normalisation; a norm's statistics and its output): each row is read from memory once
    and the later passes find it in L2. GEMM-like nests are left to register blocking."""
    idx = 0
    while idx < len(run.res.kernel.body) - 1:
        k, r = run.res.kernel, run.res.result
        a, b = k.body[idx], k.body[idx + 1]
        fused = False
        if (isinstance(a, A.Loop) and isinstance(b, A.Loop) and a.extent == b.extent and a.start == b.start
                and a.extent >= MIN_ROWS and _row_pass(a) and _row_pass(b)
                and _row_local(k, idx) and _row_local(k, idx + 1)
                and not any(gemm_like(k, r, j, unit_stride=False) for j in (idx, idx + 1))
                and not _elementwise_pair(run, idx)):
            written = {st.target.name for _, st, p in iter_stmts(k) if p[0] == idx}
            footprint = _row_bytes(k, r, [a, b])
            if written & tensors_read(b) and footprint is not None and footprint <= ROW_FOOTPRINT:
                fused = run.step("outer_fusion", nest=idx) is not None
        if not fused:
            idx += 1


def _privatize_rows(run: PipelineRun) -> None:
    """``privatize`` every intermediate that a top-level loop of at least :data:`MIN_ROWS`
    iterations uses alone, one row per iteration, when that row fits in :data:`ROW_FOOTPRINT` bytes:
    softmax's stored ``exp(X - Rmax)`` then stays in the cache (a private row of the parallel
    loop) instead of being written to memory and read back, and the row statistics ``Rmax``
    and ``Rsum`` become private scalars."""
    idx = 0
    while idx < len(run.res.kernel.body):
        k, r = run.res.kernel, run.res.result
        nest = k.body[idx]
        if not (isinstance(nest, A.Loop) and nest.extent >= MIN_ROWS):
            idx += 1
            continue
        for name in sorted(tensors_read(nest) | tensors_written(nest)):
            t = r.tensors.get(name)
            if t is None or t.role != "intermediate" or not t.shape:
                continue
            row = DTYPE_BYTES.get(t.dtype, 4) * math.prod(t.shape) // max(1, nest.extent)
            items = len(run.res.kernel.body)
            if row <= ROW_FOOTPRINT and run.step("privatize", tensor=name, loop=f"N{idx}.{nest.var}"):
                idx -= items - len(run.res.kernel.body)  # a declaration before the nest moved into it
        idx += 1


def _column_reductions(run: PipelineRun, lanes: int) -> None:
    """A reduction over the rows of a column block, ``T_{i} += E_{r, ..., i}`` with the
    reduction loops inside ``i``, the only spatial loop, and ``i`` the last subscript of every
    access at unit stride (a batch norm's statistics over the batch), gets ``loop_split`` of ``i`` by ``lanes`` and
    ``loop_reorder`` to ``io, reductions, i`` with ``i`` vectorized: each thread sums a
    block of columns along unit-stride rows. -O1 alone moves ``i`` innermost and parallelizes
    it under the serial reduction loop, one parallel region per row (64 regions of 256
    additions each in l2_033's batch norm)."""
    for idx, item in enumerate(run.res.kernel.body):
        if not isinstance(item, A.Loop):
            continue
        chain = nest_chain(item)
        body = chain[-1].body
        if len(body) != 1 or not isinstance(body[0], A.Assign) or any(l.kind != "L" or l.start != 0 for l in chain):
            continue
        st = body[0]
        si = run.res.result.info(st)
        if si.kind != "reduce" or si.op not in ("+", "max", "min") or not st.target.indices:
            continue
        last = st.target.indices[-1]
        if not isinstance(last, A.Var):
            continue
        i = last.name
        vars_ = [l.var for l in chain]
        spatial = [v for v in vars_ if v not in si.reduce_vars]
        if spatial != [i] or vars_.index(i) == len(vars_) - 1:
            # i is the only spatial loop, with the reductions inside it: with another spatial
            # loop outside, -O1 parallelizes that one (rmsnorm's n) and the rows stream
            continue
        ext = chain[vars_.index(i)].extent
        if ext % lanes or ext < 2 * lanes:
            continue
        reads = [n for n in A.walk(st.value) if isinstance(n, A.Access)]
        if not reads or not all(_unit_stride_last(a, i) for a in reads + [st.target]):
            continue
        if any(_uses(a, r) and len(a.indices) - 1 in _uses(a, r) for a in reads for r in si.reduce_vars):
            continue
        mark = run.res.mark()
        split = run.step("loop_split", loop=f"N{idx}.{i}", factor=lanes)
        if split is None:
            continue
        io, inner = split.created["outer"], split.created["inner"]
        order = [find_loop(run.res.kernel, io)[0].var] + [v for v in vars_ if v != i] + \
            [find_loop(run.res.kernel, inner)[0].var]
        head = nest_chain(run.res.kernel.body[idx])[0].var
        if run.step("loop_reorder", loop=f"N{idx}.{head}", order=",".join(order)) is None or \
                run.step("loop_vectorization", loop=f"N{idx}.{order[-1]}") is None:
            run.res.undo(mark, f"nest N{idx}: column reduction left to -O1")


def _elementwise_pair(run: PipelineRun, idx: int) -> bool:
    """-O1 fuses nests ``idx`` and ``idx + 1`` into one loop body (better than two passes in
    one row loop): row fusion leaves the pair to it."""
    return any(s.fixed["nest"] == idx for s in get("operator_fusion").sites(run.res.context()))


def _row_pass(nest: A.Loop) -> bool:
    """A pass over one row: the row loop around statements and loops that hold statements only
    (softmax's ``L_i L_j [...]``). Deeper nests keep -O1's reordering, parallel and vector
    choices: on a batch loop of 2 or 4 (maxpool3d, a 4-d rmsnorm) row fusion took them away
    (1.5-1.7x slower)."""
    return all(isinstance(x, A.Assign) or (isinstance(x, A.Loop) and all(isinstance(y, A.Assign) for y in x.body))
               for x in nest.body)


def _row_local(kernel: A.Kernel, idx: int) -> bool:
    """Every statement of nest ``idx`` writes elements of its outermost loop's row: the fused
    row loop stays parallel (a sum over the rows into one scalar would serialize it)."""
    row = kernel.body[idx].var
    return all(any(isinstance(n, A.Var) and n.name == row for i in st.target.indices for n in A.walk(i))
               for _, st, p in iter_stmts(kernel) if p[0] == idx)


def _vectorize_inner(run: PipelineRun, lanes: int) -> None:
    """``loop_split`` by ``lanes`` and ``loop_vectorization`` of the innermost loops that -O1
    leaves serial inside a fused row loop (it vectorizes perfect chains only): element-wise
    passes over a row that read and write it at unit stride."""
    done: set = set()
    for _ in range(64):  # each round vectorizes one loop
        k = run.res.kernel
        pick = None
        for ref, lp, path in iter_loops(k):
            if (ref in done or len(path) < 2 or lp.kind != "L" or lp.extent % lanes or lp.extent < 4 * lanes
                    or not all(isinstance(x, A.Assign) for x in lp.body) or o1.scalar_only_calls(lp)):
                continue
            if any(c is lp for c in nest_chain(k.body[path[0]])):
                continue  # the innermost loop of a perfect chain: -O1 decided about it
            accesses = [n for st in lp.body for n in A.walk(st) if isinstance(n, A.Access)]
            if any(run.res.result.info(st).kind == "reduce" and lp.var not in _target_vars(st) for st in lp.body):
                continue  # a reduction along the loop: -O2's partial sums, not a vector loop
            if not any(_unit_stride_last(a, lp.var) for a in accesses):
                continue
            pick = ref
            break
        if pick is None:
            return
        done.add(pick)
        mark = run.res.mark()
        split = run.step("loop_split", loop=pick, factor=lanes)
        if split is None or run.step("loop_vectorization", loop=split.created["inner"]) is None:
            run.res.undo(mark, f"{pick}: not vectorized")
        else:
            done.add(split.created["outer"])


def _split_off_reductions(run: PipelineRun) -> None:
    """A perfect chain whose serial innermost loop computes an expensive intrinsic
    (:data:`LIBM_CALLS`) element-wise and then reduces along that loop (-O1 fused
    ``G = gelu(C)`` with ``S_{i,j} += G_{i,j,k,m}``; the reduction keeps the loop serial, so
    the erf ran as scalar code) gets ``operator_fission`` before its trailing reductions and
    ``loop_vectorization`` of the element-wise nest's innermost loop, of any extent. The
    reduction then reads the stored values again, a pass that costs less than scalar
    intrinsics (l2_067: 0.64 -> 0.19 ms)."""
    idx = 0
    while idx < len(run.res.kernel.body):
        item = run.res.kernel.body[idx]
        idx += 1
        if not isinstance(item, A.Loop):
            continue
        chain = nest_chain(item)
        inner = chain[-1]
        stmts = list(inner.body)
        if inner.kind != "L" or len(stmts) < 2 or not all(isinstance(x, A.Assign) for x in stmts) \
                or o1.scalar_only_calls(inner):
            continue
        along = [run.res.result.info(st).kind == "reduce" and inner.var not in _target_vars(st) for st in stmts]
        at = along.index(True) if True in along else len(stmts)
        if at == 0 or at == len(stmts) or not all(along[at:]):
            continue
        if not any(isinstance(n, A.Call) and n.func in LIBM_CALLS for st in stmts[:at] for n in A.walk(st.value)):
            continue
        mark = run.res.mark()
        if run.step("operator_fission", nest=idx - 1, at=at) is None or \
                run.step("loop_vectorization", loop=f"N{idx - 1}.{inner.var}") is None:
            run.res.undo(mark, f"nest N{idx - 1}: the reduction stays fused (no vector loop without it)")
            continue
        idx += 1  # the reductions' nest


def _target_vars(st: A.Assign) -> set:
    return {n.name for i in st.target.indices for n in A.walk(i) if isinstance(n, A.Var)}


def _partial_sums(run: PipelineRun, lanes: int) -> None:
    for _ in range(64):  # each application removes one qualifying reduction
        mark = run.res.mark()
        site = partial_sums_site(run.res.kernel, run.res.result, lanes)
        if site is None:
            # a reduction loop no width divides: peel the remainder, the head is a site
            peel = partial_sums_peel(run.res.kernel, run.res.result, lanes)
            if peel is None or run.step("loop_peel", loop=peel[0], at=peel[1]) is None:
                return
            site = partial_sums_site(run.res.kernel, run.res.result, lanes)
            if site is None:
                run.res.undo(mark, f"{peel[0]}: peeled, but no partial sums")
                return
        ref, width = site
        rw = run.step("vectorized_partial_sums", stmt=ref, lanes=width)
        if rw is None:
            if len(run.res.steps) > mark[2]:
                run.res.undo(mark, f"{ref}: peeled, but no partial sums")
            return
        part = rw.created["partial"]
        lane = next((r for r, lp, _ in iter_loops(run.res.kernel)
                     if len(lp.body) == 1 and isinstance(lp.body[0], A.Assign) and lp.body[0].target.name == part), None)
        if lane is not None:
            run.step("loop_vectorization", loop=lane)


def optimize(kernel: A.Kernel, target: str = "llvm", result: Optional[CheckResult] = None, *,
             tiles: Optional[Tiles] = None, gpu: Optional[GpuTiles] = None,
             choices: Choices = Choices()) -> O1Result:
    """Run the -O2 pipeline (module docstring) for ``target``; ``tiles`` overrides the
    register tile the target suggests (:func:`default_tiles`), ``gpu`` the CUDA launch
    shape (:class:`GpuTiles`), ``choices`` the phases it runs (:class:`Choices`, CPU only)."""
    if result is None or result.kernel is not kernel:
        result = check_kernel(kernel)
    if not result.ok:
        raise NotApplicable("-O2", "the program has errors")
    if o1.target_kind(target) == "cuda":
        from .o2_cuda import optimize_cuda

        return optimize_cuda(kernel, result, gpu)
    tiles = tiles or default_tiles(target)
    run = PipelineRun(kernel, result)
    run.res.log.append(f"register tile mr={tiles.mr} nr={tiles.nr} lanes={tiles.lanes}")
    for name, enabled, fn in PASSES:
        if enabled(choices):
            fn(run, tiles, choices, target)
    return run.res


def _block_nests(run: "PipelineRun", tiles: Tiles, choices: Choices, _target) -> None:
    """Register blocking of every GEMM-like nest, in order (a nest read under a box guard is
    padded first; the padding is undone when no layout blocks after all)."""
    idx = 0
    while idx < len(run.res.kernel.body):
        mark = run.res.mark()
        padded = _pad_guarded_inputs(run, idx) if gemm_like(run.res.kernel, run.res.result, idx,
                                                            unit_stride=False) else 0
        # every layout whole first; peeling a remainder off only when none tiles as it is
        # (conv_transpose2d blocks over its output channels instead of peeling its width)
        for g, packs, peel in ((g, packs, peel) for peel in (False, True)
                               for g, packs in _gemm_layouts(run.res.kernel, run.res.result, idx + padded)
                               if choices.pack or not packs):
            added = _block_gemm(run, idx + padded, g, tiles, packs, peel, choices.unroll)
            if added >= 0:
                idx += padded + added
                break
        else:
            if len(run.res.steps) > mark[2]:
                run.res.undo(mark, f"nest N{idx}: undo padding and masking (the nest was not blocked)")
        idx += 1


def _run_o1(run: "PipelineRun", _tiles: Tiles, choices: Choices, target) -> None:
    rest = o1.optimize(run.res.kernel, target, run.res.result, choices=choices.o1)
    run.res.kernel, run.res.result = rest.kernel, rest.result
    run.res.steps.extend(rest.steps)
    run.res.log.extend(rest.log)


#: -O2 on a CPU, as one readable list of named passes: (name, whether the choices run it, the
#: pass). -O1 is one of them; the passes after it work on what -O1 made of the nests.
PASSES: tuple = (
    ("cse", lambda c: c.cse, lambda run, t, c, _: _share_libm_calls(run)),
    ("outer_fusion", lambda c: c.outer_fusion, lambda run, t, c, _: _fuse_row_passes(run)),
    ("block", lambda c: c.block, _block_nests),
    ("partial_sums", lambda c: c.partial_sums, lambda run, t, c, _: _partial_sums(run, t.lanes)),
    ("column_reductions", lambda c: c.column_reductions, lambda run, t, c, _: _column_reductions(run, t.lanes)),
    ("privatize", lambda c: c.privatize, lambda run, t, c, _: _privatize_rows(run)),
    ("o1", lambda c: True, _run_o1),
    ("fission", lambda c: c.fission, lambda run, t, c, _: _split_off_reductions(run)),
    ("vectorize_inner", lambda c: c.vectorize_inner, lambda run, t, c, _: _vectorize_inner(run, t.lanes)),
)


__all__ = ["LIBM_CALLS", "MAX_PEELED", "PASSES", "Choices", "Gemm", "PipelineRun", "Tiles", "default_tiles", "fit_tile", "gemm_like", "host_vector_lanes",
           "optimize", "partial_sums_peel", "partial_sums_site", "tile_reuses_an_operand", "tile_variants"]
