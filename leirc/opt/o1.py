"""``-O1``: a fixed, documented heuristic pipeline of strategies.

It is the fast default without search and the baseline a search must beat. Every step is
an ordinary strategy application (legality-checked, re-checked, recorded in a trace); a
step that does not apply is skipped and logged, never forced.

LLVM (CPU):

1. **fuse** producer/consumer nests (``operator_fusion``) until no site is left, so that
   element-wise chains make one pass over memory;
2. per top-level nest, **reorder for locality** (``loop_reorder``): move the loop that
   indexes the last (unit-stride) dimension of the most accesses innermost, e.g. matmul
   ``i,j,k`` → ``i,k,j`` (legal for reductions whose accumulation order per element is kept).
   A nest whose innermost loop already **streams** — every access is invariant in it or has
   it only in its last subscript with coefficient 1 — is left alone: a pooling window
   (``C_{n,c,i,j} = max(C_{n,c,i,j}, Pd_{n,c,i+p,j+q})`` along ``q``) keeps the target in a
   register, and moving ``j`` inside ``p, q`` turned that into a load and a store of ``C`` per
   window element (maxpool2d: 0.87x of -O0's CPU time at one thread; 0.95x without the
   reorder, the rest being the parallel loop's code at one thread);
3. **parallelize** the outermost loop that carries no dependence (``loop_parallelization``);
4. **vectorize** the innermost loop: split it by 16/8/4 (``loop_split``) and vectorize the
   inner part (``loop_vectorization``) when it is unit-stride and dependence-free — unless
   its body calls ``erf`` in f64: TVM has no vector form for that and emits such a ``V`` loop
   as the scalar loop (one ``erf`` call and scalar arithmetic per element, the code of the
   ``L`` loop), so the split would only add a loop level and the program would claim vector
   code that does not run. In f32, ``exp``, ``erf`` and ``sigmoid`` are inline vector code
   (:mod:`leirc.lower.libm`); the other libm functions become one scalar call per lane.

CUDA: steps 1–2, then per nest bind the outermost dependence-free loop: split it by the
largest divisor ≤ 256, bind the outer part to ``blockIdx.x`` and the inner to ``threadIdx.x``
(``loop_split`` + ``loop_binding``); nests with no such loop run on one thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from ..lang import ast as A
from ..lang.affine import affine
from ..lang.checker import CheckResult, check_kernel
from ..lang.types import expr_type
from ..strategies import NotApplicable, Step, get
from ..strategies.base import Context, Rewrite, plan_step
from ..strategies.rewrite import find_loop, nest_chain, ref_at, refs_at


@dataclass(frozen=True)
class Choices:
    """-O1's decisions as arguments (a tuner's knobs, :mod:`leirc.search.space`); the defaults are
    the pipeline described above. ``fuse``/``reorder``: steps 1 and 2 on or off; ``parallel``:
    which dependence-free loop of a nest runs in parallel (``"outer"``: the first in pre-order,
    ``"inner"``: the second when there is one, ``"none"``); ``grain``: that loop is first split by
    ``grain`` and its outer part parallelized (fewer, larger tasks; 1: as it is); ``jam``: the
    outermost loop of a perfect chain of three or more is unrolled by ``jam`` and jammed into the
    loop around the innermost one (``unroll_and_jam``: ``jam`` accumulators per loaded operand;
    1: not); ``vector``: the widest vector split tried (16, 8 or 4; 0: no vector loops)."""

    fuse: bool = True
    reorder: bool = True
    parallel: str = "outer"
    grain: int = 1
    jam: int = 1
    vector: int = 16

    def __post_init__(self):
        if self.parallel not in ("outer", "inner", "none"):
            raise ValueError(f"-O1 parallel choice '{self.parallel}': one of outer, inner, none")
        if self.vector not in (0, 4, 8, 16) or self.grain < 1 or self.jam < 1:
            raise ValueError(f"-O1 choices out of range: vector={self.vector} grain={self.grain} jam={self.jam}")


@dataclass
class O1Result:
    kernel: A.Kernel
    steps: list[Step] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    #: the check result of ``kernel`` (each step's re-check; the next step starts from it)
    result: Optional[CheckResult] = field(default=None, repr=False, compare=False)

    def context(self) -> Context:
        return Context(self.kernel, self.result)

    def mark(self) -> tuple:
        return self.kernel, self.result, len(self.steps)

    def undo(self, mark: tuple, why: str) -> None:
        self.kernel, self.result, n = mark
        del self.steps[n:]
        self.log.append(why)


def _try(res: O1Result, step: Step) -> Optional[Rewrite]:
    """Apply ``step`` if legal; the Rewrite carries the handles of what it created."""
    try:
        rw = plan_step(res.kernel, step, result=res.result)
    except NotApplicable as e:
        res.log.append(f"skip {step}: {e.reason}")
        return None
    res.kernel, res.result = rw.kernel, rw.result
    res.steps.append(step)
    res.log.append(f"apply {step}")
    return rw


def _forward(handle: Optional[str], rewrites: list[Rewrite]) -> Optional[str]:
    """``handle`` carried through the rewrites applied since it was taken (None once one
    of them removed or rebuilt what it named)."""
    for rw in rewrites:
        if handle is None:
            return None
        handle = rw.forward(handle)
    return handle


def _fuse(res: O1Result) -> None:
    fusion = get("operator_fusion")
    for _ in range(64):  # each fusion removes a nest, so this terminates long before
        sites = fusion.sites(res.context())
        if not sites:
            return
        if not _try(res, sites[0].first_step()):
            return


def _unit_stride_var(stmts: list[A.Assign], chain_vars: list[str]) -> str | None:
    """The loop variable that most often is the whole last (unit-stride) subscript of an
    access: the target once, and every read except the target's own accumulator reads.
    Ties keep the current innermost loop."""
    votes: dict[str, int] = {}
    for st in stmts:
        reads = [n for n in A.walk(st.value) if isinstance(n, A.Access) and n.name != st.target.name]
        for a in [st.target] + reads:
            # weighted by rank squared: the last index of a big array decides the stride,
            # a vector indexed by the same loop only broadcasts
            if a.indices and isinstance(a.indices[-1], A.Var) and a.indices[-1].name in chain_vars:
                votes[a.indices[-1].name] = votes.get(a.indices[-1].name, 0) + len(a.indices) ** 2
    if not votes:
        return None
    innermost = chain_vars[-1]
    return max(chain_vars, key=lambda v: (votes.get(v, 0), v == innermost))


def _streams(stmts: list[A.Assign], var: str) -> bool:
    """Whether every access of ``stmts`` is invariant in the loop ``var`` or reads it at unit
    stride: ``var`` in no subscript but the last, with coefficient 0 or 1 there (``Pd_{n,c,i+p,j+q}``
    along ``q``). A subscript that is not affine counts as strided."""
    for st in stmts:
        for a in [st.target] + [n for n in A.walk(st.value) if isinstance(n, A.Access)]:
            for pos, sub in enumerate(a.indices):
                form = affine(sub)
                if form is None:
                    return False
                coef = form[0].get(var, 0)
                if coef != 0 and (pos != len(a.indices) - 1 or coef != 1):
                    return False
    return True


def _chain_paths(idx: int, chain: list[A.Loop]) -> list[tuple]:
    """Paths of the loops of the perfect chain that starts at top-level item ``idx``."""
    return [(idx,) + (0,) * k for k in range(len(chain))]


def _reorder(res: O1Result) -> None:
    for idx in range(len(res.kernel.body)):
        item = res.kernel.body[idx]
        if not isinstance(item, A.Loop):
            continue
        chain = nest_chain(item)
        if len(chain) < 2:
            continue
        vars_ = [l.var for l in chain]
        inner = chain[-1]
        stmts = [s for s in inner.body if isinstance(s, A.Assign)]
        if stmts and _streams(stmts, inner.var):
            # the target stays in a register across the innermost loop and every read streams:
            # moving a spatial loop inside it would only add a load and a store of the target
            # per iteration of the loops it passes
            res.log.append(f"nest N{idx}: the innermost loop {inner.var} is already unit-stride or invariant")
            continue
        best = _unit_stride_var(stmts, vars_)
        if best is None or best == vars_[-1]:
            continue
        order = [v for v in vars_ if v != best] + [best]
        _try(res, Step.make("loop_reorder", loop=ref_at(res.kernel, (idx,)), order=",".join(order)))


def _parallelize(res: O1Result, choices: Choices = Choices()) -> None:
    """Per nest, the first (outermost, pre-order) loop that may run in parallel (the second
    with ``choices.parallel == "inner"``, split by ``choices.grain`` first). The sites
    are listed once; a site's loop is carried over the parallelizations of earlier nests
    by its handle (each step is checked again when it is applied)."""
    if choices.parallel == "none":
        return
    kernel = res.kernel
    legal: dict[int, list[str]] = {}
    for site in get("loop_parallelization").sites(res.context()):
        nest = find_loop(kernel, site.fixed["loop"])[1][0]
        legal.setdefault(nest, []).append(site.fixed["loop"])
    nth = 1 if choices.parallel == "inner" else 0
    first = {idx: refs[min(nth, len(refs) - 1)] for idx, refs in legal.items()}
    applied: list[Rewrite] = []
    for idx in sorted(first):
        ref = _forward(first[idx], applied)
        if ref is None:
            res.log.append(f"nest N{idx}: the loop {first[idx]} did not survive the earlier steps")
            continue
        lp = find_loop(res.kernel, ref)[0]
        if choices.grain > 1 and lp.start == 0 and lp.extent % choices.grain == 0 and lp.extent // choices.grain >= 2:
            mark = res.mark()
            split = _try(res, Step.make("loop_split", loop=ref, factor=choices.grain))
            rw = _try(res, Step.make("loop_parallelization", loop=split.created["outer"])) if split else None
            if rw is not None:
                applied.extend([split, rw])
                continue
            res.undo(mark, f"{ref}: no parallel loop of grain {choices.grain}")
            ref = _forward(first[idx], applied)
        rw = _try(res, Step.make("loop_parallelization", loop=ref))
        if rw is not None:
            applied.append(rw)


#: intrinsics the lowering has no vector form for in f64 (in f32 they are inline arithmetic,
#: :mod:`leirc.lower.libm`): TVM's vectorizer emits a ``V`` loop that calls one of them as a
#: scalar loop (one ``erf`` call and scalar arithmetic per element, the same code as the ``L``
#: loop), so a split for it only adds a loop level
_NO_VECTOR_FORM = frozenset({"erf"})


def scalar_only_calls(loop: A.Loop) -> list[str]:
    """The intrinsics in ``loop`` that a ``V`` loop would still run as scalar code."""
    return sorted({n.func for n in A.walk(loop)
                   if isinstance(n, A.Call) and n.func in _NO_VECTOR_FORM and expr_type(n) == "f64"})


def _jam(res: O1Result, factor: int) -> None:
    """``unroll_and_jam`` of the outermost loop of every perfect chain of three or more loops
    into the loop around its innermost one, by ``factor`` where that divides it."""
    for idx in range(len(res.kernel.body)):
        item = res.kernel.body[idx]
        if not isinstance(item, A.Loop):
            continue
        chain = nest_chain(item)
        if len(chain) < 3 or chain[0].extent % factor or chain[0].extent <= factor:
            continue
        refs = refs_at(res.kernel, _chain_paths(idx, chain))
        paths = _chain_paths(idx, chain)
        _try(res, Step.make("unroll_and_jam", loop=refs[paths[0]], factor=factor, into=refs[paths[-2]]))


def _vectorize(res: O1Result, widest: int = 16) -> None:
    for idx in range(len(res.kernel.body)):
        item = res.kernel.body[idx]
        if not isinstance(item, A.Loop):
            continue
        chain = nest_chain(item)
        inner = chain[-1]
        if inner.kind != "L" or inner.start != 0:
            continue
        ref = ref_at(res.kernel, _chain_paths(idx, chain)[-1])
        scalar = scalar_only_calls(inner)
        if scalar:
            res.log.append(f"nest N{idx}: {', '.join(scalar)} has no vector form; {inner.var} stays scalar")
            continue
        if inner.extent <= 16:
            if widest:
                _try(res, Step.make("loop_vectorization", loop=ref))
            continue
        for lanes in (16, 8, 4):
            if lanes > widest or inner.extent % lanes:
                continue
            mark = res.mark()
            split = _try(res, Step.make("loop_split", loop=ref, factor=lanes))
            if split is None:
                continue
            part = split.created.get("inner")
            if part is not None and _try(res, Step.make("loop_vectorization", loop=part)):
                break
            res.undo(mark, f"undo split of {ref}")  # vectorizing the split loop is illegal
            break


def _bind_cuda(res: O1Result) -> None:
    """Bind the largest dependence-free loop of each nest: outer part to blockIdx.x, at most
    256 iterations to threadIdx.x."""
    binding = get("loop_binding")
    for idx in range(len(res.kernel.body)):
        item = res.kernel.body[idx]
        if not isinstance(item, A.Loop):
            continue
        ctx = res.context()
        legal = {s.fixed["loop"] for s in binding.sites(ctx)}
        # binding a reduction loop gives a cross-thread reduction, which the CUDA lowering
        # runs on one thread: bind spatial loops only
        carried = {v for si in ctx.result.stmts if si.loops and si.loops[0] is item for v in si.carried}
        chain = nest_chain(item)
        refs = refs_at(res.kernel, _chain_paths(idx, chain))
        cands = [(lp, refs[p]) for lp, p in zip(chain, _chain_paths(idx, chain))
                 if lp.kind == "L" and lp.start == 0 and refs[p] in legal and lp.var not in carried]
        if not cands:
            res.log.append(f"nest N{idx}: no loop can be bound; it runs on one thread")
            continue
        lp, ref = max(cands, key=lambda c: c[0].extent)
        threads = max(d for d in range(1, min(lp.extent, 256) + 1) if lp.extent % d == 0)
        mark = res.mark()
        ok = True
        inner: Optional[str] = ref
        if threads < lp.extent:
            split = _try(res, Step.make("loop_split", loop=ref, factor=threads))
            # the split names both parts: no guessing the fresh outer index from its spelling
            ok = split is not None and "outer" in split.created and "inner" in split.created
            if ok:
                bound = _try(res, Step.make("loop_binding", loop=split.created["outer"], axis="bx"))
                # binding renames the outer loop: carry the inner handle over that rewrite
                inner = _forward(split.created["inner"], [bound]) if bound is not None else None
                ok = inner is not None
        ok = ok and _try(res, Step.make("loop_binding", loop=inner, axis="tx")) is not None
        if not ok:
            res.undo(mark, f"undo binding of {ref}")


@dataclass(frozen=True)
class Pass:
    """One named pass of a fixed pipeline: it runs on the targets ``kinds`` when ``enabled``
    says so for the pipeline's choices, and rewrites the running result in place (through
    checked steps)."""

    name: str
    kinds: tuple
    enabled: Callable
    run: Callable


def _always(_choices) -> bool:
    return True


#: -O1, as one readable list of named passes (the pipeline of the module docstring)
PASSES: tuple = (
    Pass("fuse", ("llvm", "cuda"), lambda c: c.fuse, lambda res, c: _fuse(res)),
    Pass("reorder", ("llvm", "cuda"), lambda c: c.reorder, lambda res, c: _reorder(res)),
    Pass("bind_cuda", ("cuda",), _always, lambda res, c: _bind_cuda(res)),
    Pass("unroll_and_jam", ("llvm",), lambda c: c.jam > 1, lambda res, c: _jam(res, c.jam)),
    Pass("parallelize", ("llvm",), _always, _parallelize),
    Pass("vectorize", ("llvm",), _always, lambda res, c: _vectorize(res, c.vector)),
)


def target_kind(target) -> str:
    """``cuda`` or ``llvm``: the family of passes a target gets (any CPU spec is ``llvm``)."""
    return "cuda" if str(target).split()[0] == "cuda" else "llvm"


def optimize(kernel: A.Kernel, target: str = "llvm", result: Optional[CheckResult] = None, *,
             choices: Choices = Choices()) -> O1Result:
    """Run the -O1 pipeline (:data:`PASSES`) for ``target`` (``llvm``, a CPU spec, or
    ``cuda``); ``result`` is the kernel's check result when the caller has it (it is not
    computed again); ``choices`` its decisions (:class:`Choices`; CUDA uses ``fuse`` and
    ``reorder`` only)."""
    if result is None or result.kernel is not kernel:
        result = check_kernel(kernel)
    if not result.ok:
        raise NotApplicable("-O1", "the program has errors")
    res = O1Result(kernel, result=result)
    kind = target_kind(target)
    for p in PASSES:
        if kind in p.kinds and p.enabled(choices):
            p.run(res, choices)
    return res
