"""A rounding-error bound per output element, derived from the program's arithmetic.

A flat tolerance cannot serve both a 16-term dot product and a GroupNorm over the outputs
of a 4096-term GEMM: the second one's correct f32 results differ from the oracle's by far
more, while a flat bound loose enough for it lets wrong small elements through. The error a
correct floating-point evaluation can have depends on how long its accumulations are,
how they chain through intermediates and how badly the later operations amplify them
(a mean subtracted from values much larger than their spread). This module computes it.

:func:`bound_program` builds a *companion program*: the reference kernel with, after every
float assignment to a tensor ``X``, a statement that computes ``EX`` (float64, same shape
and subscripts), a first-order bound on the absolute rounding error of ``X`` -- running
error analysis (Wilkinson; Higham, *Accuracy and Stability of Numerical Algorithms*, 3.3)
carried out by the interpreter itself on the program's real values:

* inputs are exact (E = 0); constants and loop indices are exact;
* ``a +- b``: E(a) + E(b) + u|a +- b|; ``a*b``: |a|E(b) + |b|E(a) + u|ab|;
  ``a/b``: (E(a) + |a/b| E(b)) / |b| + u|a/b|;
* a function propagates through its derivative and adds ``LIBM_ULPS`` ulps of its result
  (libraries differ): ``exp(a)``: exp(a)(E(a) + c u); ``log(a)``: E(a)/|a| + c u|log a|;
  ``sqrt``, ``rsqrt``, ``tanh``, ``sigmoid``, ``erf``, ``pow`` likewise; ``abs``/``max``/
  ``min``/``if_then_else`` pass the error of the chosen operand on (a comparison whose
  outcome a rounding error flips is not covered; such programs need exact ties);
* a sum reduction over n terms adds, per term, E(term) + sqrt(n) u |term|: the
  probabilistic bound of Higham and Mary (SIAM J. Sci. Comput. 41(5), 2019) for recursive
  summation in *any* order, lambda*sqrt(n)*u instead of the worst case n*u (which would
  hide a missing term of a long sum). Its model -- independent, mean-zero rounding errors
  -- fails for heavy-tailed terms: a serial f32 sum of values spanning six decades loses
  the small ones systematically (measured: 10*sqrt(n)*u on GroupNorm's 32768-term variance
  under the ``mixed`` probe), so ``worst_case=True`` (used for the probe distributions)
  takes Higham's deterministic n*u instead; either factor is capped at 1, since one step
  of a sum errs by at most the term it adds (n*u passes 1 for 300 bf16 terms); max/min
  reductions keep the largest E;
* magnitudes are clamped at 2^500, so that an infinite value whose contribution a later
  operation removes (exp(-inf) = 0 for -inf padding) leaves a finite bound;
* products, quotients, exp, sigmoid, pow and casts add ETA, the absolute error of a result
  that underflows (half the smallest subnormal): the standard model
  fl(x op y) = (x op y)(1 + d) + e of IEEE arithmetic with gradual underflow;
* the store into the target adds u of the target's dtype times the stored value when the
  value has another type (a same-typed value is stored exactly).

u is the unit roundoff of the operation's dtype (2^-24 for f32). The interpreter runs the
companion program in its vectorized mode on the same inputs, so the bound costs about one
more reference run and is only computed for runs whose candidate is not bit-identical.
Product reductions are not supported (``Unsupported``): the verifier then keeps the flat
tolerance. :mod:`leirc.verify.compare` turns the bound into the acceptance rule.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ..lang import ast as A
from ..lang.checker import CheckResult, check_kernel
from ..lang.types import expr_type, is_float
from ..interp.plan import reduction_form

#: unit roundoff of each float dtype
UNIT_ROUNDOFF = {"f16": 2.0**-11, "bf16": 2.0**-8, "f32": 2.0**-24, "f64": 2.0**-53}
#: ulps of its result a function (exp, log, ...) may be off by in a correct library
LIBM_ULPS = 4.0
#: absolute error of a result that underflows into the subnormal range (half the
#: smallest subnormal): fl(x op y) = (x op y)(1 + d) + e, |e| <= ETA
ETA = {"f16": 2.0**-25, "bf16": 2.0**-134, "f32": 2.0**-150, "f64": 2.0**-1075}
#: derivative-free functions whose value is exact or piecewise constant
_EXACT = ("floor", "ceil")


class Unsupported(Exception):
    """The program uses a construct the bound does not model."""


def _f64(e: A.Expr) -> A.Expr:
    return A.Call("f64", (e,))


#: magnitudes are clamped here: an infinite value (-inf padding, exp(-inf) = 0) would
#: otherwise turn a bound of 0*inf into NaN; 2^500 squared is still finite in float64
BIG = 2.0**500


def _abs(e: A.Expr) -> A.Expr:
    return A.Call("min", (A.Call("abs", (_f64(e),)), A.Const(BIG)))


def _c(v: float) -> A.Expr:
    return A.Const(float(v))


def _add(*xs: Optional[A.Expr]) -> Optional[A.Expr]:
    out = None
    for x in xs:
        if x is None:
            continue
        out = x if out is None else A.BinOp("+", out, x)
    return out


def _mul(a: Optional[A.Expr], b: Optional[A.Expr]) -> Optional[A.Expr]:
    if a is None or b is None:
        return None
    return A.BinOp("*", a, b)


def _div(a: Optional[A.Expr], b: A.Expr) -> Optional[A.Expr]:
    return None if a is None else A.BinOp("/", a, b)


class _Err:
    """A bound ``P + |e| * (S + s)``: ``P`` absolute and ``S`` relative float64 expressions
    (None for 0) and ``s`` a constant relative part. Keeping the relative part separate
    lets a chain of roundings share one ``|e|`` instead of re-evaluating ``e`` per term."""

    __slots__ = ("p", "s_expr", "s")

    def __init__(self, p=None, s_expr=None, s=0.0):
        self.p, self.s_expr, self.s = p, s_expr, float(s)

    @property
    def zero(self) -> bool:
        return self.p is None and self.s_expr is None and self.s == 0.0

    def rel(self, extra: float = 0.0) -> Optional[A.Expr]:
        c = self.s + extra
        return _add(self.s_expr, _c(c) if c != 0.0 else None)


ZERO = _Err()


class _Builder:
    def __init__(self, ref: CheckResult, with_bound: set, worst_case: bool = False):
        self.ref = ref
        self.worst_case = worst_case
        names = set(ref.tensors) | {p.name for p in ref.kernel.inputs + ref.kernel.outputs}
        self.enames: dict = {}
        k = 0
        for n, info in sorted(ref.tensors.items()):
            if info.role == "input" or not is_float(info.dtype) or n not in with_bound:
                continue
            while True:
                cand = f"Leircerr{k}"
                k += 1
                if cand not in names:
                    break
            self.enames[n] = cand
        self.target_dtype = "f32"

    def u(self, t: Optional[str]) -> float:
        if t in UNIT_ROUNDOFF:
            return UNIT_ROUNDOFF[t]
        return UNIT_ROUNDOFF.get(self.target_dtype, 2.0**-24)

    def eta(self, t: Optional[str]) -> A.Expr:
        return _c(ETA.get(t if t in ETA else self.target_dtype, 2.0**-150))

    def ebound(self, a: A.Access) -> A.Access:
        return A.Access(self.enames[a.name], "f64", "g", a.indices)

    def total(self, e: A.Expr, r: _Err, absv: Optional[A.Expr] = None) -> Optional[A.Expr]:
        """``r`` as one expression (``absv`` replaces ``|e|``)."""
        rel = r.rel()
        return _add(r.p, _mul(absv if absv is not None else _abs(e), rel))

    def err(self, e: A.Expr) -> _Err:
        t = expr_type(e)
        if t is None or t == "bool" or not (is_float(t) or t == "float_lit"):
            return ZERO
        if isinstance(e, (A.Const, A.Var)):
            return ZERO
        if isinstance(e, A.Access):
            return _Err(self.ebound(e)) if e.name in self.enames else ZERO
        if isinstance(e, A.Neg):
            return self.err(e.operand)
        u = self.u(t)
        if isinstance(e, A.BinOp):
            ra, rb = self.err(e.lhs), self.err(e.rhs)
            if e.op in ("+", "-"):
                return _Err(_add(self.total(e.lhs, ra), self.total(e.rhs, rb)), None, u)
            if e.op == "*":
                return _Err(_add(_mul(_abs(e.rhs), ra.p), _mul(_abs(e.lhs), rb.p), self.eta(t)),
                            _add(ra.s_expr, rb.s_expr), ra.s + rb.s + u)
            if e.op == "/":
                p = _add(ra.p, _mul(_abs(e), rb.p))
                return _Err(_add(_div(p, _abs(e.rhs)), self.eta(t)), _add(ra.s_expr, rb.s_expr), ra.s + rb.s + u)
            if e.op == "**":
                return self._pow(e.lhs, e.rhs, ra, rb, u, t)
            if e.op in ("//", "%"):
                return ZERO
            raise Unsupported(f"operator {e.op}")
        if isinstance(e, A.Call):
            f = e.func
            if f in A.CAST_FUNCS:
                r = self.err(e.args[0]) if e.args else ZERO
                return _Err(_add(r.p, self.eta(f)), r.s_expr, r.s + self.u(f)) if is_float(f) else ZERO
            if f in _EXACT:
                return ZERO
            if f in ("max", "min", "if_then_else"):
                args = e.args[1:] if f == "if_then_else" else e.args
                rs = [self.err(a) for a in args]
                if all(r.zero for r in rs):
                    return ZERO
                ps = [r.p if r.p is not None else _c(0.0) for r in rs]
                ss = [r.rel() if r.rel() is not None else _c(0.0) for r in rs]
                if f == "if_then_else":
                    return _Err(A.Call(f, (e.args[0], *ps)), A.Call(f, (e.args[0], *ss)))
                return _Err(A.Call("max", tuple(ps)), A.Call("max", tuple(ss)))
            if f == "abs":
                return self.err(e.args[0])
            a = e.args[0]
            ra = self.err(a)
            lib = LIBM_ULPS * u
            ta = self.total(a, ra)
            if f == "exp":
                return _Err(self.eta(t), ta, lib)
            if f == "log":
                return _Err(_div(ta, _abs(a)), None, lib)
            if f == "sqrt":
                return _Err(_div(ra.p, A.BinOp("*", _c(2.0), _abs(e))),
                            _mul(_c(0.5), ra.s_expr), 0.5 * ra.s + lib)
            if f == "rsqrt":
                return _Err(None, _add(_div(ra.p, A.BinOp("*", _c(2.0), _abs(a))), _mul(_c(0.5), ra.s_expr)),
                            0.5 * ra.s + lib)
            if f == "tanh":
                return _Err(_mul(A.BinOp("-", _c(1.0), A.BinOp("*", _f64(e), _f64(e))), ta), None, lib)
            if f == "sigmoid":
                return _Err(self.eta(t), _mul(A.BinOp("-", _c(1.0), _f64(e)), ta), lib)
            if f == "erf":
                d = A.BinOp("*", _c(2.0 / math.sqrt(math.pi)),
                            A.Call("exp", (A.Neg(A.BinOp("*", _f64(a), _f64(a))),)))
                return _Err(_mul(d, ta), None, lib)
            if f == "pow":
                return self._pow(e.args[0], e.args[1], ra, self.err(e.args[1]), u, t)
            raise Unsupported(f"function {f}")
        raise Unsupported(type(e).__name__)

    def _pow(self, a, b, ra, rb, u, t=None) -> _Err:
        # d(a^b)/(a^b) = (b/a) da + log|a| db
        sa = _mul(A.Call("abs", (A.BinOp("/", _f64(b), _f64(a)),)), self.total(a, ra))
        sb = _mul(A.Call("abs", (A.Call("log", (_abs(a),)),)), self.total(b, rb))
        return _Err(self.eta(t), _add(sa, sb), LIBM_ULPS * u)

    def companion(self, si):
        """The statement(s) computing the bound of ``si``'s target, or None when it is 0."""
        st = si.stmt
        x = st.target
        if not is_float(x.dtype):
            return None
        self.target_dtype = x.dtype
        ux = self.u(x.dtype)
        if si.kind == "reduce":
            operand = si.operand
            if operand is None:
                # a left-deep chain X + a - b + c: its terms reassociated (a - b + c) are
                # what each iteration adds, exactly as the interpreter reduces it
                form = reduction_form(si)
                if form is None:
                    raise Unsupported("a reduction chain whose terms do not reassociate")
                operand = form.operand
            r = self.err(operand)
            if si.op in ("+", "-"):
                n = 1
                for l in si.loops:
                    if l.var in si.reduce_vars:
                        n *= l.extent
                if x.name not in self.enames:
                    return _NONZERO
                ex = self.ebound(x)
                n = max(n, 1)
                # a step's rounding error is at most the term it adds (the partial sum before
                # it is representable): never more than 1 x |term|, which caps n*u for long
                # f16/bf16 sums (300 bf16 terms: n*u = 1.17)
                rel = r.rel(min((n if self.worst_case else math.sqrt(n)) * ux, 1.0))
                monos = _monomials(r.p, operand, rel)
                if monos is not None:
                    # one reduction per monomial: each is a sum of products, which the
                    # interpreter contracts with matrix products instead of materializing
                    # the whole iteration space
                    return [A.Assign(ex, A.BinOp("+", ex, _prod(m))) for m in monos]
                # |t|*rel written as abs(t*rel) (rel >= 0): the same value, but not a sum of
                # products with factors that would be contracted one n-long product at a time
                term = _add(r.p, A.Call("min", (A.Call("abs", (A.BinOp("*", _f64(operand), rel),)), A.Const(BIG))))
                return A.Assign(ex, A.BinOp("+", ex, term))
            if si.op in ("max", "min"):
                if r.zero:
                    return None
                if x.name not in self.enames:
                    return _NONZERO
                ex = self.ebound(x)
                return A.Assign(ex, A.Call("max", (ex, self.total(operand, r))))
            raise Unsupported(f"a {si.op} reduction")
        # assign, update, scan: the whole right-hand side, self-reads included, then the
        # store, which rounds only a value of another type (a same-typed value already is
        # a value of the target's dtype; a weak literal is created in it)
        r = self.err(st.value)
        vt = expr_type(st.value)
        store = 0.0 if vt in (x.dtype, "float_lit") else ux
        if r.zero and store == 0.0:
            return None
        if x.name not in self.enames:
            return _NONZERO
        term = _add(r.p, _mul(_abs(x), r.rel(store)))
        return A.Assign(self.ebound(x), term)


