"""Reference interpreter: the NumPy oracle that defines what a LEIR program computes.

Semantics (docs/language.md §3-§8; the TVM lowering implements the same):

* Items run in program order; a loop ``K^{N}_{v=s}`` runs ``v = s .. s+N-1`` in order. The
  loop kind (L P V U B) does not change the meaning.
* ``reduce`` statements: on entry to the statement's ``init_loop`` every element the
  statement writes inside that loop (for the current values of the enclosing loops) is set
  to the identity (0 0 1 -inf +inf for + - * max min); each iteration then evaluates the
  right-hand side reading X's current value. Without an init loop, self-reads of X are the
  identity. ``assign``, ``update`` and ``scan`` statements are evaluated literally.
* Types follow :mod:`leirc.lang.types`: each subexpression is computed in its promoted
  type, weak literals and loop indices adopt the type of the operation they meet (resolved
  against the statement's target dtype at the top). f16/bf16 operations are computed in f32
  and rounded after each operation. The value is cast to the target dtype when stored.
  A literal is created directly in the type of the operation it meets (``0.1`` in an f16
  product is ``f16(0.1)``); loop indices are int64 values cast to the operation type.
* ``if_then_else`` is lazy: the untaken branch is never observed and its out-of-range
  subscripts are not errors. Subscripts without tensor reads were proven in range wherever
  they are used (the checker's bounds proof, E030), so on a vectorized grid their
  out-of-range points belong to untaken branches and are clipped. Subscripts that read
  tensor data (W014) are checked at run time against the guards that are active: an
  out-of-range value in a taken branch raises :class:`InterpError` naming the access, its
  span and the loop indices.
* A private tensor (``\\alloc``) is fresh in every iteration of the loops around its
  allocation; the interpreter runs the equivalent program in which those loops' indices
  are extra leading subscripts (:mod:`leirc.lang.private`), so both modes below see an
  ordinary intermediate whose slices start poisoned.
* Outputs and intermediates start *poisoned* (NaN payloads / integer sentinels, see
  :mod:`leirc.interp.dtypes`), so reads of unwritten memory show up as NaN. With
  ``run(..., check_uninit=True)`` such a read (in a taken branch) is an error:
  ``InterpError("uninitialized read: ...")`` naming the tensor, element and statement.
* NaN: ``max``/``min`` propagate it (NaN if either operand is NaN, like
  ``torch.maximum``; also in max/min reductions); comparisons follow IEEE 754 (every
  comparison with a NaN operand is false except ``!=``); ``bool(NaN)`` is true.
* Signed integer overflow (i8 i16 i32 i64) in ``+ - *``, unary ``-``, ``abs`` and
  ``min // -1`` is an error: ``InterpError("signed integer overflow: ...")``, including the running values of
  vectorized sums. Unsigned arithmetic wraps modulo 2^n; conversions wrap.

The literal execution (``Interpreter(result, vectorize=False)``: every loop iterates,
statements are evaluated element by element) *is* these semantics. By default execution
is vectorized (see :mod:`leirc.interp.plan` for when each loop may be, a condition
written independently of the checker's dependence analysis): the
interpreter binds each vectorized loop index to an ``arange`` on its own axis (axis = the
loop's nesting depth), evaluates whole expression grids with NumPy broadcasting (affine,
provably in-bounds subscripts become zero-copy strided views; others use fancy indexing),
and scatters into the target. Reductions whose axes run vectorized reduce with NumPy:

* sums and products accumulate in **float64** (int64 for integers) and are rounded to the
  target dtype once per combine, so the oracle is *more* accurate than a serial f32 loop;
* a sum of products (``X = X + a*b*...`` in f32/f64) is contracted in float64 with
  (batched) matrix products (:func:`leirc.interp.mathfns.contract`; products of two f32
  factors are exact in float64);
* max/min reduce exactly in the operation type;
* short windows (at most 64 reduction positions, as in convolutions and pooling) are
  reduced with one whole-grid operation per position instead of a strided NumPy reduce;
* chains ``X + a - b`` / ``X * a / b`` are reassociated to ``X + (a - b)`` / ``X * (a/b)``
  (exact in the reals). Reductions whose literal meaning does not reassociate (an integer
  accumulator of float values truncates at every step) keep their loops serial.

Memory: a vectorized loop runs in blocks so that no grid it grows exceeds
``max_elements`` (default 2**24 elements, 128 MB as float64): each statement
materializes the grid of its vectorized loops, a sum of products only its factors and its
result, and a loop is blocked only by the grids that contain its index (blocking a loop a
grid does not depend on would only repeat work). Blocks run in order; for reductions each
block combines into X. Kernel inputs, outputs and intermediates are held whole.
"""

from __future__ import annotations

import itertools
import math
import operator
import warnings
from dataclasses import replace
from typing import Callable, Optional

import numpy as np

from ..lang import ast as A
from ..lang.affine import Facts, affine
from ..lang.checker import CheckResult, StmtInfo, check_kernel
from ..lang.private import expand_private, has_private
from ..lang.printer import print_expr
from ..lang.types import expr_type, promote, resolve
from . import dtypes as D
from .mathfns import contract as _contract_ops
from .mathfns import erf as _erf
from .plan import ITER, Plan, make_plan

#: default bound on the number of elements of one evaluated grid
MAX_ELEMENTS = 1 << 24


class InterpError(Exception):
    """A run-time error of the program (out-of-range subscript, bad inputs)."""

    def __init__(self, message: str, span: Optional[A.Span] = None, *, locate: bool = True):
        self.span = span
        loc = f"{span.line}:{span.col}: " if span is not None and locate else ""
        super().__init__(loc + message)
        self.message = message


class VecBind:
    """A vectorized loop index: values ``start .. start+length-1`` along ``axis``."""

    __slots__ = ("axis", "start", "length", "arr")

    def __init__(self, axis: int, start: int, length: int, maxd: int):
        self.axis = axis
        self.start = start
        self.length = length
        shape = [1] * maxd
        shape[axis] = length
        self.arr = np.arange(start, start + length, dtype=np.int64).reshape(shape)


class _State:
    __slots__ = ("env", "tensors", "guards", "maxd", "written")

    def __init__(self, tensors: dict, maxd: int, written: Optional[dict] = None):
        self.env: dict = {}
        self.tensors = tensors
        self.guards: list = []
        self.maxd = maxd
        # tensor name -> bool array of the elements written so far (check_uninit only)
        self.written = written

    def guard_mask(self):
        m = None
        for c, pol in self.guards:
            c2 = c if pol else np.logical_not(c)
            m = c2 if m is None else np.logical_and(m, c2)
        return m

    def where(self, pos) -> str:
        """Loop index values at grid position ``pos`` (None: the iterated ones only)."""
        parts = []
        for v, b in self.env.items():
            if isinstance(b, VecBind):
                if pos is not None:
                    parts.append(f"{v}={b.start + int(pos[b.axis]) if b.length > 1 else b.start}")
            else:
                parts.append(f"{v}={b}")
        return ", ".join(parts)


Fn = Callable[[_State], object]


def _cast(x, dt: np.dtype):
    return x if x.dtype == dt else x.astype(dt)


