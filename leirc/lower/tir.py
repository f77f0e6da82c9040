"""Direct lowering (-O0) of a checked LEIR kernel to a TVM ``tirx`` PrimFunc.

The function is built with the TVM IR builder (``tvm.script.ir_builder.tirx``), never
from TVMScript text. It is plain ``tirx`` (loops, ``BufferStore``, ``alloc_buffer``; no
sblocks): the LEIR program already fixes loop order, threads and allocations.

Signature and naming
    Parameters are the kernel inputs, then the outputs, with their declared shapes and
    dtypes (rank-0 tensors are 0-d buffers). The global symbol is the kernel name (with
    ``_kernel`` appended if it would clash with a C math/runtime symbol such as ``exp``).

Loops
    ``var`` iterates ``start .. start+extent-1``; the TIR loop always runs from 0 and the
    LEIR index is bound to ``v + start``. Kinds:

    ====  ==========================================  ============================================
    kind  llvm                                        cuda (inside a kernel)
    ====  ==========================================  ============================================
    L     serial                                      serial
    P     ``T.parallel`` (serial when nested in a     serial (a thread runs it sequentially)
          P or V loop: TVM cannot nest them)
    V     ``T.vectorized`` (serial when nested in V   ``T.vectorized`` (serial when nested in V,
          or when a private tensor is allocated in    when it contains a B loop, or when a
          it: TVM's lanes would share one tile)       private tensor is allocated in it)
    U     ``T.unroll`` (TVM unrolls it in TIR) when   same
          the copies stay small (<= 256 statements
          and loops), else a serial loop annotated
          for TVM's auto-unroll of small inner loops
    B     **serial** (threads/blocks do not exist     ``T.thread_binding`` to threadIdx/blockIdx
          on the CPU; iterations are independent)     x/y/z from the first two index characters
    ====  ==========================================  ============================================

    Loops outside every CUDA kernel (host loops that launch kernels) are serial whatever
    their kind.

CUDA kernels (TVM pitfall P10: code outside thread bindings would run on the host)
    The top level is partitioned into *device regions*. A ``B`` loop that is not inside
    another device region is a kernel root. A loop that contains ``B`` loops but is not
    one stays a host loop (serial, whatever its kind) that launches the kernels in its
    body in order. Every maximal run of consecutive items without any ``B`` loop is
    wrapped in a single-thread launch (``blockIdx.x``/``threadIdx.x`` extent 1), so every
    statement executes on the device. Within a kernel:

    * sibling ``B`` loops binding the same axis with different extents launch the
      largest extent; statements under the shorter one are guarded by ``v < extent``;
    * a statement not enclosed by a loop bound to some launched axis (extent > 1) runs
      only on index 0 of that axis (it is wrapped in a binding loop and ``if v == 0``),
      so in-place updates are not repeated by every thread;
    * where threads of a block may exchange data between consecutive items (some launched
      thread axis is not bound at that level), a ``__syncthreads()`` separates them, also
      at the end of each sequential loop body at that level;
    * a **cross-thread reduction** (docs/language.md §7: a reduction whose reduction loops
      include ``B`` loops over thread axes) of the form
      ``... B^{T}_{tx=0} [B ...] L^{R}_{r=0} ... [ X_{s} = X_{s} op e; ]`` -- the
      statement's outermost reduction loop is thread-bound and starts a perfect nest of
      thread-bound loops followed by serial (``L``/``U``) reduction loops only, every axis the
      kernel launches is bound around it, ``op`` is ``+ - * max min`` and the dtype one of
      :data:`ALLREDUCE_DTYPES` -- is lowered through TVM's thread allreduce: each thread
      folds its serial iterations into a ``local`` scalar, ``tvm_thread_allreduce`` combines
      the scalars of the reduction threads (``LowerThreadAllreduce``: warp shuffles, then
      shared memory; spatial thread loops among them reduce their own elements), and thread
      0 stores the element (no init nest: the stored value is final). Only the order of the
      combination changes (exact in reals; bitwise for ``max``/``min``);
    * a kernel containing any other reduction (or carried dependence) over a ``B``-bound
      index -- across a block axis, a thread loop inside a serial reduction loop, ... -- or
      whose statements do not all lie under the same block-bound loops (blocks cannot
      synchronize within a kernel) is **serialized**: it runs as a single-thread launch
      with its ``B`` loops as serial loops (correct, slow; warning W051, which says why).

Memory scopes and allocation placement
    Intermediates (checker role ``"intermediate"``, full checker shape) are allocated with
    ``T.alloc_buffer``. On CPU targets every intermediate is a ``global`` allocation at
    function root (memory scopes are a GPU notion; TVM turns small ones into stack
    allocations). On CUDA:

    * ``g`` -> global memory allocated at function root (a device workspace shared by all
      kernels of the call);
    * ``s`` -> ``shared``, allocated at the start of the body of the innermost
      block-bound loop enclosing its accesses (or at the kernel root if there is none);
    * ``l`` -> ``local``, allocated at the start of the body of the innermost ``B`` loop
      enclosing its accesses (or at the kernel root for single-thread launches);

    and TVM's ``CompactBufferAllocation`` (run by the default s_tir pipeline on tirx too)
    shrinks the full-size buffer to the region one block/thread touches. A shared buffer
    whose accesses lie in more than one kernel or under different block loops, or a local
    buffer accessed under different ``B`` loops, cannot live in that scope; neither can one
    whose per-block (shared, > 48 KiB) or per-thread (local, > 16 KiB) region is too large,
    e.g. in a single-thread launch. Those are demoted to global memory (warning W050).

    **Private tensors** (``\\alloc`` inside a loop, docs/language.md §3.1) are not planned
    this way: each is allocated, with its declared shape, at the start of the body of the
    loop whose body holds the ``\\alloc`` (``Loop.allocs`` of :mod:`leirc.lower.prep`), so
    every iteration, thread or parallel task has its own copy. CPU: scope ``local`` (a stack
    array; after the loops over it are unrolled and vectorized LLVM promotes it to
    registers). CUDA: ``s`` -> ``shared`` (TVM's ``ThreadSync`` adds the barriers), ``l``
    and ``g`` -> ``local``; one in a host loop becomes one root buffer in global memory,
    which the serial host iterations reuse. ``poison_intermediates`` fills a ``local`` private
    tile with the poison at the start of every execution of its loop body (CUDA ``shared``
    tiles are not filled).

Statements
    ``assign``/``update``/``scan`` store the value as written; reductions get an init
    nest (see :mod:`leirc.lower.prep`). Identities: ``+ -`` 0, ``*`` 1, ``max``/``min``
    the infinities of a float dtype, the min/max value of an integer dtype, False/True for
    bool.

Types (exactly :mod:`leirc.lang.types`, as the interpreter evaluates them)
    Every subexpression is computed in its concrete type ``resolve(expr_type(e), ctx)``,
    where ``ctx`` is the type the enclosing operation computes in (the statement's target
    dtype at the top, ``bool`` for conditions): strong types stay, an ``int_lit`` (integer
    literals, loop indices) computes in i64, a ``float_lit`` in ``ctx`` if that is a float
    type, else f64. Operands are converted to the operation's type, the value to the
    target dtype. ``/`` is true division, ``//``/``%`` are floor division and floor
    modulo (an integer divisor of 0 gives 0, as in NumPy), ``**`` with a literal exponent
    of integral value 0..4 (0..16 for integers) is a product, otherwise ``pow``; integer
    ``**`` with another exponent is computed in f64 and truncated. Arithmetic on bool
    operands computes in i64 and converts back. Transcendentals on f16/bf16 compute in
    f32. Conversions to bool are ``x != 0``. ``if_then_else`` is TVM's lazy
    ``if_then_else``. Subscripts are int64, or int32 when every subexpression provably
    fits (same values).

IEEE and integer corner cases (the interpreter's NumPy semantics; TVM differs by default)
    * float ``max``/``min`` (calls and reductions) return NaN when either operand is NaN
      (``np.maximum``, ``torch.maximum``): ``(a > b || isnan(a)) ? a : b``. TVM's own
      ``Max`` drops a NaN operand (LLVM ``a > b ? a : b``, CUDA ``fmaxf``). Integers keep
      ``Max``/``Min``, bool ``|``/``&``.
    * float comparisons are IEEE: false when an operand is NaN, except ``!=`` (TVM emits
      the ordered ``fcmp one`` for ``!=`` and folds ``x == x`` to true).
    * float ``+ - * /`` whose operands TVM's simplifier could cancel (``x - x``,
      ``(x + y) - y``, ``(x + c) - c``, ``x + inf - inf``, ``x * 0``, ``0 / x``) or fold in
      double (two constants) get one operand behind a bit cast, so NaN, infinities and
      rounding come out as in the interpreter. Cancellations are decided on the lowered
      operands by TVM's own analyzer (``_ExprLowerer._folds``).
    * no contraction (CPU): a product that is an operand of ``+``/``-`` goes through
      ``llvm.arithmetic.fence`` (:data:`FENCE_PRODUCTS`); TVM lets LLVM fuse ``a*b + c``
      into one FMA, which rounds once and keeps an overflowing product finite.
    * f16/bf16 (CPU) are rounded after every operation (TVM computes a whole expression in
      f32 and rounds at the store); bf16 through its bits, since TVM's bf16 legalization
      drops a ``bf16(f32(.))`` pair, for expressions up to :data:`BF16_ROUND_LIMIT` nodes.
      bf16 literals are rounded to bf16, its infinity is a cast of f32's, and its
      transcendentals use TVM's intrinsics (the inline forms bind a ``Let``, which the bf16
      passes miscompile).
    * unsigned ``+ - *`` wrap modulo 2**n (TVM marks u32/u64 ops ``nuw`` on LLVM: they are
      computed in a type twice as wide and truncated; CUDA ``u16 * u16`` in ``uint``).
      Signed overflow is an error in LEIR; the compiled code assumes it does not happen.
    * ``poison_intermediates``: root-allocated intermediates are filled with the
      interpreter's poison (NaN payload / integer sentinel) before the body runs, and
      ``local`` private tiles at the start of every execution of their loop body.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Optional

import numpy as np

from ..interp.dtypes import poison_value
from ..lang import ast as A
from ..lang.checker import CheckResult, binding_axis
from ..lang.diagnostics import Diagnostic, warning
from ..lang.types import DTYPE_BYTES, expr_type, is_float, promote, resolve
from . import prep as P
from ._tvm import tvm as _import_tvm
from .libm import erf_f32, exp_f32, log_f32, sigmoid_f32, tanh_f32

DTYPES = {
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "bool": "bool",
}

#: symbols a kernel must not be named after (libm/libc/TVM runtime entry points)
RESERVED_SYMBOLS = {
    "exp", "expf", "log", "logf", "sqrt", "sqrtf", "erf", "erff", "tanh", "tanhf", "pow", "powf",
    "floor", "ceil", "fabs", "abs", "memcpy", "memset", "malloc", "free", "abort", "exit",
    "printf", "__tvm_main__", "__tvm_module_ctx", "default_function",
}

#: CPU: f32 transcendentals computed inline (vectorizable) instead of by scalar libm calls,
#: see :mod:`leirc.lower.libm` (f64 and CUDA keep TVM's intrinsics)
INLINE_LIBM = {"exp": exp_f32, "erf": erf_f32, "sigmoid": sigmoid_f32, "tanh": tanh_f32, "log": log_f32}

#: CPU: products feeding ``+``/``-`` are fenced against FMA contraction, so compiled code
#: rounds as the text says (docs/language.md §8). False trades that for FMA speed in GEMM-like
#: inner loops; the verifier's tolerance then has to absorb the single rounding.
FENCE_PRODUCTS = True
#: CPU bf16: nodes up to which an expression is rounded to bf16 after every operation
#: (see ``_ExprLowerer._round_bf16``; about eight nested operations)
BF16_ROUND_LIMIT = 4096
#: unrolled code-size budget (statement copies) for ``U`` loops
UNROLL_BUDGET = 256
#: bytes one block may use of one shared tensor (static shared memory) / one thread of a local tensor
SHARED_LIMIT = 48 * 1024
LOCAL_LIMIT = 16 * 1024


class LowerFailure(Exception):
    """A lowering problem, with the LEIR span responsible."""

    def __init__(self, message: str, span: Optional[A.Span]):
        super().__init__(message)
        self.message = message
        self.span = span


def symbol_name(kernel_name: str) -> str:
    return kernel_name + "_kernel" if kernel_name in RESERVED_SYMBOLS else kernel_name


def target_kind(target) -> str:
    if isinstance(target, dict):
        return str(target.get("kind", "llvm"))
    if hasattr(target, "kind") and hasattr(target.kind, "name"):
        return target.kind.name
    return str(target).split()[0]


def is_gpu(kind: str) -> bool:
    return kind in ("cuda",)


# ---------------------------------------------------------------------------
# CUDA device-region planning


@dataclass(eq=False)
class Kernel:
    """One device region (one or more CUDA kernel launches after TVM's host/device split)."""

    items: list  # prep nodes
    wrapper: bool  # single-thread launch around ``items``
    serialized: bool = False
    axes: dict = field(default_factory=dict)  # "threadIdx.x" -> launched extent
    reason: Optional[A.Span] = None  # what forced serialization
    why: str = ""
    #: cross-thread reductions lowered through TVM's thread allreduce, by ``id`` of the
    #: prep loop where each starts (its outermost reduction loop)
    allreduce: dict = field(default_factory=dict)

    @property
    def thread_axes(self) -> set:
        return {t for t, e in self.axes.items() if t.startswith("threadIdx") and e > 1}


@dataclass(eq=False)
class HostLoop:
    loop: P.Loop
    body: list  # of HostLoop | Kernel


def axis_tag(var: str) -> str:
    ax = binding_axis(var)
    assert ax is not None, var
    return f"{ax[0]}Idx.{ax[1]}"


def _contains_b(node) -> bool:
    return P.contains_kind(node, "B")


def partition(nodes: list) -> list:
    """Host/device partition of a body at host level (CUDA)."""
    out: list = []
    run: list = []

    def flush():
        if run:
            out.append(Kernel(list(run), wrapper=True))
            run.clear()

    for n in nodes:
        if isinstance(n, P.Loop) and n.kind == "B":
            flush()
            out.append(_kernel_for(n))
        elif isinstance(n, P.Loop) and _contains_b(n):
            flush()
            out.append(HostLoop(n, partition(n.body)))
        else:
            run.append(n)
    flush()
    # a reduction lowered through the thread allreduce stores final values: the init nest
    # that prep put before its (kernel-root) reduction loop would be a launch of its own
    planned = {id(p.store.info) for k in out if isinstance(k, Kernel) for p in k.allreduce.values()}
    if planned:
        for k in out:
            if isinstance(k, Kernel) and k.wrapper:
                k.items = [n for n in k.items if _init_info(n) is None or id(_init_info(n)) not in planned]
        out = [k for k in out if not (isinstance(k, Kernel) and k.wrapper and not k.items)]
    return out


@dataclass(eq=False)
class AllReduce:
    """A reduction across thread-bound loops, lowered through ``tvm_thread_allreduce``.

    ``threads`` are the perfectly nested ``B`` loops over thread axes that start at the
    statement's outermost reduction loop; ``reduce`` are those of them that are reduction
    loops (the others are spatial: each of their threads reduces its own element). Inside
    ``threads`` every loop is a serial (``L``/``U``) reduction loop around the statement alone,
    so every thread folds its share into one private scalar, and one allreduce over the
    ``reduce`` threads combines the partial results (warp shuffles, then shared memory)."""

    store: P.Store
    threads: list  # prep B loops, outermost first
    reduce: list  # the subset of ``threads`` whose index is a reduction index

    @property
    def start(self) -> P.Loop:
        return self.threads[0]


#: dtypes whose partial results TVM's allreduce moves through warp shuffles
ALLREDUCE_DTYPES = ("f32", "f64", "i32", "i64", "u32", "u64")


def _path_to(nodes, target) -> Optional[list]:
    """Prep loops enclosing ``target``, outermost first (None when it is not under ``nodes``)."""
    for n in nodes:
        if n is target:
            return []
        if isinstance(n, P.Loop):
            sub = _path_to(n.body, target)
            if sub is not None:
                return [n] + sub
    return None


def _allreduce_plan(root: P.Loop, st: P.Store, axes: dict):
    """(AllReduce, None) when ``st`` -- a statement that reduces across a ``B`` loop -- has
    the form the thread allreduce lowers (class docstring), else (None, why)."""
    si = st.info
    if si.kind != "reduce":
        return None, f"it carries a dependence across a bound (B) loop in a {si.kind}, not a reduction"
    if si.op not in ("+", "-", "*", "max", "min"):
        return None, f"its '{si.op}' reduction has no cross-thread form"
    if st.target.dtype not in ALLREDUCE_DTYPES:
        return None, f"cross-thread reductions of {st.target.dtype} are not lowered (only {', '.join(ALLREDUCE_DTYPES)})"
    red = set(si.reduce_vars)
    chain = _path_to([root], st) or []
    for l in chain:
        if l.kind == "B" and l.var in red and not axis_tag(l.var).startswith("thread"):
            return None, f"it reduces across the block-bound loop '{l.var}', and blocks cannot combine results"
    k = next((i for i, l in enumerate(chain) if l.src is si.init_loop and not l.synthetic), None)
    if k is None:
        return None, (f"its outermost reduction loop '{si.init_loop.var}' is a host loop around the kernel"
                      if si.init_loop is not None else "it has no reduction loop in this kernel")
    below = chain[k:]
    for outer, inner in zip(below, below[1:] + [st]):
        if outer.body != [inner]:
            return None, f"loop '{outer.var}' holds more than the reduction (a cross-thread reduction must be a perfect nest)"
    t = 0
    while t < len(below) and below[t].kind == "B" and axis_tag(below[t].var).startswith("thread"):
        t += 1
    if t == 0:
        return None, (f"its outermost reduction loop '{below[0].var}' is not thread-bound "
                      "(bind it, or move the thread loop outwards)")
    for l in below[t:]:
        if l.kind not in ("L", "U") or l.var not in red:
            return None, (f"loop '{l.var}' inside the thread loops is {'spatial' if l.var not in red else l.kind}; "
                          "only serial reduction loops may run inside a thread")
    bound = {axis_tag(l.var) for l in chain if l.kind == "B"}
    missing = sorted(a for a, e in axes.items() if e > 1 and a not in bound)
    if missing:
        return None, f"the kernel launches {', '.join(missing)}, which does not enclose the reduction"
    threads = below[:t]
    return AllReduce(st, threads, [l for l in threads if l.var in red]), None


def _kernel_for(root: P.Loop) -> Kernel:
    crossing = []
    for st in P.walk([root]):
        if isinstance(st, P.Store) and not st.init:
            si = st.info
            dep = set(si.reduce_vars) | set(si.carried) if si.kind != "assign" else set()
            if any(l.kind == "B" and l.var in dep for l in si.loops):
                crossing.append(st)
    # blocks cannot synchronize: every statement must lie under the same block-bound loops
    chains = set()

    def rec(n, chain):
        if isinstance(n, P.Loop):
            c = chain + (id(n),) if n.kind == "B" and axis_tag(n.var).startswith("block") else chain
            for ch in n.body:
                rec(ch, c)
        else:
            chains.add(chain)

    rec(root, ())
    axes: dict = {}
    for n in P.walk([root]):
        if isinstance(n, P.Loop) and n.kind == "B":
            tag = axis_tag(n.var)
            axes[tag] = max(axes.get(tag, 0), n.extent)
    plans: dict = {}
    for st in crossing:
        plan, why = _allreduce_plan(root, st, axes)
        if plan is None:
            return Kernel([root], wrapper=True, serialized=True, reason=st.span,
                          why=why + "; -O0 lowers only that form of cross-thread reduction")
        plans[id(plan.start)] = plan
    if len(chains) > 1:
        return Kernel([root], wrapper=True, serialized=True, reason=root.span,
                      why="its statements lie under different block-bound loops, and blocks cannot synchronize")
    return Kernel([root], wrapper=False, axes=axes, allreduce=plans)


def _init_info(node):
    """The StmtInfo whose reduction init nest ``node`` is (else None)."""
    while isinstance(node, P.Loop) and node.synthetic and len(node.body) == 1:
        node = node.body[0]
    if isinstance(node, P.Store) and node.init:
        return node.info
    return None


def _host_loops(segs) -> list:
    out = []
    for s in segs or ():
        if isinstance(s, HostLoop):
            out.append(s)
            out.extend(_host_loops(s.body))
    return out


def kernels_of(segs) -> list:
    out = []
    for s in segs:
        if isinstance(s, Kernel):
            out.append(s)
        else:
            out.extend(kernels_of(s.body))
    return out


# ---------------------------------------------------------------------------
# emission


@dataclass(frozen=True)
class _Ctx:
    env: dict  # LEIR index name -> PrimExpr (int32)
    kernel: Optional[Kernel] = None
    bound: frozenset = frozenset()  # launched axis tags bound by enclosing loops
    conds: tuple = ()  # guard conditions (PrimExpr) for statements
    in_parallel: bool = False
    in_vector: bool = False
    bchain: tuple = ()  # enclosing B loops (prep nodes) inside a non-serialized kernel


class Lowerer:
    def __init__(self, result: CheckResult, target="llvm", only: Optional[set] = None,
                 poison_intermediates: bool = False):
        if not result.ok:
            raise ValueError("lowering needs a kernel without check errors")
        self.result = result
        self.kernel = result.kernel
        self.kind = target_kind(target)
        self.gpu = is_gpu(self.kind)
        self.diagnostics: list[Diagnostic] = []
        self.tree = P.prepare(result)
        if only is not None:  # lower a subset of the top-level items (error attribution)
            self.tree = [n for n in self.tree if n.origin in only]
        self.tvm = _import_tvm()
        self.bufs: dict = {}
        self.site_allocs: dict = {}  # id(prep Loop) or id(Kernel) -> [TensorInfo]
        self.root_allocs: list = []
        self.cur_span: Optional[A.Span] = None
        self.poison = bool(poison_intermediates)
        #: id(Store) -> local scalar that stands for its target (see :meth:`_emit_allreduce`)
        self.redirect: dict = {}
        #: tensors of 2**31 elements or more: int64 shapes and subscripts (:meth:`_shape`)
        self.wide: set = set()
        #: TVM's arithmetic analyzer, asked whether it would fold a float operation
        from tvm.sym import Analyzer  # noqa: PLC0415 - TVM is loaded by now (self.tvm)

        self.analyzer_type = Analyzer

    # -- driver ----------------------------------------------------------------
    def lower(self):
        tvm = self.tvm
        from tvm.script.ir_builder import IRBuilder
        from tvm.script.ir_builder import tirx as T

        self.T, self.IRB = T, IRBuilder
        segs = partition(self.tree) if self.gpu else None
        self._plan_allocations(segs)
        k = self.kernel
        with IRBuilder() as ib:
            with T.prim_func():
                T.func_name(symbol_name(k.name))
                T.func_attr({"tirx.noalias": True})
                for p in k.inputs + k.outputs:
                    self.cur_span = p.span
                    buf = T.arg(p.name, T.Buffer(self._shape(p.name, p.shape), DTYPES[p.dtype]))
                    self.bufs[p.name] = buf
                for info in self.root_allocs:
                    self._alloc(info, "global")
                if self.poison:
                    for info in self.root_allocs:
                        self._poison_fill(info)
                ctx = _Ctx(env={})
                if self.gpu:
                    self._emit_host(segs, ctx)
                else:
                    self._emit_nodes(self.tree, ctx)
        func = ib.get()
        return tvm.IRModule({symbol_name(k.name): func})

    # -- allocation planning -----------------------------------------------------
    def _plan_allocations(self, segs):
        private = P.loop_private(self.result)
        inter = [t for t in self.result.tensors.values() if t.role == "intermediate" and t.name not in private]
        self.host_private: set = set()
        if self.gpu:
            # host loops run serially: one buffer (in device memory) serves every iteration
            for seg in _host_loops(segs):
                for info in seg.loop.allocs:
                    self.host_private.add(info.name)
                    inter.append(info)
        if not self.gpu:
            self.root_allocs = inter
            return
        uses: dict = {}  # name -> list of (kernel, bchain)
        for kern in kernels_of(segs):
            self._collect_uses(kern, kern.items, (), uses)
        for info in inter:
            if info.scope == "g" or info.name not in uses:
                self.root_allocs.append(info)
                continue
            recs = uses[info.name]
            site, why = self._site(info, recs)
            if site is None:
                self.root_allocs.append(info)
                self.diagnostics.append(warning(
                    "W050", f"{A.SCOPE_NAMES[info.scope]} tensor '{info.name}' is placed in global memory on CUDA: {why}",
                    info.span))
            else:
                self.site_allocs.setdefault(id(site), []).append(info)

    def _collect_uses(self, kern: Kernel, nodes, chain, uses):
        for n in nodes:
            if isinstance(n, P.Loop):
                c = chain + (n,) if (n.kind == "B" and not kern.serialized) else chain
                self._collect_uses(kern, n.body, c, uses)
            else:
                accs = [n.target] + [a for i in n.target.indices for a in _accesses(i)]
                if n.value is not None:
                    accs += list(_accesses(n.value))
                for a in accs:
                    uses.setdefault(a.name, []).append((kern, chain))

    def _site(self, info, recs):
        site, why = self._site_by_structure(info, recs)
        if site is None:
            return None, why
        chain = recs[0][1]
        if info.scope == "s":
            fixed = {l.var for l in chain if axis_tag(l.var).startswith("block")}
            limit = SHARED_LIMIT
        else:
            fixed = {l.var for l in chain}
            limit = LOCAL_LIMIT
        nbytes = self._footprint(info, fixed) * DTYPE_BYTES.get(info.dtype, 4)
        if nbytes > limit:
            return None, f"one {'block' if info.scope == 's' else 'thread'} touches {nbytes} bytes of it (limit {limit})"
        return site, None

    def _site_by_structure(self, info, recs):
        kerns = {id(k) for k, _ in recs}
        if len(kerns) > 1:
            return None, f"it is accessed by {len(kerns)} separate kernels"
        kern = recs[0][0]
        if info.scope == "s":
            chains = {tuple(id(l) for l in c if axis_tag(l.var).startswith("block")) for _, c in recs}
            if len(chains) > 1:
                return None, "its accesses lie under different block-bound loops"
            blocks = [l for l in recs[0][1] if axis_tag(l.var).startswith("block")]
            if blocks:
                return blocks[-1], None
            return (kern if kern.wrapper else kern.items[0]), None
        chains = {tuple(id(l) for l in c) for _, c in recs}
        if len(chains) > 1:
            return None, "its accesses lie under different bound loops (threads)"
        c = recs[0][1]
        if c:
            return c[-1], None
        if kern.wrapper:
            return kern, None
        return None, "it is accessed outside every bound loop"

    def _footprint(self, info, fixed: set) -> int:
        """Elements of ``info`` one block/thread touches when the ``fixed`` indices are held
        (the region TVM's buffer compaction keeps); the full size when unknown."""
        from ..lang.affine import Facts

        dims = None
        for si in self.result.stmts:
            accs = [si.stmt.target] + list(_accesses(si.stmt.value))
            accs += [a for i in si.stmt.target.indices for a in _accesses(i)]
            ranges = {l.var: ((0, 0) if l.var in fixed else (l.start, l.start + l.extent - 1)) for l in si.loops}
            f = Facts(ranges)
            for a in accs:
                if a.name != info.name:
                    continue
                ivs = [f.interval(i) for i in a.indices]
                if any(iv is None for iv in ivs):
                    return math.prod(info.shape)
                if dims is None:
                    dims = [list(iv) for iv in ivs]
                else:
                    for d, iv in zip(dims, ivs):
                        d[0], d[1] = min(d[0], iv[0]), max(d[1], iv[1])
        if dims is None:
            return math.prod(info.shape)
        return math.prod(d[1] - d[0] + 1 for d in dims)

    def _alloc(self, info, scope: str):
        T = self.T
        self.cur_span = info.span
        buf = T.alloc_buffer(self._shape(info.name, info.shape), DTYPES[info.dtype], scope=scope)
        self.IRB.name(info.name, buf)
        self.bufs[info.name] = buf

    def _shape(self, name: str, shape) -> tuple:
        """A buffer's shape; int64 extents for a tensor of 2**31 elements or more, whose
        flattened offsets TVM computes in the type of its shape and subscripts (int32
        would wrap: a segfault, or TVM's own error for a literal size)."""
        if math.prod(shape or ()) < 2**31:
            return tuple(shape)
        self.wide.add(name)
        return tuple(self.tvm.tirx.IntImm("int64", int(d)) for d in shape)

    def _poison_fill(self, info):
        """Fill a root-allocated intermediate with the interpreter's poison value (NaN
        payload / integer sentinel), so reads of never-written elements show in the outputs.
        CPU: a serial nest (LLVM vectorizes it). CUDA: a kernel launch of its own (root
        buffers live in device memory; host code cannot write them)."""
        T, tirx = self.T, self.tvm.tirx
        self.cur_span = info.span
        buf = self.bufs[info.name]
        value = self._poison_value(info.dtype)
        shape = tuple(info.shape or ())
        if not self.gpu:
            self._poison_nest(info)
            return
        n = math.prod(shape)
        threads = min(n, 256)
        blocks = -(-n // threads)
        with T.thread_binding(0, blocks, thread="blockIdx.x") as bx:
            with T.thread_binding(0, threads, thread="threadIdx.x") as tx:
                flat = bx * threads + tx if n < 2**31 else tirx.Cast("int64", bx) * threads + tx
                idx, rest = [], flat
                for k in reversed(range(len(shape))):
                    idx.append(tirx.floormod(rest, shape[k]) if k else rest)
                    rest = tirx.floordiv(rest, shape[k])
                idx.reverse()
                if blocks * threads != n:
                    with T.If(flat < n):
                        with T.Then():
                            T.buffer_store(buf, value, idx)
                else:
                    T.buffer_store(buf, value, idx)

    def _poison_nest(self, info):
        """A serial nest storing the poison in every element of ``info``'s buffer (where
        it stands: at function root, or at the top of a private tensor's loop body)."""
        T, tirx = self.T, self.tvm.tirx
        buf = self.bufs[info.name]
        value = self._poison_value(info.dtype)
        shape = tuple(info.shape or ())
        wide = info.name in self.wide

        def nest(k, idx):
            if k == len(shape):
                T.buffer_store(buf, value, idx)
                return
            with T.serial(0, shape[k]) as v:
                nest(k + 1, idx + [tirx.Cast("int64", v) if wide else v])
        nest(0, [])

    def _poison_value(self, dt: str):
        tirx = self.tvm.tirx
        pv = poison_value(dt)
        if dt == "bool":
            return tirx.const(bool(pv), "bool")
        if is_float(dt):
            # exact payload bits (a float constant would go through double and may lose them)
            bits = DTYPE_BYTES[dt] * 8
            pattern = int(np.asarray(pv).view(f"uint{bits}"))
            return tirx.reinterpret(DTYPES[dt], tirx.const(pattern, f"uint{bits}"))
        return tirx.const(int(pv), DTYPES[dt])

    def _emit_private_allocs(self, lp: P.Loop, ctx: _Ctx):
        """Private tensors of this loop body, fresh per iteration: on CPU a ``local``
        allocation inside the loop (a stack tile that LLVM keeps in registers once the
        loops over it are unrolled or vectorized); on CUDA ``shared`` (one per block) or
        ``local`` (one per thread)."""
        for info in lp.allocs:
            if info.name in self.host_private:
                continue
            if self.gpu:
                scope = "shared" if info.scope == "s" and not (ctx.kernel is not None and ctx.kernel.wrapper) else "local"
            else:
                scope = "local"
            self._alloc(info, scope)
            if self.poison and scope == "local":
                # fresh storage per execution (docs/language.md §3.1): a verification build
                # fills it with the poison each time, so a read of an element this execution
                # did not write -- never written, or left by the previous iteration --
                # shows in the outputs instead of reusing the stack's old contents
                self._poison_nest(info)

    def _emit_site_allocs(self, key):
        for info in self.site_allocs.get(id(key), ()):
            self._alloc(info, A.SCOPE_NAMES[info.scope])

    # -- host level (CUDA) -----------------------------------------------------------
    def _emit_host(self, segs, ctx: _Ctx):
        T = self.T
        for s in segs:
            if isinstance(s, HostLoop):
                lp = s.loop
                self.cur_span = lp.span
                with T.serial(0, lp.extent) as v:
                    self.IRB.name(lp.var, v)
                    env = dict(ctx.env)
                    env[lp.var] = v + lp.start if lp.start else v
                    self._emit_host(s.body, replace(ctx, env=env))
            else:
                self._emit_kernel(s, ctx)

    def _emit_kernel(self, kern: Kernel, ctx: _Ctx):
        T = self.T
        if kern.serialized:
            self.diagnostics.append(warning(
                "W051", f"on CUDA this kernel runs on a single thread (its B loops run serially): {kern.why}",
                kern.reason))
        elif kern.wrapper and any(isinstance(n, P.Loop) and n.extent > 1 for n in kern.items):
            # a run of straight-line statements (an accumulator's init) is one thread's work anyway
            self.diagnostics.append(warning(
                "W051", "on CUDA this nest runs on a single thread: it has no B loop (bind a loop with "
                "loop_binding, or build with -O1)", kern.reason or (kern.items[0].span if kern.items else None)))
        kctx = replace(ctx, kernel=kern, bound=frozenset(), conds=(), bchain=())
        if kern.wrapper:
            with T.thread_binding(0, 1, thread="blockIdx.x") as b0:
                self.IRB.name("b0", b0)
                with T.thread_binding(0, 1, thread="threadIdx.x") as t0:
                    self.IRB.name("t0", t0)
                    self._emit_site_allocs(kern)
                    self._emit_nodes(kern.items, kctx)
        else:
            self._emit_nodes(kern.items, kctx)

    # -- loops and statements --------------------------------------------------------
    def _unbound_axes(self, ctx: _Ctx) -> list:
        """Launched axes (extent > 1) of the current kernel not bound by enclosing loops."""
        k = ctx.kernel
        if k is None or k.serialized or k.wrapper:
            return []
        return [t for t, e in sorted(k.axes.items()) if e > 1 and t not in ctx.bound]

    def _needs_barriers(self, ctx: _Ctx) -> bool:
        k = ctx.kernel
        if k is None or k.serialized or k.wrapper:
            return False
        return bool(k.thread_axes - ctx.bound)

    def _barrier(self):
        T = self.T
        T.evaluate(T.tvm_storage_sync("shared"))

    def _emit_nodes(self, nodes, ctx: _Ctx):
        barriers = self._needs_barriers(ctx)
        planned = {id(p.store.info) for p in ctx.kernel.allreduce.values()} if ctx.kernel is not None else set()
        if planned:
            # an allreduce stores each element's final value: its init nest is not needed
            nodes = [n for n in nodes if _init_info(n) is None or id(_init_info(n)) not in planned]
        for i, n in enumerate(nodes):
            if barriers and i > 0:
                self._barrier()
            if isinstance(n, P.Loop):
                if ctx.kernel is not None and id(n) in ctx.kernel.allreduce:
                    self._emit_allreduce(ctx.kernel.allreduce[id(n)], ctx)
                else:
                    self._emit_loop(n, ctx)
            else:
                self._emit_store(n, ctx)

    def _emit_allreduce(self, plan: AllReduce, ctx: _Ctx):
        """A cross-thread reduction (:class:`AllReduce`): each thread folds its iterations
        of the serial loops into a ``local`` scalar starting from the identity (the
        statement with its self-reads redirected to the scalar), then one
        ``tvm_thread_allreduce`` over the reduction threads combines the scalars (TVM's
        ``LowerThreadAllreduce``: warp shuffles, then shared memory across warps) and
        thread 0 of the reduction threads stores the element. Guards of threads beyond a
        loop's extent become the allreduce's condition (such threads contribute the
        identity): the allreduce synchronizes the block, so every thread must reach it."""
        T, tirx = self.T, self.tvm.tirx
        st = plan.store
        dt = st.target.dtype
        tv = DTYPES[dt]
        loops = plan.threads
        raw: dict = {}

        def open_frames(i: int, c: _Ctx):
            if i < len(loops):
                lp = loops[i]
                self.cur_span = lp.span
                frame, fields, guard_extent = self._loop_frame(lp, c)
                with frame as v:
                    self.IRB.name(lp.var, v)
                    raw[lp.var] = v
                    env = dict(c.env)
                    env[lp.var] = v + lp.start if lp.start else v
                    conds = c.conds + ((v < guard_extent,) if guard_extent is not None else ())
                    inner = replace(c, env=env, conds=conds, **fields)
                    self._emit_site_allocs(lp)
                    self._emit_private_allocs(lp, inner)
                    open_frames(i + 1, inner)
                return
            self.cur_span = st.span
            acc = T.alloc_buffer((1,), tv, scope="local")
            self.IRB.name(f"{st.target.name}_part", acc)
            T.buffer_store(acc, self._identity(st.info.op, dt), [0])
            self.redirect[id(st)] = acc
            try:
                self._emit_nodes(loops[-1].body, c)
            finally:
                del self.redirect[id(st)]
            self.cur_span = st.span
            res = T.alloc_buffer((1,), tv, scope="local")
            self.IRB.name(f"{st.target.name}_red", res)
            x, y = tirx.Var("x", tv), tirx.Var("y", tv)
            comb = _ExprLowerer(self, c.env, dt, st).combine(st.info.op, x, y, dt)
            reducer = tirx.CommReducer([x], [y], [comb], [self._identity(st.info.op, dt)])
            cond = None
            for g in c.conds:
                cond = g if cond is None else tirx.And(cond, g)
            if cond is None:
                cond = tirx.const(True, "bool")
            with T.attr(reducer, "reduce_scope", tirx.reinterpret("handle", tirx.const(0, "uint64"))):
                T.evaluate(tirx.call_intrin("void", "tirx.tvm_thread_allreduce", tirx.const(1, "uint32"), acc[0],
                                            cond, res[0], *[raw[l.var] for l in plan.reduce]))
            wide = st.target.name in self.wide
            indices = [_ExprLowerer(self, c.env, dt, st).index(i, wide) for i in st.target.indices]
            first = [raw[l.var] == 0 for l in plan.reduce]
            self._guarded_store(self.bufs[st.target.name], res[0], indices, list(c.conds) + first, [], c.kernel)

        try:
            open_frames(0, ctx)
        except LowerFailure:
            raise
        except Exception as e:  # noqa: BLE001
            raise LowerFailure(tvm_message(e), self.cur_span or st.span) from None

    def _loop_frame(self, lp: P.Loop, ctx: _Ctx):
        """(frame, new ctx fields, extra guard) for a loop."""
        T = self.T
        k = ctx.kernel
        n = lp.extent
        kind = lp.kind
        if kind == "V" and _holds_private(lp):
            # TVM's vectorizer gives the lanes one shared allocation: a tile that is fresh
            # per iteration would be one tile for all lanes. Serial iterations each get their own.
            return T.serial(0, n), {}, None
        if not self.gpu:
            if kind == "P" and not (ctx.in_parallel or ctx.in_vector):
                return T.parallel(0, n), {"in_parallel": True}, None
            if kind == "V" and not ctx.in_vector:
                return T.vectorized(0, n), {"in_vector": True}, None
            if kind == "U":
                return self._unroll(lp), {}, None
            return T.serial(0, n), {}, None
        # CUDA, inside a kernel
        if kind == "B" and not k.serialized:
            tag = axis_tag(lp.var)
            launched = k.axes[tag]
            fields = {"bound": ctx.bound | {tag}, "bchain": ctx.bchain + (lp,)}
            return T.thread_binding(0, launched, thread=tag), fields, (n if launched > n else None)
        if kind == "V" and not ctx.in_vector and not _contains_b(lp) and not self._unbound_axes(ctx):
            # (statements under an unbound launched axis get guards and barriers: not vectorizable)
            return T.vectorized(0, n), {"in_vector": True}, None
        if kind == "U":
            return self._unroll(lp), {}, None
        return T.serial(0, n), {}, None

    def _unroll(self, lp: P.Loop):
        T = self.T
        if lp.extent * _code_size(lp.body) <= UNROLL_BUDGET:
            return T.unroll(0, lp.extent)
        return T.serial(0, lp.extent, annotations={"pragma_unroll_explicit": 0, "pragma_auto_unroll_max_step": 16})

    def _emit_loop(self, lp: P.Loop, ctx: _Ctx):
        self.cur_span = lp.span
        try:
            frame, fields, guard_extent = self._loop_frame(lp, ctx)
        except LowerFailure:
            raise
        except Exception as e:  # noqa: BLE001
            raise LowerFailure(tvm_message(e), lp.span) from None
        with frame as v:
            self.IRB.name(lp.var, v)
            env = dict(ctx.env)
            env[lp.var] = v + lp.start if lp.start else v
            conds = ctx.conds
            if guard_extent is not None:
                conds = conds + (v < guard_extent,)
            inner = replace(ctx, env=env, conds=conds, **fields)
            self._emit_site_allocs(lp)
            self._emit_private_allocs(lp, inner)
            self._emit_nodes(lp.body, inner)
            if lp.body and lp.extent > 1 and lp.kind != "B" and self._needs_barriers(inner):
                self._barrier()

    def _emit_store(self, st: P.Store, ctx: _Ctx):
        T = self.T
        self.cur_span = st.span
        tgt = st.target
        tdt = tgt.dtype
        try:
            if st.init:
                value = self._identity(st.info.op, tdt)
            else:
                ex = _ExprLowerer(self, ctx.env, tdt, st)
                value = ex.top(st.value)
            wide = tgt.name in self.wide
            indices = [_ExprLowerer(self, ctx.env, tdt, st).index(i, wide) for i in tgt.indices]
        except LowerFailure:
            raise
        except Exception as e:  # noqa: BLE001
            raise LowerFailure(tvm_message(e), self.cur_span or st.span) from None
        buf = self.bufs[tgt.name]
        if id(st) in self.redirect:  # a thread's partial result of a cross-thread reduction
            buf, indices = self.redirect[id(st)], [0]
        conds = list(ctx.conds)
        self._guarded_store(buf, value, indices, conds, self._unbound_axes(ctx), ctx.kernel)

    def _guarded_store(self, buf, value, indices, conds, missing, kern):
        T = self.T
        if missing:
            tag = missing[0]
            with T.thread_binding(0, kern.axes[tag], thread=tag) as v:
                self._guarded_store(buf, value, indices, conds + [v == 0], missing[1:], kern)
            return
        if conds:
            c = conds[0]
            for x in conds[1:]:
                c = self.tvm.tirx.And(c, x)
            with T.If(c):
                with T.Then():
                    T.buffer_store(buf, value, indices)
        else:
            T.buffer_store(buf, value, indices)

    def _identity(self, op: str, dt: str):
        tirx = self.tvm.tirx
        tv = DTYPES[dt]
        val = P.identity_value(op)
        if dt == "bool":
            return tirx.const(bool(val > 0) if math.isinf(val) else bool(val), "bool")
        if math.isinf(val):
            if is_float(dt):
                return _infinity(tirx, dt, val > 0)
            return tirx.max_value(tv) if val > 0 else tirx.min_value(tv)
        return tirx.const(float(val) if is_float(dt) else int(val), tv)


def _holds_private(lp: P.Loop) -> bool:
    """A private tensor is allocated in ``lp``'s body or in a loop under it."""
    return any(isinstance(n, P.Loop) and n.allocs for n in P.walk([lp]))


def _code_size(nodes) -> int:
    total = 0
    for n in nodes:
        if isinstance(n, P.Loop):
            inner = _code_size(n.body)
            total += inner * n.extent if n.kind == "U" else inner + 1
        else:
            total += 1
    return max(total, 1)


def _accesses(e):
    for n in A.walk(e):
        if isinstance(n, A.Access):
            yield n


def tvm_message(e: Exception) -> str:
    """First meaningful line of a TVM error, without traceback."""
    text = str(e).strip()
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for l in lines:
        if "Check failed" in l or "Error" in l or "error" in l:
            return l[:500]
    return (lines[-1] if lines else type(e).__name__)[:500]


# ---------------------------------------------------------------------------
# expressions


class _ExprLowerer:
    """Lowers LEIR expressions of one statement (target dtype ``tdt``) to PrimExprs."""

    def __init__(self, low: Lowerer, env: dict, tdt: str, st: P.Store):
        self.low = low
        self.tvm = low.tvm
        self.tirx = low.tvm.tirx
        self.env = env
        self.tdt = tdt
        self.st = st
        self.index_dt: Optional[str] = None  # subscript type while lowering a subscript
        #: TVM's bf16 passes fail on a Let inside a bf16 value (CPU): repeat subtrees instead
        self.no_lets = not low.gpu and _mentions_bf16(st)

    # entry points
    def top(self, e: A.Expr):
        comp = self.comp_type(expr_type(e), self.tdt)
        v = self.expr(e, comp)
        return self.cast(v, comp, self.tdt)

    def index(self, e: A.Expr, wide: bool = False):
        """A subscript: int64 as LEIR defines it, or int32 when every subexpression
        provably fits (same values, cheaper code) and the tensor has fewer than 2**31
        elements (``wide``: TVM flattens the subscripts in their own type)."""
        ranges = {l.var: (l.start, l.start + l.extent - 1) for l in self.st.info.loops}
        dt = "i32" if not wide and _magnitude(e, ranges) < 2**31 else "i64"
        saved, self.index_dt = self.index_dt, dt
        try:
            return self.expr(e, dt)
        finally:
            self.index_dt = saved

    # core
    def comp_type(self, t: str, ctx: str) -> str:
        """Concrete type of a node of type ``t`` in context ``ctx`` (the type the parent
        operation computes in): ``resolve(t, ctx)``; inside subscripts weak ints use the
        subscript type."""
        if t == "int_lit" and self.index_dt is not None:
            return self.index_dt
        return resolve(t, ctx)

    def expr(self, e: A.Expr, want: Optional[str]):
        """``e`` computed in its concrete type for context ``want`` (None: the statement's
        target dtype) and converted to ``want``."""
        t = expr_type(e)
        if t is None:
            raise LowerFailure("expression has no type", e.span)
        ctx = want if want is not None else self.tdt
        comp = self.comp_type(t, ctx)
        try:
            v = self.compute(e, comp, ctx)
        except LowerFailure:
            raise
        except Exception as ex:  # noqa: BLE001
            raise LowerFailure(tvm_message(ex), e.span or self.st.span) from None
        if want is not None and want != comp:
            v = self.cast(v, comp, want)
        return v

    def const(self, value, dt: str):
        tirx = self.tirx
        if dt == "bool":
            return tirx.const(bool(value), "bool")
        if is_float(dt):
            if isinstance(value, float) and math.isinf(value):
                return _infinity(tirx, dt, value > 0)
            # the literal's value in its dtype: TVM keeps a double and folds a cast of it
            # (to f32 for f16/bf16 arithmetic) without rounding it to the dtype first
            with np.errstate(over="ignore"):  # (E025 rejects a literal that overflows its type)
                value = float(np.asarray(value, dtype=np.float64).astype(_np_float(dt)))
            return tirx.FloatImm(DTYPES[dt], value)
        return tirx.IntImm(DTYPES[dt], int(value))

    def cast(self, v, src: str, dst: str):
        if src == dst:
            return v
        tirx = self.tirx
        if dst == "bool":
            return tirx.NE(v, self.const(0, src))
        return tirx.Cast(DTYPES[dst], v)

    def compute(self, e: A.Expr, comp: str, ctx: str):
        tirx = self.tirx
        if isinstance(e, A.Const):
            return self.const(e.value, comp)
        if isinstance(e, A.Var):
            v = self.low_env(e)
            return self.cast(v, "i32", comp)
        if isinstance(e, A.Access):
            return self.load(e)
        if isinstance(e, A.Neg):
            x = self.expr(e.operand, comp)
            if comp == "bool":
                raise LowerFailure("cannot negate a bool value", e.span)
            if is_float(comp):
                if isinstance(x, tirx.FloatImm):  # a negative literal stays a literal
                    return self.const(-x.value, comp)
                return tirx.Mul(x, self.const(-1.0, comp))
            return self.arith("-", self.const(0, comp), x, comp)
        if isinstance(e, A.Compare):
            res = None
            ct = expr_type(e.operands[0])
            for o in e.operands[1:]:
                ct = promote(ct, expr_type(o))
            ct = self.comp_type(ct, ctx)
            for op, a, b in zip(e.ops, e.operands, e.operands[1:]):
                x, y = self.expr(a, ct), self.expr(b, ct)
                if is_float(ct) and op in ("!=", "==", "<=", ">="):
                    c = self.float_compare(op, x, y, ct)
                else:
                    cmp = {"<": tirx.LT, "<=": tirx.LE, ">": tirx.GT, ">=": tirx.GE, "==": tirx.EQ, "!=": tirx.NE}
                    c = cmp[op](x, y)
                res = c if res is None else tirx.And(res, c)
            return res
        if isinstance(e, A.BinOp):
            return self.binop(e, comp)
        if isinstance(e, A.Call):
            return self.call(e, comp)
        raise LowerFailure(f"cannot lower {type(e).__name__}", getattr(e, "span", None))

    def low_env(self, e: A.Var):
        try:
            return self.env[e.name]
        except KeyError:
            raise LowerFailure(f"index '{e.name}' is not bound here", e.span) from None

    def load(self, acc: A.Access):
        st = self.st
        if st.self_identity and acc.name == st.target.name and acc.indices == st.target.indices:
            return self.low._identity(st.info.op, acc.dtype)
        part = self.low.redirect.get(id(st))
        if part is not None and acc.name == st.target.name and acc.indices == st.target.indices:
            return self.tirx.BufferLoad(part, [self.tirx.const(0, "int32")])
        buf = self.low.bufs.get(acc.name)
        if buf is None:
            raise LowerFailure(f"tensor '{acc.name}' has no buffer", acc.span)
        wide = acc.name in self.low.wide
        idx = [self.index(i, wide) for i in acc.indices]
        return self.tirx.BufferLoad(buf, idx)

    def binop(self, e: A.BinOp, comp: str):
        tirx = self.tirx
        op = e.op
        if op in ("&", "|"):
            x, y = self.expr(e.lhs, "bool"), self.expr(e.rhs, "bool")
            return tirx.And(x, y) if op == "&" else tirx.Or(x, y)
        if op == "**":
            return self.power(e.lhs, e.rhs, comp, e.span)
        if comp == "bool":  # arithmetic on booleans: in i64, converted back (x != 0)
            wide = replace(e, lhs=A.Call("i64", (e.lhs,)), rhs=A.Call("i64", (e.rhs,)))
            return self.cast(self.binop(wide, "i64"), "i64", "bool")
        x, y = self.expr(e.lhs, comp), self.expr(e.rhs, comp)
        if is_float(comp) and op in ("+", "-", "*", "/"):
            x, y = self._guard_float_folding(e, x, y, comp)
        if op in ("+", "-", "*"):
            return self.arith(op, x, y, comp)
        if op == "/":
            return self.float_op("/", x, y, comp) if is_float(comp) else tirx.Div(x, y)
        if op in ("//", "%"):
            if is_float(comp):
                lets: list = []  # x and y are used twice by %: bound once
                x, y = self._shared(x, DTYPES[comp], lets), self._shared(y, DTYPES[comp], lets)
                q = self.unary_float(tirx.floor, comp, self.float_op("/", x, y, comp))
                r = q if op == "//" else self.float_op("-", x, self.float_op("*", q, y, comp), comp)
                return self._with_lets(r, lets)
            f = tirx.floordiv if op == "//" else tirx.floormod
            if isinstance(e.rhs, A.Const) and e.rhs.is_int and e.rhs.value != 0:
                return f(x, y)
            zero = self.const(0, comp)
            safe = tirx.Select(tirx.EQ(y, zero), self.const(1, comp), y)
            return tirx.Select(tirx.EQ(y, zero), zero, f(x, safe))
        raise LowerFailure(f"unknown operator '{op}'", e.span)

    def power(self, base: A.Expr, exp: A.Expr, comp: str, span):
        tirx = self.tirx
        n = None
        if isinstance(exp, A.Const) and not math.isinf(exp.value) and float(exp.value).is_integer():
            n = int(exp.value)
        if is_float(comp):
            b = self.expr(base, comp)
            if n is not None and 0 <= n <= 4:
                return self._product(b, n, comp)
            return self.unary_float(lambda x, y: tirx.pow(x, y), comp, b, self.expr(exp, comp))
        if comp == "bool":
            raise LowerFailure("'**' on bool values", span)
        b = self.expr(base, comp)
        if n is not None and 0 <= n <= 16:
            return self._product(b, n, comp)
        bf = self.cast(b, comp, "f64")
        ef = self.expr(exp, "f64")
        return self.cast(tirx.pow(bf, ef), "f64", comp)

    def _product(self, b, n: int, comp: str):
        if n == 0:
            return self.const(1, comp)
        r = b
        for _ in range(n - 1):
            r = self.arith("*", r, b, comp)
        return r

    def arith(self, op: str, x, y, comp: str):
        """``x op y`` for ``+ - *`` in ``comp``; unsigned results wrap modulo 2**n.

        TVM's LLVM backend emits u32/u64 ``add``/``sub``/``mul`` with ``nuw`` (no unsigned
        wrap), so LLVM may fold ``(x*4)//4`` to ``x`` and ``x+1 < x`` to false. Those ops are
        computed in a type twice as wide, where they cannot overflow (``-`` signed, so it
        cannot go below zero), and truncated; LLVM narrows the result back to one plain
        wrapping instruction. In CUDA C unsigned arithmetic wraps, but ``u16 * u16`` is
        promoted to (signed) ``int`` and can overflow it: it is computed in ``uint``."""
        tirx = self.tirx
        if is_float(comp):
            return self.float_op(op, x, y, comp)
        f = {"+": tirx.Add, "-": tirx.Sub, "*": tirx.Mul}[op]
        wide = _wrap_type(op, comp, self.low.gpu)
        if wide is None:
            return f(x, y)
        return tirx.Cast(DTYPES[comp], f(tirx.Cast(wide, x), tirx.Cast(wide, y)))

    def float_op(self, op: str, x, y, comp: str):
        """Float ``x op y`` (``+ - * /``) rounded once, in ``comp``, as the interpreter does.

        CPU only, two places where TVM's LLVM code would round differently:

        * f16/bf16: TVM computes a chain of narrow operations in f32 and rounds only where
          it stores (``(x + x) - x`` is ``x`` for an f16 ``x`` near 65504, not inf). Each
          operation is computed in f32 and rounded back here: exact, since f32 carries
          more than twice their precision plus two bits.
        * a product that is an operand of ``+``/``-`` goes through ``llvm.arithmetic.fence``:
          TVM lets LLVM contract ``a*b + c`` into one fused multiply-add (one rounding
          instead of two, and a product that overflows to inf turns finite), which changes
          values and special values alike; the fence costs the FMA and nothing else."""
        tirx = self.tirx
        f = {"+": tirx.Add, "-": tirx.Sub, "*": tirx.Mul, "/": tirx.Div}[op]
        if self.low.gpu:
            return f(x, y)
        if comp in ("f16", "bf16"):
            x32, y32 = tirx.Cast("float32", x), tirx.Cast("float32", y)
            r = f(x32, y32)
            if comp == "bf16" and _tree_size(r, BF16_ROUND_LIMIT) <= BF16_ROUND_LIMIT:
                r = self._round_bf16(r)
            return tirx.Cast(DTYPES[comp], r)
        if op in ("+", "-"):
            x, y = self._fence(x, comp), self._fence(y, comp)
        return f(x, y)

    def _round_bf16(self, r):
        """The f32 ``r`` rounded to the nearest bf16 (ties to even), still in f32.
        TVM's bf16 legalization drops a ``bf16(f32(.))`` pair inside an expression, so the
        rounding is spelled out on the bits (what the legalization itself does at a store;
        overflow gives inf, and a NaN stays NaN: its high mantissa bits are set). ``r``
        occurs twice: TVM's bf16 passes fail on a ``Let`` inside a bf16 value, so the tree
        doubles per nested operation, and beyond :data:`BF16_ROUND_LIMIT` nodes an
        operation keeps f32 precision (docs/language.md §8)."""
        tirx = self.tirx
        u32 = "uint32"
        bits = tirx.reinterpret(u32, r)
        lsb = tirx.bitwise_and(tirx.shift_right(bits, tirx.const(16, u32)), tirx.const(1, u32))
        rounded = tirx.bitwise_and(bits + tirx.const(0x7FFF, u32) + lsb, tirx.const(0xFFFF0000, u32))
        return tirx.reinterpret("float32", rounded)

    def _fence(self, v, comp: str):
        """``v`` behind ``llvm.arithmetic.fence`` when it is a product (see :meth:`float_op`;
        CPU, f32/f64)."""
        tirx = self.tirx
        if (FENCE_PRODUCTS and not self.low.gpu and comp in ("f32", "f64") and isinstance(v, tirx.Mul)
                and not _tir_constant(v)):  # (a constant product is folded, never contracted)
            return tirx.call_llvm_pure_intrin(DTYPES[comp], "llvm.arithmetic.fence", v)
        return v

    def _shared(self, v, dtype: str, lets: list):
        """``v`` for use in several places: leaves as they are, anything else bound once
        by a ``Let`` (recorded in ``lets``; see :meth:`_with_lets`)."""
        tirx = self.tirx
        # (a load is a leaf too: LLVM/nvcc merge repeated loads of one address; a constant
        # such as ``f32(0)`` stays visible, so its NaN test folds instead of becoming a
        # CUDA bit cast of a literal, which has no address)
        if (isinstance(v, (tirx.Var, tirx.IntImm, tirx.FloatImm)) or type(v).__name__ in ("BufferLoad", "TensorLoad")
                or _tir_constant(v) or self.no_lets):
            return v
        var = tirx.Var(f"nan_op{len(lets)}", dtype)
        lets.append((var, v))
        return var

    def _with_lets(self, r, lets: list):
        for var, v in reversed(lets):
            r = self.tirx.Let(var, v, r)
        return r

    def _opaque(self, v, comp: str, const: Optional[float] = None, fence: bool = True):
        """``v`` behind a bit cast: the same value (LLVM and nvcc drop the casts), but TVM's
        simplifier cannot see into it. On CUDA a constant is cast from its bit pattern
        (TVM's CUDA code takes the address of the operand of a bit cast, which a literal
        has not; its LLVM code rejects a bit cast of integer 0 to a non-pointer)."""
        tirx = self.tirx
        if comp == "bf16" and not self.low.gpu:
            # TVM's LLVM path computes bf16 in f32 (BF16ComputeLegalize) and rejects a bf16
            # bit cast there: the same value behind an f32 cast (bf16 -> f32 is exact)
            return tirx.Cast("bfloat16", self._opaque(tirx.Cast("float32", v), "f32", const, fence))
        bits = DTYPE_BYTES[comp] * 8
        if const is None and isinstance(v, tirx.FloatImm):
            const = v.value
        if const is not None and self.low.gpu:
            pattern = int(np.asarray(const, dtype=np.float64).astype(_np_float(comp)).view(f"uint{bits}"))
            return tirx.reinterpret(DTYPES[comp], tirx.const(pattern, f"uint{bits}"))
        if fence and const is not None and const == 0 and comp in ("f32", "f64", "f16"):
            # LLVM drops the casts, and TVM's code generator lets LLVM ignore the sign of
            # zero (``0.0 - x`` became ``-x``: -0.0 for x = +0.0): a zero stays behind a fence
            wt = "float32" if comp == "f16" else DTYPES[comp]
            zero = tirx.FloatImm(wt, math.copysign(0.0, const))
            fenced = tirx.call_llvm_pure_intrin(wt, "llvm.arithmetic.fence", zero)
            return fenced if comp != "f16" else tirx.Cast("float16", fenced)
        return tirx.reinterpret(DTYPES[comp], tirx.reinterpret(f"uint{bits}", v))

    def _guard_float_folding(self, e: A.BinOp, x, y, comp: str):
        """TVM's simplifier folds float ``x - x`` and ``x * 0`` to 0, cancels ``(x + y) - y``,
        ``(x + y) - x`` and ``x - (x + y)`` (a literal counts: ``(x + 1) - 1``, ``x + inf - inf``)
        and folds constant operations in double. All of these change values (NaN, inf,
        -0.0, rounding), so where the operands could give it such a pattern, one operand is
        made opaque (:meth:`_opaque`): the constant 0, an operand that occurs in the other,
        two constants. Cancellations are decided on the lowered operands as TVM will see
        them (fenced products, operands already made opaque below them)."""
        def zero(n):  # the signed zero ``n`` is (0.0 or -0.0), else None
            if isinstance(n, A.Const) and n.value == 0:
                return math.copysign(0.0, n.value) if isinstance(n.value, float) else 0.0
            if isinstance(n, A.Neg):
                z = zero(n.operand)
                return None if z is None else -z
            return None

        if e.op in ("+", "-"):
            x, y = self._fence(x, comp), self._fence(y, comp)
        zl, zr = zero(e.lhs), zero(e.rhs)
        if zl is not None or zr is not None:
            # (against a constant LLVM folds exactly: no fence needed for the sign of zero)
            x = x if zl is None else self._opaque(x, comp, zl, fence=not _tir_constant(y))
            y = y if zr is None else self._opaque(y, comp, zr, fence=not _tir_constant(x))
        elif _tir_constant(x) and _tir_constant(y):
            # TVM folds constants in double (``2048 + 1 - 2048`` is 1, not 0, in f16);
            # behind the cast LLVM folds them in the dtype, as the interpreter computes
            y = self._opaque(y, comp)
        elif e.op != "-" and (_occurs_in(e.rhs, e.lhs) or _occurs_in(e.lhs, e.rhs)):
            y = self._opaque(y, comp)
        for _ in range(3):  # an opaque form may itself occur on the other side
            if not self._folds(e.op, x, y):
                break
            y = self._opaque(y, comp)
        return x, y

    def _folds(self, op: str, x, y) -> bool:
        """TVM's simplifier would rewrite ``x op y`` itself, not only inside its operands:
        asked of TVM's own analyzer (its rules see through identities it removes first,
        ``v * 1``, ``select(true, a, b)``, ``x - (-c)``, ...). The caller then makes ``y``
        opaque, which no rule matches; a rewrite that was harmless costs nothing (LLVM
        drops the cast)."""
        tirx = self.tirx
        from tvm_ffi import structural_equal as same  # noqa: PLC0415 - TVM's FFI, loaded with TVM

        f = {"+": tirx.Add, "-": tirx.Sub, "*": tirx.Mul, "/": tirx.Div}[op]
        # a fresh analyzer: one that has seen a Let binds its variable, and the next
        # expression binding it (a copy of the same operand) would be refused
        an = self.low.analyzer_type()
        whole = an.rewrite_simplify(f(x, y))
        return not same(whole, f(an.rewrite_simplify(x), an.rewrite_simplify(y)))

    def isnan(self, v, comp: str):
        """``v`` is NaN. LLVM: ``tirx.isnan`` (``fcmp uno``; made vectorizable in
        :mod:`._tvm`). CUDA: ``v != v'`` with ``v'`` the same bits behind a bit cast (C's
        ``!=`` is unordered; TVM prints it lane by lane in vector code, but a vector
        ``isnan`` as one invalid whole-vector ``!=``; the cast keeps TVM's simplifier from
        folding ``v != v`` to false). 16-bit floats widen exactly to f32 first (tirx.isnan
        rejects bf16)."""
        tirx = self.tirx
        if isinstance(v, tirx.FloatImm):
            return tirx.const(math.isnan(v.value), "bool")
        if comp in ("f16", "bf16"):
            v, comp = tirx.Cast("float32", v), "f32"
        if self.low.gpu and not _tir_constant(v):
            # (a constant folds to a literal behind the cast; its isnan folds instead)
            return tirx.NE(v, self._opaque(v, comp))
        return tirx.isnan(v)

    def minmax(self, f: str, x, y, comp: str):
        """``max``/``min`` of ``x`` (the accumulated side, see :meth:`call`) and ``y``; on
        floats NaN if either is NaN (``np.maximum``, ``torch.maximum``). TVM's float
        ``Max`` is ``a > b ? a : b`` on LLVM and ``fmaxf`` on CUDA; both drop a NaN operand.

        Form: ``isnan(y) ? NaN : (y > x ? y : x)``. A NaN ``x`` survives the inner select
        (the comparison is false); the NaN test is on ``y`` only, so in a reduction
        ``X = max(X, A)`` the loop-carried chain is one x86 ``maxss``/``maxps`` (the inner
        select) and one masked move, and ``max(v, 0.0)`` is a single ``maxps``
        (``isnan(0.0)`` folds away). The outer select yields a constant quiet NaN, not
        ``y``: with ``y`` there LLVM merges the two selects into one whose condition
        (compare, or, blend) lengthens the chain, 2.1x the old time on a serial max
        reduction instead of 1.5x. (A NaN ``y`` thus loses its payload.)"""
        tirx = self.tirx
        if comp == "bool":
            return tirx.Or(x, y) if f == "max" else tirx.And(x, y)
        if not is_float(comp):
            return tirx.Max(x, y) if f == "max" else tirx.Min(x, y)
        if comp == "bf16" and not self.low.gpu:
            # TVM's bf16 legalization retypes a Let's value to f32 but not its variable
            # (the build fails): compare in f32, exact for bf16 values
            r = self.minmax(f, tirx.Cast("float32", x), tirx.Cast("float32", y), "f32")
            return tirx.Cast("bfloat16", r)
        lets: list = []
        a, b = self._shared(x, DTYPES[comp], lets), self._shared(y, DTYPES[comp], lets)
        pick_b = tirx.GT(b, a) if f == "max" else tirx.LT(b, a)
        r = tirx.Select(self.isnan(b, comp), self._quiet_nan(comp), tirx.Select(pick_b, b, a))
        return self._with_lets(r, lets)

    def combine(self, op: str, x, y, comp: str):
        """Two partial results of an ``op`` reduction combined (``-`` partials are sums)."""
        if op in ("max", "min"):
            return self.minmax(op, x, y, comp)
        return self.arith("*" if op == "*" else "+", x, y, comp)

    def _quiet_nan(self, comp: str):
        # from its bits: TVM's CUDA code has no spelling for a NaN float literal
        bits = DTYPE_BYTES[comp] * 8
        pattern = {16: 0x7E00 if comp == "f16" else 0x7FC0, 32: 0x7FC00000, 64: 0x7FF8000000000000}[bits]
        return self.tirx.reinterpret(DTYPES[comp], self.tirx.const(pattern, f"uint{bits}"))

    def float_compare(self, op: str, x, y, comp: str):
        """IEEE ``== != <= >=`` on floats (every comparison with a NaN is false except
        ``!=``). TVM's LLVM backend emits ``!=`` as the ordered ``fcmp one`` (false for NaN),
        and TVM's simplifier folds ``x == x``, ``x <= x``, ``x >= x`` to true and
        ``x != x`` to false whatever ``x`` is. The NaN tests keep both right; where the
        operands differ LLVM folds them away (``one | uno`` is ``une``, ``oeq & ord`` is
        ``oeq``). ``<`` and ``>`` are already right (ordered, and ``x < x`` folds to false).
        """
        tirx = self.tirx
        if comp == "bf16" and not self.low.gpu:  # (see :meth:`minmax`)
            return self.float_compare(op, tirx.Cast("float32", x), tirx.Cast("float32", y), "f32")
        lets: list = []
        a, b = self._shared(x, DTYPES[comp], lets), self._shared(y, DTYPES[comp], lets)
        if op == "!=":
            c = tirx.Or(tirx.NE(a, b), tirx.Or(self.isnan(a, comp), self.isnan(b, comp)))
        else:
            f = {"==": tirx.EQ, "<=": tirx.LE, ">=": tirx.GE}[op]
            c = tirx.And(f(a, b), tirx.Not(self.isnan(a, comp)))
        return self._with_lets(c, lets)

    def unary_float(self, fn, comp: str, *args):
        """Apply a transcendental; f16 computes in f32, bf16 in f32 on CUDA and in f64 on
        the CPU (where it cannot use the inline f32 forms, and TVM's own f32 ``tanh``
        flushes a subnormal argument to 0; libm's f64 functions do not)."""
        if comp in ("f16", "bf16"):
            wt = "float64" if comp == "bf16" and not self.low.gpu else "float32"
            wide = [self.tirx.Cast(wt, a) for a in args]
            return self.tirx.Cast(DTYPES[comp], fn(*wide))
        return fn(*args)

    def call(self, e: A.Call, comp: str):
        tirx = self.tirx
        f = e.func
        if f in A.CAST_FUNCS:
            (arg,) = e.args
            src = self.comp_type(expr_type(arg), f)
            return self.cast(self.expr(arg, src), src, f)
        if f == "if_then_else":
            c, a, b = e.args
            cond = self.expr(c, "bool")
            return tirx.if_then_else(cond, self.expr(a, comp), self.expr(b, comp))
        if f in ("max", "min"):
            exprs = list(e.args)
            # the reduction's own element first: it is the accumulated side of minmax
            own = [k for k, a in enumerate(exprs) if isinstance(a, A.Access) and a == self.st.target]
            if own and own[0] > 0:
                exprs.insert(0, exprs.pop(own[0]))
            args = [self.expr(a, comp) for a in exprs]
            r = args[0]
            for x in args[1:]:
                r = self.minmax(f, r, x, comp)
            return r
        if f == "abs":
            x = self.expr(e.args[0], comp)
            if comp == "bool" or comp.startswith("u"):
                return x
            return tirx.abs(x)
        if f in ("floor", "ceil"):
            x = self.expr(e.args[0], comp)
            if not is_float(comp):
                return x
            return self.unary_float(tirx.floor if f == "floor" else tirx.ceil, comp, x)
        if f == "pow":
            return self.power(e.args[0], e.args[1], comp, e.span)
        fns = {
            "exp": tirx.exp, "log": tirx.log, "sqrt": tirx.sqrt, "rsqrt": tirx.rsqrt, "erf": tirx.erf,
            "tanh": tirx.tanh, "sigmoid": tirx.sigmoid,
        }
        if f in fns:
            x = self.expr(e.args[0], comp)
            # (bf16: the inline forms bind their argument by a Let, which TVM's bf16 passes
            # miscompile -- sigmoid gave 1 everywhere -- or reject)
            if not self.low.gpu and comp not in ("f64", "bf16") and f in INLINE_LIBM:
                return self.unary_float(partial(INLINE_LIBM[f], tirx), comp, x)
            if not self.low.gpu and f == "tanh":
                # TVM's own tanh is a formula that loses ~100 ulps near 0 (f64) and
                # flushes subnormals; LLVM's intrinsic is libm's
                wt = "float32" if comp in ("f32", "f16") else "float64"  # (f32, f16: inline forms above)
                return self.unary_float(lambda v: tirx.call_llvm_pure_intrin(wt, "llvm.tanh", v), comp, x)
            return self.unary_float(fns[f], comp, x)
        raise LowerFailure(f"unknown function '{f}'", e.span)


def _mentions_bf16(st) -> bool:
    """The statement stores, reads or casts to bf16."""
    if st.target.dtype == "bf16":
        return True
    return st.value is not None and any(
        (isinstance(n, A.Access) and n.dtype == "bf16") or (isinstance(n, A.Call) and n.func == "bf16")
        for n in A.walk(st.value))


def _tree_size(v, limit: int) -> int:
    """Nodes of the PrimExpr ``v`` counted as a tree (shared subtrees once per use), up to
    just past ``limit``."""
    n, stack = 0, [v]
    while stack and n <= limit:
        x = stack.pop()
        n += 1
        for k in ("a", "b", "value", "condition", "true_value", "false_value"):
            c = getattr(x, k, None)
            if c is not None and not isinstance(c, (int, float, str)):
                stack.append(c)
        args = getattr(x, "args", None)
        if args is not None:
            stack.extend(args)
    return n


def _infinity(tirx, dt: str, positive: bool):
    """``±inf`` in float dtype ``dt`` (TVM has no bf16 infinity: a cast of f32's, exact)."""
    if dt == "bf16":
        inf = tirx.infinity("float32")
        return tirx.Cast("bfloat16", inf if positive else -inf)
    inf = tirx.infinity(DTYPES[dt])
    return inf if positive else -inf


def _np_float(dt: str):
    if dt == "bf16":
        import ml_dtypes  # noqa: PLC0415 - only where bf16 constants are needed

        return ml_dtypes.bfloat16
    return {"f16": np.float16, "f32": np.float32, "f64": np.float64}[dt]


def _tir_constant(v) -> bool:
    """``v`` (a PrimExpr) reads no variable and no buffer: the simplifier folds it."""
    name = type(v).__name__
    if name in ("IntImm", "FloatImm", "StringImm"):
        return True
    if name in ("Var", "SizeVar", "BufferLoad", "TensorLoad", "Let"):
        return False
    kids = [getattr(v, k) for k in ("a", "b", "value", "condition", "true_value", "false_value") if hasattr(v, k)]
    kids += list(getattr(v, "args", ()) or ())
    return bool(kids) and all(_tir_constant(k) for k in kids)


def _occurs_in(needle: A.Expr, hay: A.Expr) -> bool:
    """``needle`` (an expression reading a tensor or an index) equals ``hay`` or one of its
    value subexpressions (spans are ignored; subscripts are not values of the operation)."""
    if not any(isinstance(n, (A.Access, A.Var)) for n in A.walk(needle)):
        return False  # constant: zeros are guarded separately, others cancel only by rounding
    t = type(needle)
    stack = [hay]
    while stack:
        n = stack.pop()
        if type(n) is t and n == needle:
            return True
        if isinstance(n, A.BinOp):
            stack += [n.lhs, n.rhs]
        elif isinstance(n, A.Neg):
            stack.append(n.operand)
        elif isinstance(n, A.Call):
            stack += list(n.args)
        elif isinstance(n, A.Compare):
            stack += list(n.operands)
    return False


def _wrap_type(op: str, comp: str, gpu: bool) -> Optional[str]:
    """The TVM type in which unsigned ``op`` is computed so that it wraps (None: ``comp``
    itself); see :meth:`_ExprLowerer.arith`."""
    if gpu:
        return "uint32" if (comp == "u16" and op == "*") else None
    if comp in ("u32", "u64"):
        bits = 128 if comp == "u64" else 64
        return f"int{bits}" if op == "-" else f"uint{bits}"
    return None


def _magnitude(e: A.Expr, ranges: dict) -> float:
    """Bound on |value| of ``e`` and of every subexpression (inf when unknown)."""
    if isinstance(e, A.Const):
        return abs(e.value) if e.is_int else math.inf
    if isinstance(e, A.Var):
        r = ranges.get(e.name)
        return max(abs(r[0]), abs(r[1])) if r else math.inf
    if isinstance(e, A.Neg):
        return _magnitude(e.operand, ranges)
    if isinstance(e, A.BinOp):
        a, b = _magnitude(e.lhs, ranges), _magnitude(e.rhs, ranges)
        if e.op in ("+", "-"):
            return a + b
        if e.op == "*":
            return a * b
        if e.op in ("//", "%"):
            return max(a, b)
        return math.inf
    if isinstance(e, A.Call) and e.func in ("max", "min", "abs"):
        return max(_magnitude(x, ranges) for x in e.args)
    if isinstance(e, A.Call) and e.func == "if_then_else":
        # the condition is computed in its own type; it only selects
        return max(_magnitude(e.args[1], ranges), _magnitude(e.args[2], ranges))
    if isinstance(e, A.Access) and e.dtype in ("i8", "i16", "u8", "u16", "bool"):
        return 2**16
    return math.inf


def lower_kernel(result: CheckResult, target="llvm", only: Optional[set] = None, *,
                 poison_intermediates: bool = False):
    """(IRModule, diagnostics). Raises :class:`LowerFailure`. ``poison_intermediates``:
    see :meth:`Lowerer._poison_fill`."""
    low = Lowerer(result, target, only, poison_intermediates)
    try:
        mod = low.lower()
    except LowerFailure:
        raise
    except Exception as e:  # noqa: BLE001
        raise LowerFailure(tvm_message(e), low.cur_span or result.kernel.span) from None
    return mod, low.diagnostics