#: most reductions one companion of a sum may be split into
MAX_MONOMIALS = 6


def _terms(e: Optional[A.Expr]) -> list:
    if e is None:
        return []
    if isinstance(e, A.BinOp) and e.op == "+":
        return _terms(e.lhs) + _terms(e.rhs)
    return [e]


def _factors(e: A.Expr) -> list:
    if isinstance(e, A.BinOp) and e.op == "*":
        return _factors(e.lhs) + _factors(e.rhs)
    return [e]


def _expand(e: A.Expr) -> list:
    """``e`` as a sum of monomials (lists of factors), distributing products over sums."""
    out = []
    for t in _terms(e):
        monos = [[]]
        for f in _factors(t):
            if isinstance(f, A.BinOp) and f.op == "+":
                subs = [sub for part in _terms(f) for sub in _expand(part)]
                if any(sub is None for sub in subs):
                    return [None] * (MAX_MONOMIALS + 1)
                monos = [m + sub for m in monos for sub in subs]
            else:
                monos = [m + [f] for m in monos]
            if len(monos) > MAX_MONOMIALS:
                return [None] * (MAX_MONOMIALS + 1)
        out.extend(monos)
    return out


def _monomials(p: Optional[A.Expr], operand: A.Expr, rel: A.Expr) -> Optional[list]:
    """The companion term ``p + |operand| * rel`` as at most MAX_MONOMIALS products, where
    |operand| is the product of the absolute values of its factors; None if it would be
    more, or if the operand is not a product (nothing for a matrix product to gain)."""
    ops = _factors(operand)
    if len(ops) < 2:
        return None
    absf = [_abs(f) for f in ops]
    monos = _expand(p) if p is not None else []
    monos += [absf + m for m in _expand(rel)]
    if len(monos) > MAX_MONOMIALS or any(m is None for m in monos):
        return None
    return monos