_ARITH = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.true_divide,
    "//": np.floor_divide,
    "%": np.mod,
}


_PY_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul}

#: signed integer types: + - * and unary minus (and abs) must not overflow (an error in
#: LEIR; unsigned types wrap modulo 2^n)
SIGNED = ("i8", "i16", "i32", "i64")
_I64_MIN = np.iinfo(np.int64).min


def _overflow_fn(op: str, T: str):
    """``f(a, b) -> (result, bad)`` for ``a op b`` in signed type ``T``: the wrapped NumPy
    result and a mask (or bool) of the elements where the exact result is out of range.
    i8/i16/i32 are computed exactly in int64 and range-checked; i64 uses the sign rules
    of two's complement for + - and an exact division check for *."""
    dt = D.np_dtype(T)
    info = np.iinfo(dt)
    lo, hi = int(info.min), int(info.max)
    u = _ARITH[op]
    exact = _PY_ARITH[op]

    def scalar(a, b):
        # literal execution: one element, exactly in Python integers
        r = exact(int(a), int(b))
        ok = lo <= r <= hi
        return np.int64(((r + (1 << 63)) % (1 << 64)) - (1 << 63)).astype(dt), not ok

    if T != "i64":
        def narrow(a, b):
            if a.__class__ is not np.ndarray and b.__class__ is not np.ndarray:
                return scalar(a, b)
            r = u(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))
            bad = (r < lo) | (r > hi)
            return r.astype(dt), bad

        return narrow

    def wide(a, b):
        if a.__class__ is not np.ndarray and b.__class__ is not np.ndarray:
            return scalar(a, b)
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        r = u(a, b)
        if op == "+":
            bad = ((a ^ r) & (b ^ r)) < 0
        elif op == "-":
            bad = ((a ^ b) & (a ^ r)) < 0
        else:
            safe = np.where((a == 0) | (a == -1), 1, a)
            bad = np.where(a == -1, b == _I64_MIN, (a != 0) & (r // safe != b))
        return r, bad

    return wide


def _int_power(a, b):
    if np.any(np.asarray(b) < 0):
        r = np.power(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
        return np.trunc(r).astype(np.result_type(a, b))
    return np.power(a, b)


def _sigmoid(x):
    return np.reciprocal(np.add(np.exp(np.negative(x)), x.dtype.type(1)))


def _rsqrt(x):
    return np.reciprocal(np.sqrt(x))


def _erf32(x):
    x = np.asarray(x)
    return _erf(x, precise=False, out_dtype=x.dtype)


def _erf64(x):
    return _erf(x, precise=True)


_UNARY = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": _rsqrt,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "erf": _erf32,
}


def _raise_overflow(st: _State, e: A.Expr, T: str, bad, operands) -> None:
    """Raise the signed-overflow error if ``bad`` holds where the active guards take the
    branch (an untaken branch of a vectorized if_then_else is evaluated but not observed)."""
    if np.ndim(bad):
        g = st.guard_mask()
        if g is not None:
            bad = np.logical_and(bad, g)
            if not np.any(bad):
                return
        full = np.broadcast_shapes(np.shape(bad), *[np.shape(o) for o in operands])
        bad = np.broadcast_to(bad, full)
        pos = tuple(np.argwhere(bad)[0])
        vals = [np.broadcast_to(o, full)[pos] for o in operands]
    else:
        pos = None
        vals = list(operands)
    at = st.where(pos)
    shown = ", ".join(str(int(v)) for v in vals)
    sp = getattr(e, "span", None)
    loc = f" at {sp.line}:{sp.col}" if sp is not None else ""
    raise InterpError(f"signed integer overflow: {print_expr(e)} in {T} with operand(s) {shown}{loc}"
                      + (f" (at {at})" if at else ""), sp, locate=False)


class _Compiler:
    """Compiles a statement's expressions into closures over :class:`_State`."""

    def __init__(self, result: CheckResult, plan: Plan):
        self.result = result
        self.plan = plan
        self.maxd = plan.max_depth
        self.shapes = {n: tuple(t.shape or ()) for n, t in result.tensors.items()}
        self.dtypes = {n: t.dtype for n, t in result.tensors.items()}
        self.ranges: dict = {}  # loop ranges of the statement being compiled
        self.stmt: Optional[A.Assign] = None  # the statement being compiled

    # -- types -------------------------------------------------------------------
    @staticmethod
    def ctype(e: A.Expr, ctx: str) -> str:
        t = expr_type(e)
        if t is None:  # pragma: no cover - checked programs are typed
            raise InterpError("cannot type expression", getattr(e, "span", None))
        return resolve(t, ctx)

    def compile_as(self, e: A.Expr, T: str, facts: Facts) -> Fn:
        """``e`` evaluated (weak parts resolved against ``T``) and cast to ``T``."""
        if isinstance(e, A.Const):
            dt = D.np_dtype(T)
            if T == "bool":
                v = np.bool_(bool(e.value))
            elif D.is_int(T) and not e.is_int:
                v = dt.type(int(e.value)) if math.isfinite(e.value) else dt.type(0)
            else:
                v = dt.type(e.value)
            return lambda st, v=v: v
        fn, t = self.compile(e, T, facts)
        if t == T:
            return fn
        dt = D.np_dtype(T)
        return lambda st: _cast(fn(st), dt)

    def compile(self, e: A.Expr, ctx: str, facts: Facts) -> tuple[Fn, str]:
        """(closure, concrete type) of ``e`` with weak types resolved against ``ctx``."""
        T = self.ctype(e, ctx)
        if isinstance(e, A.Const):
            return self.compile_as(e, T, facts), T
        if isinstance(e, A.Var):
            name = e.name
            dt = D.np_dtype(T)

            def var(st):
                b = st.env[name]
                if b.__class__ is VecBind:
                    return b.arr
                return np.int64(b)

            if T == "i64":
                return var, T
            return (lambda st: _cast(var(st), dt)), T
        if isinstance(e, A.Access):
            return self.compile_read(e, facts), T
        if isinstance(e, A.Neg):
            f = self.compile_as(e.operand, T, facts)
            if T == "bool":  # -b is nonzero exactly when b is
                return f, T
            if T in D.HALF:
                dt = D.np_dtype(T)
                return (lambda st: np.negative(f(st).astype(D.F32)).astype(dt)), T
            if T in SIGNED:
                return self._checked_unary(e, T, f, np.negative), T
            return (lambda st: np.negative(f(st))), T
        if isinstance(e, A.BinOp):
            return self.compile_binop(e, T, facts), T
        if isinstance(e, A.Compare):
            return self.compile_compare(e, ctx, facts), "bool"
        if isinstance(e, A.Call):
            return self.compile_call(e, T, ctx, facts), T
        raise InterpError(f"cannot evaluate {type(e).__name__}", getattr(e, "span", None))  # pragma: no cover

    @staticmethod
    def _checked_unary(e: A.Expr, T: str, f: Fn, u) -> Fn:
        """``u(f)`` (negation or abs) in signed type T: only the minimum overflows."""
        mn = np.iinfo(D.np_dtype(T)).min

        def checked(st):
            a = f(st)
            bad = a == mn
            if np.any(bad):
                _raise_overflow(st, e, T, bad, (a,))
            return u(a)

        return checked

    def _wrap_half(self, fn2, T: str):
        if T in D.HALF:
            dt = D.np_dtype(T)
            return lambda a, b: fn2(a.astype(D.F32), b.astype(D.F32)).astype(dt)
        return fn2

    def compile_binop(self, e: A.BinOp, T: str, facts: Facts) -> Fn:
        if e.op in ("&", "|"):
            fa = self.compile_as(e.lhs, "bool", facts)
            fb = self.compile_as(e.rhs, "bool", facts)
            u = np.logical_and if e.op == "&" else np.logical_or
            return lambda st: u(fa(st), fb(st))
        # operands are converted to the operation's type (the float result type for '/')
        opT = T
        fa = self.compile_as(e.lhs, opT, facts)
        fb = self.compile_as(e.rhs, opT, facts)
        if e.op == "**":
            u = np.power if D.is_float(opT) else _int_power
        else:
            u = _ARITH[e.op]
        if opT == "bool":
            # arithmetic on booleans: compute in i64 and convert back (x != 0)
            def u2(a, b, u=u):
                return u(a.astype(np.int64), b.astype(np.int64)).astype(np.bool_)

            u = u2
        if opT in SIGNED and e.op in ("+", "-", "*"):
            chk = _overflow_fn(e.op, opT)

            def checked(st):
                a = fa(st)
                b = fb(st)
                r, bad = chk(a, b)
                if bad is not False and np.any(bad):
                    _raise_overflow(st, e, opT, bad, (a, b))
                return r

            return checked
        if opT in SIGNED and e.op == "//":
            mn = np.iinfo(D.np_dtype(opT)).min

            def checked_div(st):
                # min // -1 is the one quotient that does not fit
                a = fa(st)
                b = fb(st)
                bad = (a == mn) & (b == -1)
                if np.any(bad):
                    _raise_overflow(st, e, opT, bad, (a, b))
                return u(a, b)

            return checked_div
        u = self._wrap_half(u, opT)
        return lambda st: u(fa(st), fb(st))

    def compile_compare(self, e: A.Compare, ctx: str, facts: Facts) -> Fn:
        t = expr_type(e.operands[0])
        for o in e.operands[1:]:
            t = promote(t, expr_type(o))
        T = resolve(t, ctx)
        fs = [self.compile_as(o, T, facts) for o in e.operands]
        ufs = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
               "==": np.equal, "!=": np.not_equal}
        ops = [ufs[o] for o in e.ops]
        if len(ops) == 1:
            f0, f1 = fs
            u = ops[0]
            return lambda st: u(f0(st), f1(st))

        def chain(st):
            vals = [f(st) for f in fs]
            r = None
            for u, a, b in zip(ops, vals, vals[1:]):
                c = u(a, b)
                r = c if r is None else np.logical_and(r, c)
            return r

        return chain

    def compile_call(self, e: A.Call, T: str, ctx: str, facts: Facts) -> Fn:
        f = e.func
        dt = D.np_dtype(T)
        if f in A.CAST_FUNCS:
            a = e.args[0]
            fa, ta = self.compile(a, f, facts)
            if f == "bool":
                return lambda st: np.not_equal(fa(st), 0)
            return lambda st: _cast(fa(st), dt)
        if f == "if_then_else":
            return self.compile_select(e, T, ctx, facts)
        if f in ("max", "min"):
            fs = [self.compile_as(a, T, facts) for a in e.args]
            u = np.maximum if f == "max" else np.minimum
            if len(fs) == 2:
                f0, f1 = fs
                return lambda st: u(f0(st), f1(st))

            def nary(st):
                r = fs[0](st)
                for g in fs[1:]:
                    r = u(r, g(st))
                return r

            return nary
        if f in ("abs", "floor", "ceil"):
            fa = self.compile_as(e.args[0], T, facts)
            if f == "abs":
                if T in SIGNED:
                    return self._checked_unary(e, T, fa, np.abs)
                return lambda st: np.abs(fa(st))
            if not D.is_float(T):
                return fa
            u = np.floor if f == "floor" else np.ceil
            return lambda st: u(fa(st))
        if f == "pow":
            fa = self.compile_as(e.args[0], T, facts)
            fb = self.compile_as(e.args[1], T, facts)
            u = self._wrap_half(np.power if D.is_float(T) else _int_power, T)
            return lambda st: u(fa(st), fb(st))
        if f in _UNARY:
            fa = self.compile_as(e.args[0], T, facts)
            u = _erf64 if (f == "erf" and T == "f64") else _UNARY[f]
            if T in D.HALF:
                return lambda st: u(fa(st).astype(D.F32)).astype(dt)
            return lambda st: u(fa(st))
        raise InterpError(f"unknown function '{f}'", e.span)  # pragma: no cover

    def compile_select(self, e: A.Call, T: str, ctx: str, facts: Facts) -> Fn:
        c, a, b = e.args
        fc = self.compile_as(c, "bool", facts)
        fa = self.compile_as(a, T, facts.assuming(c, True))
        fb = self.compile_as(b, T, facts.assuming(c, False))

        def select(st):
            cv = fc(st)
            if np.ndim(cv) == 0:
                return fa(st) if cv else fb(st)
            if cv.all():
                return fa(st)
            if not cv.any():
                return fb(st)
            st.guards.append((cv, True))
            try:
                va = fa(st)
            finally:
                st.guards.pop()
            st.guards.append((cv, False))
            try:
                vb = fb(st)
            finally:
                st.guards.pop()
            return np.where(cv, va, vb)

        return select

    # -- accesses ------------------------------------------------------------------
    def _affine_terms(self, acc: A.Access, facts: Facts):
        """(const offset, [(var, stride)]) in elements if every subscript is affine in the
        loop indices and in range for *all* values of the enclosing loops, else None."""
        shape = self.shapes[acc.name]
        if len(shape) != len(acc.indices):
            return None
        strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
        # bounds over the full loop ranges: a view must be valid for every grid point,
        # including those where a guard discards the value
        plain = Facts(dict(self.ranges))
        const = 0
        terms: dict = {}
        for d, idx in enumerate(acc.indices):
            if any(isinstance(n, A.Access) for n in A.walk(idx)):
                return None
            af = affine(idx)
            if af is None:
                return None
            iv = plain.interval(idx)
            if iv is None or iv[0] < 0 or iv[1] >= shape[d]:
                return None
            coefs, c0 = af
            const += strides[d] * c0
            for v, c in coefs.items():
                terms[v] = terms.get(v, 0) + strides[d] * c
        return const, [(v, s) for v, s in terms.items() if s != 0]

    def _view_fn(self, acc: A.Access, terms, write: bool, mask: bool = False):
        """A function of the state giving (strided view of the accessed elements or None
        when no index is vectorized, flat offset); ``mask``: of the written-mask instead."""
        name = acc.name
        const, vterms = terms
        maxd = self.maxd
        dt = D.BOOL if mask else D.np_dtype(self.dtypes[name])
        isz = dt.itemsize

        def view(st):
            arr = st.written[name] if mask else st.tensors[name]
            off = const
            shape = None
            strides = None
            env = st.env
            for v, s in vterms:
                b = env[v]
                if b.__class__ is VecBind:
                    if shape is None:
                        shape = [1] * maxd
                        strides = [0] * maxd
                    off += s * b.start
                    shape[b.axis] = b.length
                    strides[b.axis] = s * isz
                else:
                    off += s * b
            if shape is None:
                return None, off
            return np.ndarray(shape, dt, buffer=arr, offset=off * isz, strides=strides), off

        return view

    def _index_fns(self, acc: A.Access, facts: Facts) -> list:
        return [self.compile_as(i, "i64", facts) for i in acc.indices]

    def _oob_error(self, st: _State, acc: A.Access, idx, bad, d_hint=None):
        shape = self.shapes[acc.name]
        bad_full = np.broadcast_to(bad, np.broadcast_shapes(*[np.shape(i) for i in idx], np.shape(bad)))
        pos = np.argwhere(bad_full)[0] if np.ndim(bad_full) else None
        for d, (i, n) in enumerate(zip(idx, shape)):
            iv = int(np.broadcast_to(i, bad_full.shape)[tuple(pos)] if pos is not None else i)
            if iv < 0 or iv >= n:
                where = st.where(pos)
                raise InterpError(
                    f"out-of-range access {print_expr(acc)}: subscript {d + 1} is {iv}, outside [0, {n})"
                    + (f" (at {where})" if where else ""), acc.span)
        raise InterpError(f"out-of-range access {print_expr(acc)}", acc.span)  # pragma: no cover

    def _checked_index(self, st: _State, acc: A.Access, idx: list, guarded: bool) -> list:
        shape = self.shapes[acc.name]
        bad = None
        for i, n in zip(idx, shape):
            if np.ndim(i) == 0:
                if 0 <= i < n:
                    continue
            elif i.size == 0 or (i.min() >= 0 and i.max() < n):
                continue
            b = np.logical_or(i < 0, i >= n)
            bad = b if bad is None else np.logical_or(bad, b)
        if bad is None:
            return idx
        m = st.guard_mask() if guarded else None
        eff = bad if m is None else np.logical_and(bad, m)
        if np.any(eff):
            self._oob_error(st, acc, idx, eff)
        return [np.clip(i, 0, n - 1) for i, n in zip(idx, shape)]

    def compile_read(self, acc: A.Access, facts: Facts) -> Fn:
        fn = self._compile_read(acc, facts)
        check = self._uninit_check(acc, facts)
        name = acc.name

        def read(st):
            w = st.written
            if w is not None and name in w:
                check(st)
            return fn(st)

        return read

    def _uninit_check(self, acc: A.Access, facts: Facts) -> Callable[[_State], None]:
        """A check raising InterpError if ``acc`` reads, where the active guards take the
        branch, an element never written (only run with ``check_uninit``)."""
        name = acc.name
        stmt = self.stmt
        shape = self.shapes[name]

        def fail(st, bad, idx):
            pos = None
            where = ""
            if np.ndim(bad):
                pos = np.argwhere(bad)[0]
            if idx is not None:
                elem = [int(np.broadcast_to(i, np.shape(bad))[tuple(pos)] if pos is not None else i) for i in idx]
                where = f" element [{', '.join(map(str, elem))}]"
            at = st.where(pos)
            sp = stmt.span if stmt is not None else acc.span
            loc = f" at {sp.line}:{sp.col}" if sp is not None else ""
            text = f"{print_expr(stmt.target)} = {print_expr(stmt.value)}" if stmt is not None else print_expr(acc)
            raise InterpError(f"uninitialized read: '{name}'{where} is read before it is written, by {print_expr(acc)} "
                              f"in statement '{text}'{loc}" + (f" (at {at})" if at else ""), acc.span, locate=False)

        def judge(st, m, idx):
            bad = np.logical_not(m)
            if not np.any(bad):
                return
            g = st.guard_mask()
            if g is not None:
                bad = np.logical_and(bad, g)
                if not np.any(bad):
                    return
            if np.ndim(bad):
                full = np.broadcast_shapes(np.shape(bad), *[np.shape(i) for i in (idx or [])])
                bad = np.broadcast_to(bad, full)
            fail(st, bad, idx)

        if not acc.indices:
            return lambda st: judge(st, st.written[name][()], None)
        fidx = self._index_fns(acc, facts)

        def check_fancy(st):
            idx = [np.clip(f(st), 0, n - 1) for f, n in zip(fidx, shape)]
            judge(st, st.written[name][tuple(idx)], idx)

        terms = self._affine_terms(acc, facts)
        if terms is None:
            return check_fancy
        mview = self._view_fn(acc, terms, False, mask=True)

        def check_view(st):
            # the common, all-written case costs one strided view of the mask; a failure
            # is reported through the index path (same elements) to name the element
            v, off = mview(st)
            m = st.written[name].reshape(-1)[off] if v is None else v
            if not np.all(m):
                check_fancy(st)

        return check_view

    def _compile_read(self, acc: A.Access, facts: Facts) -> Fn:
        name = acc.name
        if not acc.indices:
            return lambda st: st.tensors[name][()]
        terms = self._affine_terms(acc, facts)
        if terms is not None:
            view = self._view_fn(acc, terms, False)

            def read_view(st):
                v, off = view(st)
                if v is None:
                    return st.tensors[name].reshape(-1)[off]
                return v

            return read_view
        fidx = self._index_fns(acc, facts)
        shape = self.shapes[name]
        static = not any(isinstance(n, A.Access) for i in acc.indices for n in A.walk(i))
        if not static:
            def read_fancy(st):
                idx = self._checked_index(st, acc, [f(st) for f in fidx], True)
                return st.tensors[name][tuple(idx)]

            return read_fancy

        # Subscripts without tensor reads were proven in range wherever the value is used
        # (the checker's bounds proof under the guards, E030), so out-of-range grid points
        # belong to untaken branches: clip them (any value will do there).
        def read_clipped(st):
            idx = [np.clip(f(st), 0, n - 1) for f, n in zip(fidx, shape)]
            return st.tensors[name][tuple(idx)]

        dims = [affine(i) for i in acc.indices]
        if any(d is None for d in dims):
            return read_clipped
        box = self._box_fn(acc, dims)

        def read_box(st):
            r = box(st)
            return read_clipped(st) if r is None else r

        return read_box

    def _box_fn(self, acc: A.Access, dims):
        """A reader for an affine access that may leave the tensor's bounds at some grid
        points: the in-range box of the grid is a strided view (copied into a zero-filled
        grid when part of the grid is outside). None (at run time) if some subscript
        depends on two vectorized indices."""
        name = acc.name
        shape = self.shapes[name]
        maxd = self.maxd
        dt = D.np_dtype(self.dtypes[name])
        isz = dt.itemsize
        es = [math.prod(shape[d + 1:]) for d in range(len(shape))]
        dims = [(tuple(c.items()), c0) for c, c0 in dims]

        ndim = len(dims)

        def box(st):
            env = st.env
            off = 0
            out_shape = [1] * maxd
            strides = [0] * maxd
            lo = [0] * maxd
            hi = [None] * maxd
            for d in range(ndim):
                coefs, c0 = dims[d]
                base = c0
                vb = None
                vc = 0
                for v, c in coefs:
                    b = env[v]
                    if b.__class__ is VecBind:
                        if vb is not None:
                            return None
                        vb = b
                        vc = c
                    else:
                        base += c * b
                n = shape[d]
                if vb is None:
                    if base < 0 or base >= n:
                        return np.zeros(_grid_shape(env, maxd), dt)
                    off += es[d] * base
                    continue
                ax = vb.axis
                L = vb.length
                first = base + vc * vb.start  # index at grid position t: first + vc*t
                if vc > 0:
                    t0 = -(first // vc)  # ceil(-first / vc)
                    t1 = (n - 1 - first) // vc
                else:
                    t0 = -((n - 1 - first) // -vc)  # ceil((first - (n-1)) / -vc)
                    t1 = first // -vc
                if t0 > lo[ax]:
                    lo[ax] = t0
                h = hi[ax]
                if h is None:
                    h = L - 1
                hi[ax] = t1 if t1 < h else h
                out_shape[ax] = L
                off += es[d] * first
                strides[ax] += es[d] * vc
            vshape = out_shape[:]
            full = True
            for ax in range(maxd):
                h = hi[ax]
                if h is None:
                    continue
                if lo[ax] > h:
                    return np.zeros(out_shape, dt)
                off += strides[ax] * lo[ax]
                vshape[ax] = h - lo[ax] + 1
                if vshape[ax] != out_shape[ax]:
                    full = False
            v = np.ndarray(vshape, dt, buffer=st.tensors[name], offset=off * isz, strides=[x * isz for x in strides])
            if full:
                return v
            res = np.zeros(out_shape, dt)
            res[tuple(slice(lo[ax], hi[ax] + 1) if hi[ax] is not None else slice(None) for ax in range(maxd))] = v
            return res

        return box

    def compile_store(self, acc: A.Access, facts: Facts):
        """(load, store) closures for the target access of a statement. With
        ``check_uninit`` a load checks that the elements were written, a store marks them."""
        load, store = self._compile_store(acc, facts)
        check = self._uninit_check(acc, facts)
        name = acc.name

        def checked_load(st):
            w = st.written
            if w is not None and name in w:
                check(st)
            return load(st)

        return checked_load, store

    def _compile_store(self, acc: A.Access, facts: Facts):
        name = acc.name
        maxd = self.maxd
        if not acc.indices:
            def load0(st):
                return st.tensors[name][()]

            def store0(st, val):
                v = np.asarray(val)
                st.tensors[name][()] = v.reshape(-1)[-1] if v.ndim else v
                w = st.written
                if w is not None and name in w:
                    w[name][()] = True

            return load0, store0
        terms = self._affine_terms(acc, facts)
        if terms is not None:
            view = self._view_fn(acc, terms, True)
            mview = self._view_fn(acc, terms, True, mask=True)

            def load_v(st):
                v, off = view(st)
                if v is None:
                    return st.tensors[name].reshape(-1)[off]
                return v

            def store_v(st, val):
                v, off = view(st)
                if v is None:
                    a = np.asarray(val)
                    st.tensors[name].reshape(-1)[off] = a.reshape(-1)[-1] if a.ndim else a
                else:
                    np.copyto(v, _fit(val, v.shape), casting="unsafe")
                w = st.written
                if w is not None and name in w:
                    mv, off = mview(st)
                    if mv is None:
                        w[name].reshape(-1)[off] = True
                    else:
                        mv[...] = True

            return load_v, store_v
        fidx = self._index_fns(acc, facts)

        def idx_of(st):
            return self._checked_index(st, acc, [f(st) for f in fidx], False)

        def load_f(st):
            return st.tensors[name][tuple(idx_of(st))]

        def store_f(st, val):
            idx = idx_of(st)
            arr = st.tensors[name]
            shapes = [np.shape(i) for i in idx]
            bshape = np.broadcast_shapes(*shapes)
            vshape = np.shape(val)
            w = st.written
            if w is not None and name not in w:
                w = None
            if bshape == () and vshape == ():
                arr[tuple(idx)] = val
                if w is not None:
                    w[name][tuple(idx)] = True
                return
            full = np.broadcast_shapes(bshape, vshape) if vshape else bshape
            if len(full) < maxd:
                full = (1,) * (maxd - len(full)) + tuple(full)
            idx = [np.broadcast_to(i, full) for i in idx]
            arr[tuple(idx)] = np.broadcast_to(np.asarray(val).astype(arr.dtype, copy=False), full)
            if w is not None:
                w[name][tuple(idx)] = True

        return load_f, store_f


def _grid_shape(env: dict, maxd: int) -> list:
    shape = [1] * maxd
    for b in env.values():
        if b.__class__ is VecBind:
            shape[b.axis] = b.length
    return shape


def _fit(val, shape):
    """``val`` made broadcastable to ``shape``: along axes where the destination has extent 1
    but the value has more (a store that does not depend on that loop index, so every
    iteration writes the same element), keep the last iteration's value."""
    vs = np.shape(val)
    if not vs:
        return val
    if len(vs) != len(shape):
        return val
    sl = None
    for ax, (a, b) in enumerate(zip(vs, shape)):
        if b == 1 and a > 1:
            if sl is None:
                sl = [slice(None)] * len(vs)
            sl[ax] = slice(a - 1, a)
    return val if sl is None else val[tuple(sl)]


def _replace_self_reads(e: A.Expr, target: A.Access, ident: A.Expr) -> A.Expr:
    """``e`` with every read of ``target`` (same subscripts) replaced by ``ident``."""
    if isinstance(e, A.Access):
        if e.name == target.name and e.indices == target.indices:
            return ident
        return e
    if isinstance(e, A.BinOp):
        return replace(e, lhs=_replace_self_reads(e.lhs, target, ident), rhs=_replace_self_reads(e.rhs, target, ident))
    if isinstance(e, A.Neg):
        return replace(e, operand=_replace_self_reads(e.operand, target, ident))
    if isinstance(e, A.Compare):
        return replace(e, operands=tuple(_replace_self_reads(o, target, ident) for o in e.operands))
    if isinstance(e, A.Call):
        return replace(e, args=tuple(_replace_self_reads(a, target, ident) for a in e.args))
    return e


def _identity_expr(identity: float) -> A.Expr:
    if identity == -math.inf:
        return A.Neg(A.Const(math.inf))
    if identity == math.inf:
        return A.Const(math.inf)
    return A.Const(int(identity))


def _product_factors(e: A.Expr) -> list:
    if isinstance(e, A.BinOp) and e.op == "*":
        return _product_factors(e.lhs) + _product_factors(e.rhs)
    return [e]


def _product_nodes_typed(e: A.Expr, T: str) -> bool:
    if isinstance(e, A.BinOp) and e.op == "*":
        if resolve(expr_type(e), T) != T:
            return False
        return _product_nodes_typed(e.lhs, T) and _product_nodes_typed(e.rhs, T)
    return True


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


class _StmtExec:
    """A compiled statement."""

    def __init__(self, comp: _Compiler, si: StmtInfo):
        self.si = si
        st = si.stmt
        self.span = st.span
        tgt = st.target
        self.xt = tgt.dtype
        self.xdt = D.np_dtype(self.xt)
        facts = Facts({l.var: (l.start, l.start + l.extent - 1) for l in si.loops})
        comp.ranges = dict(facts.ranges)
        comp.stmt = st
        self.maxd = comp.maxd
        self.load, self.store = comp.compile_store(tgt, facts)
        value = st.value
        if si.kind == "reduce" and si.init_loop is None:
            value = _replace_self_reads(value, tgt, _identity_expr(si.identity))
        self.value_fn = comp.compile_as(value, self.xt, facts)
        # the loops this statement reduces over, as the plan computed them (syntactically)
        self.reduce_vars = comp.plan.rvars[id(st)]
        self.mentioned = frozenset(n.name for e in (tgt, st.value) for n in A.walk(e) if isinstance(n, A.Var))
        self.extents = {l.var: l.extent for l in si.loops}
        # a reduce with an init loop whose reduction loops all run vectorized, whole, in
        # one call combines with the identity just stored: X = S directly
        # (and every loop inside the init loop runs vectorized, so no element is written
        # by two calls)
        self.initialized = si.kind == "reduce" and si.init_loop is not None
        self.init_inner = ()
        if self.initialized:
            k = next(i for i, l in enumerate(si.loops) if l is si.init_loop)
            self.init_inner = tuple(l.var for l in si.loops[k:])
        self.identity = D.identity_value(si.identity, self.xt) if si.kind == "reduce" else None
        # vectorized reduction form (the plan keeps only forms that reduce with their
        # literal meaning, see leirc.interp.plan.reduction_form)
        self.form = comp.plan.forms.get(id(st))
        self.rop = None
        self.factor_fns = None
        self.factor_const: list = []
        self.factor_vars: list = []
        if self.form is not None:
            form = self.form
            T = resolve(promote(self.xt, expr_type(form.operand)), self.xt)
            self.rop = form.op
            self.T = T
            self.Tdt = D.np_dtype(T)
            if form.op in ("+", "-", "*"):
                if D.is_float(T):
                    self.acc = D.F64
                elif self.xt.startswith("u"):
                    self.acc = np.dtype(np.uint64)
                else:
                    self.acc = D.I64
            else:
                self.acc = self.Tdt
            self.operand_fn = comp.compile_as(form.operand, T, facts)
            self.factor_fns = None
            if form.op in ("+", "-") and T in ("f32", "f64"):
                factors = _product_factors(form.operand)
                if len(factors) >= 2 and _product_nodes_typed(form.operand, T):
                    self.factor_fns = [comp.compile_as(f, T, facts) for f in factors]
                    # factors that are plain reads of kernel inputs do not change during a
                    # run: their float64 copies are cached across blocks
                    self.factor_const = [f.name if isinstance(f, A.Access) and f.dtype == T
                                         and comp.result.tensors[f.name].role == "input" else None
                                         for f in factors]
                    self.factor_vars = [frozenset(n.name for n in A.walk(f) if isinstance(n, A.Var)) for f in factors]
        # signed integer sums check the running values the literal loop would compute
        self.checked_sum = self.form is not None and self.rop in ("+", "-") and self.xt in SIGNED
        self.cache: dict = {}

    # -- execution -------------------------------------------------------------------
    def execute(self, st: _State) -> None:
        env = st.env
        R = None
        used = False
        for v in self.reduce_vars:
            b = env.get(v)
            if b.__class__ is VecBind:
                if R is None:
                    R = [b]
                else:
                    R.append(b)
                used = used or v in self.mentioned
        if R is None or (self.rop is None and not used):
            # (the plan vectorizes a loop whose index the statement does not mention only
            # when every iteration stores the same values: store them once)
            self.store(st, self.value_fn(st))
            return
        if self.rop is None:  # pragma: no cover - the plan never vectorizes these
            raise InterpError("internal error: statement is not a vectorizable reduction", self.span)
        self.reduce(st, R)

    def reduce(self, st: _State, R: list) -> None:
        axes = tuple(b.axis for b in R)
        op = self.rop
        if self.checked_sum:
            self._checked_reduce(st, R, op)
            return
        if self.factor_fns is not None:
            S = self._contract(st, R)
        else:
            V = np.asarray(self.operand_fn(st))
            if V.ndim == 0:
                V = V.reshape((1,) * self.maxd)
            S = self._small_window(V, R, op)
        if S is None:
            shape = list(V.shape)
            for b in R:
                shape[b.axis] = b.length
            V = np.broadcast_to(V, shape)
            if op in ("+", "-"):
                S = np.add.reduce(V, axis=axes, dtype=self.acc, keepdims=True)
            elif op == "*":
                S = np.multiply.reduce(V, axis=axes, dtype=self.acc, keepdims=True)
            elif op == "max":
                S = np.maximum.reduce(V, axis=axes, keepdims=True)
            else:
                S = np.minimum.reduce(V, axis=axes, keepdims=True)
        if (self.initialized and len(R) == len(self.reduce_vars)
                and all(b.length == self.extents[v] for b, v in zip(R, self.reduce_vars))
                and all(st.env[v].__class__ is VecBind for v in self.init_inner)):
            new = np.negative(S) if op == "-" else S
            self.store(st, _cast(np.asarray(new), self.xdt))
            return
        cur = np.asarray(self.load(st))
        if op in ("+", "-", "*"):
            if D.is_float(self.xt) or cur.dtype != self.acc:
                c = cur.astype(self.acc)
            else:
                c = cur
            if op == "+":
                new = c + S
            elif op == "-":
                new = c - S
            else:
                new = c * S
        else:
            c = _cast(cur, self.Tdt)
            new = np.maximum(c, S) if op == "max" else np.minimum(c, S)
        self.store(st, _cast(np.asarray(new), self.xdt))

    def _checked_reduce(self, st: _State, R: list, op: str) -> None:
        """``X = X op sum(e)`` for a signed integer X (op + or -), with the error the
        literal loop would raise: every running value ``X0 op (e_1 + ... + e_k)``, in the
        loops' order, must fit X's type. A float64 bound on ``|X0| + sum |e|`` usually
        shows that none can overflow; otherwise the prefix sums are computed exactly."""
        V = np.asarray(self.operand_fn(st))
        if V.ndim == 0:
            V = V.reshape((1,) * self.maxd)
        shape = list(V.shape)
        for b in R:
            shape[b.axis] = b.length
        axes = tuple(sorted(b.axis for b in R))
        cur = np.asarray(self.load(st))
        if cur.ndim < len(shape):
            cur = cur.reshape((1,) * (len(shape) - cur.ndim) + cur.shape)
        V = np.broadcast_to(V, np.broadcast_shapes(tuple(shape), cur.shape))
        info = np.iinfo(self.xdt)
        lim = float(-(int(info.min) + 1)) * (1 - 2.0 ** -20)
        bound = np.add.reduce(np.abs(V.astype(np.float64)), axis=axes, keepdims=True) + np.abs(cur.astype(np.float64))
        if not np.all(bound < lim):
            rest = [a for a in range(V.ndim) if a not in axes]
            W = np.transpose(V, rest + list(axes))
            W = W.reshape(W.shape[:len(rest)] + (-1,))
            P = np.cumsum(W.astype(object) if self.xt == "i64" else W.astype(np.int64), axis=-1)
            c = np.transpose(np.broadcast_to(cur, [1 if a in axes else V.shape[a] for a in range(V.ndim)]),
                             rest + list(axes)).reshape(W.shape[:len(rest)] + (1,))
            c = c.astype(object) if self.xt == "i64" else c.astype(np.int64)
            run = c + P if op == "+" else c - P
            bad = (run < int(info.min)) | (run > int(info.max))
            if np.any(bad):
                pos = np.argwhere(np.asarray(bad, dtype=bool))[0]
                raise InterpError(f"signed integer overflow: the running value of the accumulation "
                                  f"{print_expr(self.si.stmt.target)} leaves {self.xt} (value {run[tuple(pos)]})"
                                  + (f" at {self.span.line}:{self.span.col}" if self.span is not None else ""),
                                  self.span, locate=False)
        S = np.add.reduce(V.astype(np.int64), axis=axes, keepdims=True)  # wraps mod 2^64: exact in the end
        new = cur.astype(np.int64) + S if op == "+" else cur.astype(np.int64) - S
        self.store(st, _cast(np.asarray(new), self.xdt))

    def _small_window(self, V, R: list, op: str):
        """Reduce ``V`` over few reduction positions (a convolution/pooling window) with
        one whole-grid operation per position; NumPy's reduce over short strided axes is
        several times slower. None if the window is not small."""
        present = [b for b in R if V.shape[b.axis] > 1]
        combos = 1
        for b in present:
            combos *= b.length
        if combos <= 1 or combos > 64 or V.size // combos < 4096:
            return None
        S = None
        ufunc = {"+": np.add, "-": np.add, "*": np.multiply, "max": np.maximum, "min": np.minimum}[op]
        sl = [slice(None)] * V.ndim
        for pos in itertools.product(*[range(b.length) for b in present]):
            for b, t in zip(present, pos):
                sl[b.axis] = slice(t, t + 1)
            piece = V[tuple(sl)]
            if S is None:
                S = piece.astype(self.acc, copy=True)
            else:
                ufunc(S, piece, out=S, casting="unsafe")
        n = 1
        for b in R:
            if V.shape[b.axis] == 1:
                n *= b.length
        if n != 1:
            if op in ("+", "-"):
                S *= n
            elif op == "*":
                S = S ** n
        return S

    def _contract(self, st: _State, R: list):
        """Sum over the reduction axes of the product of the factors, in float64."""
        maxd = self.maxd
        raxes = {b.axis: b.length for b in R}
        scalar = 1.0
        ops = []
        specs = []
        present = set()
        for fi, f in enumerate(self.factor_fns):
            a = np.asarray(f(st))
            if a.ndim == 0 or a.size == 1:
                scalar *= float(a.reshape(-1)[0])
                continue
            axes = [ax for ax in range(maxd) if a.shape[ax] > 1]
            cname = self.factor_const[fi]
            if cname is not None and a.base is st.tensors[cname]:  # a view of an input
                key = (a.__array_interface__["data"][0], a.shape, a.strides)
                hit = self.cache.get(fi)
                if hit is not None and hit[0] == key:
                    a64 = hit[1]
                else:
                    a64 = a.reshape([a.shape[ax] for ax in axes]).astype(np.float64)
                    self.cache[fi] = (key, a64)
            else:
                a64 = a.reshape([a.shape[ax] for ax in axes]).astype(np.float64)
            ops.append(a64)
            specs.append("".join(_LETTERS[ax] for ax in axes))
            present.update(axes)
        out_axes = sorted(ax for ax in present if ax not in raxes)
        count = 1
        for ax, n in raxes.items():
            if ax not in present:
                count *= n
        out_shape = [1] * maxd
        if ops:
            res = _contract_ops(ops, specs, "".join(_LETTERS[ax] for ax in out_axes))
            for i, ax in enumerate(out_axes):
                out_shape[ax] = res.shape[i]
            res = res.reshape(out_shape)
        else:
            res = np.ones(out_shape, dtype=np.float64)
        if scalar != 1.0 or count != 1:
            res = res * (scalar * count)
        return res


class Interpreter:
    """A checked kernel prepared for (repeated) execution."""

    @A.deep_recursion()  # planning and compiling recurse on expressions; a long sum is deep
    def __init__(self, result: CheckResult, *, max_elements: int = MAX_ELEMENTS, vectorize: bool = True):
        if not result.ok:
            errs = [d for d in result.diagnostics if d.is_error]
            raise InterpError(f"program has {len(errs)} error(s); first: {errs[0].code} {errs[0].message}",
                              errs[0].span)
        self.source = result
        if has_private(result):
            # a private tensor is its expansion over the loops around its \alloc
            # (leirc.lang.private): the plan and both modes then need no notion of allocation
            expanded = check_kernel(expand_private(result))
            if not expanded.ok:  # pragma: no cover - the expansion of a checked kernel checks
                e = next(d for d in expanded.diagnostics if d.is_error)
                raise InterpError(f"internal: expanded private tensors do not check: {e.code} {e.message}", e.span)
            result = expanded
        self.private = {n for n, t in self.source.tensors.items() if t.private}
        self.result = result
        self.kernel = result.kernel
        self.plan = make_plan(result, vectorize)
        self.max_elements = max(1, int(max_elements))
        self.maxd = self.plan.max_depth
        comp = _Compiler(result, self.plan)
        self.execs = {id(si.stmt): _StmtExec(comp, si) for si in result.stmts}
        self.inits = {lid: [self.execs[id(si.stmt)] for si in sis] for lid, sis in self.plan.inits.items()}
        self._grid_costs()

    def _grid_costs(self) -> None:
        """For each vectorized loop L, the groups of loop indices whose grids the statements
        inside L materialize, with the product of the extents of the vectorized loops
        strictly inside L in each group. A statement materializes the grid of all its
        loops; a sum of products only the grids of its factors and of its result. Only
        groups containing L's index grow with L's block, so only they bound the block."""
        self.groups: dict = {}
        for lid, stmts in self.plan.stmts_in.items():
            out = {}
            for si in stmts:
                sx = self.execs[id(si.stmt)]
                k = next(i for i, l in enumerate(si.loops) if id(l) == lid)
                var = si.loops[k].var
                inner = [l for l in si.loops[k + 1:] if self.plan.modes[id(l)] != ITER]
                if sx.factor_fns is not None:
                    tv = {n.name for i in si.stmt.target.indices for n in A.walk(i) if isinstance(n, A.Var)}
                    groups = list(sx.factor_vars) + [frozenset(tv)]
                else:
                    groups = [frozenset(l.var for l in si.loops)]
                for g in groups:
                    if var not in g:
                        continue
                    cost = math.prod(l.extent for l in inner if l.var in g)
                    if out.get(g, 0) < cost:
                        out[g] = cost
            self.groups[lid] = list(out.items())

    def _block(self, lp: A.Loop, env: dict) -> int:
        """Block size for vectorized loop ``lp``: as large as possible while every grid it
        grows stays within ``max_elements``."""
        n = lp.extent
        block = n
        for g, inner in self.groups.get(id(lp), ()):
            outer = 1
            for v in g:
                b = env.get(v)
                if b.__class__ is VecBind:
                    outer *= b.length
            if outer * inner * n > self.max_elements:
                block = min(block, max(1, self.max_elements // (outer * inner)))
        return block

    # -- public ------------------------------------------------------------------------
    @A.deep_recursion()
    def run(self, inputs: dict, *, intermediates: bool = False, poison: bool = True,
            outputs: Optional[dict] = None, poison_alt: bool = False, check_uninit: bool = False) -> dict:
        """Run on ``inputs``; see :func:`run`. ``outputs`` optionally gives the initial
        contents of output buffers (copied; unwritten elements keep them), ``poison_alt``
        selects the second poison sentinel.

        ``check_uninit=True`` tracks which elements of every intermediate (and of every
        output whose initial contents ``outputs`` does not give) have been written, and
        raises :class:`InterpError` with a message starting ``"uninitialized read:"``
        (naming the tensor, the element, the statement and the loop indices) when a read
        whose branch is taken sees an element never written. Costs one boolean mask per
        tracked tensor and a mask lookup per read."""
        k = self.kernel
        tensors: dict = {}
        for p in k.inputs:
            if p.name not in inputs:
                raise InterpError(f"missing input '{p.name}'", p.span)
            tensors[p.name] = _as_input(p, inputs[p.name])
        extra = set(inputs) - {p.name for p in k.inputs}
        if extra:
            raise InterpError(f"unknown input(s): {', '.join(sorted(extra))}")
        for name, info in self.result.tensors.items():
            if info.role == "input":
                continue
            shape = tuple(info.shape or ())
            if outputs is not None and name in outputs and info.role == "output":
                init = np.asarray(outputs[name])
                if init.shape != shape or init.dtype != D.np_dtype(info.dtype):
                    raise InterpError(f"initial output '{name}' has shape {list(init.shape)} and dtype {init.dtype}, "
                                      f"expected {list(shape)} {info.dtype}")
                tensors[name] = np.array(init, copy=True, order="C")
            elif poison:
                tensors[name] = D.poisoned(info.dtype, shape, poison_alt)
            else:
                tensors[name] = np.zeros(shape, dtype=D.np_dtype(info.dtype))
        written = None
        if check_uninit:
            given = set(outputs or ())
            written = {name: np.zeros(tuple(info.shape or ()), dtype=D.BOOL)
                       for name, info in self.result.tensors.items()
                       if info.role == "intermediate" or (info.role == "output" and name not in given)}
        for sx in self.execs.values():
            sx.cache.clear()
        st = _State(tensors, self.maxd, written)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            self._items(k.body, st)
        if intermediates:
            # a private tensor has no value after its nest (one copy per iteration)
            return {n: a for n, a in tensors.items()
                    if self.result.tensors[n].role != "input" and n not in self.private}
        return {p.name: tensors[p.name] for p in k.outputs}

    # -- execution -----------------------------------------------------------------
    def _items(self, items, st: _State) -> None:
        for it in items:
            cls = it.__class__
            if cls is A.Loop:
                self._loop(it, st)
            elif cls is A.Assign:
                self.execs[id(it)].execute(st)
            elif cls is A.Region:
                self._items(it.body, st)
            # Align: no effect

    def _loop(self, lp: A.Loop, st: _State) -> None:
        lid = id(lp)
        inits = self.inits.get(lid)
        if inits:
            for sx in inits:
                self._init(sx, lp, st)
        env = st.env
        var = lp.var
        mode = self.plan.modes[lid]
        if mode == ITER:
            body = lp.body
            if len(body) == 1 and body[0].__class__ is A.Assign:
                sx = self.execs[id(body[0])]
                for v in range(lp.start, lp.start + lp.extent):
                    env[var] = v
                    sx.execute(st)
            else:
                for v in range(lp.start, lp.start + lp.extent):
                    env[var] = v
                    self._items(body, st)
            del env[var]
            return
        n = lp.extent
        block = self._block(lp, env)
        axis = self.plan.depth[lid]
        for b0 in range(0, n, block):
            env[var] = VecBind(axis, lp.start + b0, min(block, n - b0), self.maxd)
            self._items(lp.body, st)
        del env[var]

    def _init(self, sx: _StmtExec, lp: A.Loop, st: _State) -> None:
        """Store the identity into every element ``sx`` writes inside ``lp``."""
        env = st.env
        bound = []
        inside = False
        for l in sx.si.loops:
            if l is lp:
                inside = True
            if inside:
                env[l.var] = VecBind(self.plan.depth[id(l)], l.start, l.extent, self.maxd)
                bound.append(l.var)
        try:
            sx.store(st, sx.identity)
        finally:
            for v in bound:
                del env[v]


def _as_input(p: A.Param, x) -> np.ndarray:
    dt = D.np_dtype(p.dtype)
    a = np.asarray(x)
    if a.shape != tuple(p.shape):
        raise InterpError(f"input '{p.name}' has shape {list(a.shape)}, expected {list(p.shape)}", p.span)
    if a.dtype != dt:
        if not np.can_cast(a.dtype, dt, casting="same_kind") and not (a.dtype.kind in "iub" and dt.kind in "iub"):
            raise InterpError(f"input '{p.name}' has dtype {a.dtype}, expected {p.dtype}", p.span)
        a = a.astype(dt)
    return np.asarray(a, order="C")


def run(result: CheckResult, inputs: dict, *, intermediates: bool = False, poison: bool = True,
        max_elements: int = MAX_ELEMENTS, outputs: Optional[dict] = None, check_uninit: bool = False,
        vectorize: bool = True) -> dict:
    """Run a checked kernel on ``inputs`` (name -> array) and return its outputs by name.

    ``intermediates=True`` returns every written tensor (outputs and intermediates).
    ``poison`` fills outputs and intermediates before the run with NaN payloads / integer
    sentinels (see :mod:`leirc.interp.dtypes`), so reads of unwritten memory and unwritten
    outputs are visible; ``poison=False`` zero-fills instead. Raises :class:`InterpError`
    for programs with errors, bad inputs and out-of-range accesses; ``check_uninit`` and
    ``vectorize`` are those of :class:`Interpreter`."""
    return Interpreter(result, max_elements=max_elements, vectorize=vectorize).run(
        inputs, intermediates=intermediates, poison=poison, outputs=outputs, check_uninit=check_uninit)


def check_source(source: str, kernel: Optional[str] = None) -> CheckResult:
    """Parse and check ``source`` and return the CheckResult of the named (or only) kernel
    (:func:`leirc.lang.load.load_kernel`); its errors raise InterpError with the first error's
    span."""
    from ..lang.load import LoadError, load_kernel

    try:
        return load_kernel(source, kernel=kernel)
    except LoadError as e:
        first = next((d for d in e.diagnostics if d.is_error), None)
        raise InterpError(e.message, first.span if first is not None else None) from None


def run_source(source: str, inputs: dict, *, kernel: Optional[str] = None, **kw) -> dict:
    """Parse, check and run ``source`` (see :func:`run`)."""
    return run(check_source(source, kernel), inputs, **kw)


__all__ = ["InterpError", "Interpreter", "run", "run_source", "check_source", "MAX_ELEMENTS"]