def _prod(factors: list) -> A.Expr:
    out = factors[0]
    for f in factors[1:]:
        out = A.BinOp("*", out, f)
    return out


#: marks a statement whose target needs a bound but has no bound tensor yet
_NONZERO = A.Assign(A.Access("_", "f64", "g"), A.Const(0.0))


def bound_program(ref: CheckResult, worst_case: bool = False) -> tuple[CheckResult, dict]:
    """The companion program of ``ref`` (see the module docstring) and, for each float
    output of ``ref`` whose bound is not identically 0, the name of the companion output
    holding it. ``worst_case`` uses the deterministic n*u per sum reduction instead of
    sqrt(n)*u. Raises :class:`Unsupported` for programs the bound does not model."""
    by_stmt = {id(si.stmt): si for si in ref.stmts}
    # tensors get a bound tensor only where some writer can round; grow the set to a
    # fixpoint (a read of a bounded tensor makes its reader's bound non-zero)
    bounded: set = set()
    while True:
        b = _Builder(ref, bounded, worst_case)
        need = set()
        for si in ref.stmts:
            c = b.companion(si)
            if c is not None:
                need.add(si.stmt.target.name)
        if need <= bounded:
            break
        bounded |= need
    b = _Builder(ref, bounded, worst_case)

    def items(body):
        out = []
        for it in body:
            if isinstance(it, A.Loop):
                out.append(A.Loop(it.kind, it.extent, it.var, it.start, tuple(items(it.body))))
            elif isinstance(it, A.Region):
                out.append(A.Region(it.tag, tuple(items(it.body))))
            elif isinstance(it, A.Assign):
                out.append(A.Assign(it.target, it.value))
                si = by_stmt.get(id(it))
                comp = b.companion(si) if si is not None else None
                if isinstance(comp, list):
                    out.extend(comp)
                elif comp is not None and comp is not _NONZERO:
                    out.append(comp)
            elif isinstance(it, A.Alloc):
                out.append(it)
                if it.name in b.enames:  # the bound of a private tile is private like the tile
                    out.append(A.Alloc(b.enames[it.name], "f64", "g", it.shape))
            else:
                out.append(it)
        return out

    k = ref.kernel
    body = tuple(items(k.body))
    names = {p.name: b.enames[p.name] for p in k.outputs if p.name in b.enames}
    outs = tuple(A.Param(p.name, p.dtype, tuple(p.shape)) for p in k.outputs) + tuple(
        A.Param(names[p.name], "f64", tuple(p.shape)) for p in k.outputs if p.name in names)
    kern = A.Kernel(k.name, tuple(A.Param(p.name, p.dtype, tuple(p.shape)) for p in k.inputs), outs, body)
    res = check_kernel(kern)
    if not res.ok:
        errs = [d for d in res.diagnostics if d.is_error]
        raise Unsupported(f"the companion program does not check: {errs[0].code} {errs[0].message}")
    return res, names


class ErrorBound:
    """The companion program of a reference, prepared to run (see :func:`bound_program`)."""

    def __init__(self, ref: CheckResult, worst_case: bool = False):
        from ..interp import Interpreter

        self.result, self.names = bound_program(ref, worst_case)
        self.interp = Interpreter(self.result)

    def run(self, inputs: dict) -> dict:
        """output name -> float64 array bounding the rounding error of each element
        (non-finite where the bound is undefined, e.g. a division by an exact 0)."""
        outs = self.interp.run(inputs)
        res = {}
        for p in self.result.kernel.outputs:
            if p.name in self.names.values() or not is_float(p.dtype):
                continue
            en = self.names.get(p.name)
            if en is None:  # nothing rounds on the way to this output
                res[p.name] = np.zeros(tuple(p.shape))
                continue
            e = np.asarray(outs[en], dtype=np.float64)
            res[p.name] = np.where(np.isfinite(e) & (e >= 0), e, np.inf)
        return res


def try_bound(ref: CheckResult, worst_case: bool = False) -> tuple[Optional["ErrorBound"], str]:
    """(the ErrorBound of ``ref``, "") or (None, why not) for a program the bound does not
    model (the flat tolerance applies then)."""
    from ..interp import InterpError

    try:
        return ErrorBound(ref, worst_case), ""
    except (Unsupported, InterpError) as e:
        return None, str(e)


def lazy_bounds(eb: Optional["ErrorBound"], inputs: dict):
    """``name -> callable`` giving the bound of output ``name`` on ``inputs``, computed on
    first use (once for all outputs) -- what :func:`leirc.verify.compare_output` takes as
    ``bound``; None for every output when ``eb`` is None."""
    cache: dict = {}

    def of(name: str):
        if eb is None:
            return None

        def get():
            if "b" not in cache:
                cache["b"] = eb.run(inputs)
            return cache["b"].get(name)
        return get
    return of


__all__ = ["ErrorBound", "bound_program", "Unsupported", "UNIT_ROUNDOFF", "LIBM_ULPS", "try_bound", "lazy_bounds"]
