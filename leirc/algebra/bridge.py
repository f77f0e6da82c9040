"""LEIR expression <-> SymPy expression.

A :class:`Bridge` converts a LEIR expression tree (:mod:`leirc.lang.ast`) into a SymPy
expression and back. It is *faithful*: every operator and intrinsic has a SymPy
counterpart with the same meaning over the reals, and everything SymPy must not look into
is an opaque symbol that remembers exactly what it stands for.

=====================  =========================================================
LEIR                   SymPy
=====================  =========================================================
``A^{f32,g}_{i,j-1}``  ``Symbol("A[i,j-1]", real=True)``; the registry maps the
                       symbol back to the :class:`~leirc.lang.ast.Access` node
                       (name, dtype, scope and subscripts, nested ones included).
                       Integer dtypes give ``integer=True``, unsigned and ``bool``
                       also ``nonnegative=True``; ``positive``/``nonnegative``
                       only when the caller proves it (``signs``, see
                       :mod:`leirc.algebra.signs`).
index ``i``            ``Symbol("i", integer=True)`` (``nonnegative`` when its
                       loop range is known to start at >= 0)
integer literal        ``Integer``
float literal          the *exact* binary value as a ``Rational`` (``0.1`` is
                       3602879701896397/2**55), so ``x/3.0`` stays ``x/3`` and no
                       rounding happens inside SymPy; printed back as the same
                       float literal. ``inf`` is ``oo``.
``+ - * /`` unary -    ``Add``, ``Mul``, ``Pow(b, -1)``
``a // b``, ``a % b``  ``floor(a/b)``, ``Mod(a, b)`` (Python semantics for both)
``**``, ``pow``        ``Pow``
``sqrt``, ``rsqrt``    ``Pow(x, 1/2)``, ``Pow(x, -1/2)``
exp log abs erf tanh   ``exp log Abs erf tanh``
sigmoid                :class:`sigmoid` (an unevaluated SymPy function, positive
                       for real arguments, ``rewrite(exp)`` gives 1/(1+exp(-x)))
floor ceil             ``floor ceiling``
max min                ``Max Min`` (n-ary)
comparisons & |        ``Lt Le Gt Ge Eq Ne``, ``And``, ``Or`` (chains become And)
if_then_else(c,a,b)    ``Piecewise((a, c), (b, True))``
casts ``f32(x)``       an unevaluated function per dtype (:func:`cast_function`)
a bool in arithmetic   ``Piecewise((1, c), (0, True))``
=====================  =========================================================

Back conversion (:meth:`Bridge.from_sympy`) prints a canonical, readable LEIR form:
positive terms first, ``a - b`` for negative terms, numerator/denominator split for
products (``x*y/(z*w)``), ``sqrt``/``rsqrt`` for half powers, ``a//b`` for
``floor(a/b)`` when both sides are integer-valued, nested ``if_then_else`` for
``Piecewise``. It raises :class:`NotRepresentable` for what LEIR cannot say (complex
numbers, ``nan``, unknown functions and symbols).

SymPy evaluates as it builds: ``x - x`` becomes 0 and ``x/x`` becomes 1 even where x is
0 or infinite. Over the reals (finite values, defined operations) this is exact, which is
the ``exact-in-reals`` contract of every rewrite that goes through the bridge; callers
that must not lose a singularity check with :func:`leirc.algebra.prove.new_singularities`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Optional

import sympy as sp

from ..lang import ast as A
from ..lang.printer import print_expr

__all__ = ["Bridge", "NotRepresentable", "sigmoid", "cast_function", "to_sympy", "from_sympy"]


class NotRepresentable(ValueError):
    """A SymPy expression that has no LEIR spelling (or a LEIR node SymPy cannot model)."""


# ---------------------------------------------------------------------------
# SymPy functions for LEIR intrinsics without a SymPy counterpart


class sigmoid(sp.Function):  # noqa: N801 - SymPy function names are lower case
    """The logistic function 1/(1+exp(-x)), kept unevaluated."""

    nargs = 1

    @classmethod
    def eval(cls, x):
        if x is sp.S.Zero:
            return sp.S.Half
        return None

    def _eval_is_real(self):
        return self.args[0].is_extended_real

    def _eval_is_positive(self):
        return True if self.args[0].is_real else None

    def _eval_is_finite(self):
        return True if self.args[0].is_extended_real else None

    def _eval_rewrite_as_exp(self, x, **kwargs):
        return 1 / (1 + sp.exp(-x))

    def fdiff(self, argindex=1):
        s = sigmoid(self.args[0])
        return s * (1 - s)

    def _eval_evalf(self, prec):
        return (1 / (1 + sp.exp(-self.args[0])))._eval_evalf(prec)


class CastBase(sp.Function):
    """Base of the per-dtype cast functions ``f32(x)``, ``i64(x)``, ..."""

    nargs = 1
    dtype = ""

    @classmethod
    def _value(cls, x) -> Optional[float]:
        """The value the cast produces for a real number x (None if unknown)."""
        if not (x.is_number and x.is_extended_real) or x.has(sp.oo, -sp.oo):
            return None
        import numpy as np

        v = float(x)
        if cls.dtype == "f32":
            v = float(np.float32(v))
        elif cls.dtype == "f16":
            v = float(np.float16(v))
        elif cls.dtype == "bf16":
            return None  # bfloat16 rounding: left to run time
        elif cls.dtype == "bool":
            v = 1.0 if v != 0 else 0.0
        elif cls.dtype in A.INT_DTYPES:
            if abs(v) >= 2**62:
                return None
            v = float(int(v))
        return v if math.isfinite(v) else None

    @classmethod
    def eval(cls, x):
        # a cast of a simple number (an integer, a short binary fraction) is that number
        v = cls._value(x)
        if v is None:
            return None
        fr = Fraction(v)
        if fr.denominator <= _SIMPLE_DEN and abs(fr.numerator) < _SIMPLE_NUM:
            return sp.Rational(fr.numerator, fr.denominator)
        return None

    def _eval_evalf(self, prec):
        # other numbers stay symbolic but compare (Max/Min need it) by their value
        v = self._value(self.args[0])
        return sp.Float(v, prec) if v is not None else None

    def _eval_is_real(self):
        return True if self.args[0].is_real else None

    def _eval_is_integer(self):
        return True if self.dtype in A.INT_DTYPES or self.dtype == "bool" else None


@lru_cache(maxsize=None)
def cast_function(dtype: str):
    """The SymPy function class standing for the LEIR cast ``dtype(x)``."""
    return type(dtype, (CastBase,), {"dtype": dtype})


# ---------------------------------------------------------------------------


def _dyadic_float(r: sp.Rational) -> Optional[float]:
    """The float whose exact value is ``r``, if there is one (and it is finite)."""
    q = int(r.q)
    if q & (q - 1):
        return None
    try:
        f = float(Fraction(int(r.p), q))
    except OverflowError:
        return None
    if math.isinf(f) or Fraction(f) != Fraction(int(r.p), q):
        return None
    return f


_CMP = {"<": sp.Lt, "<=": sp.Le, ">": sp.Gt, ">=": sp.Ge, "==": sp.Eq, "!=": sp.Ne}
_REL_OP = {sp.StrictLessThan: "<", sp.LessThan: "<=", sp.StrictGreaterThan: ">", sp.GreaterThan: ">=",
           sp.Equality: "==", sp.Unequality: "!="}
_NEG_OP = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_MAX_INT = 2**63 - 1
#: float literals p/q with q <= _SIMPLE_DEN (a power of two) and |p| < _SIMPLE_NUM are exact
#: rationals in SymPy (0.5, 0.25, 1.5, 0.0625); others (0.1, 1e-05, 0.044715) are opaque
#: positive symbols standing for their exact value
_SIMPLE_DEN = 1024
_SIMPLE_NUM = 2**20


class Bridge:
    """A two-way LEIR <-> SymPy map with a registry of opaque symbols.

    ``signs`` maps tensor names to ``"positive"`` or ``"nonnegative"`` (facts the caller
    proved); ``ranges`` maps loop indices to their inclusive ``(lo, hi)`` range. One bridge
    should be used for both directions of one rewrite, so symbols map back to the same
    accesses."""

    def __init__(self, signs: Optional[dict] = None, ranges: Optional[dict] = None, finite: Optional[set] = None):
        self.signs = dict(signs or {})
        self.ranges = dict(ranges or {})
        # None: every float tensor is a real (finite) symbol, the exact-in-reals reading;
        # a set: float tensors outside it may hold +-inf (extended-real symbols)
        self.finite = None if finite is None else frozenset(finite)
        self._acc2sym: dict = {}
        self._sym2acc: dict = {}
        self._var2sym: dict = {}
        self._sym2var: dict = {}
        self._float_lits: set = set()
        self._int_lits: set = set()
        self._lit2sym: dict = {}
        self._sym2lit: dict = {}

    # -- symbols ---------------------------------------------------------------
    def symbol(self, acc: A.Access) -> sp.Symbol:
        """The opaque symbol of an access (created on first use)."""
        key = A.strip_spans(acc)
        s = self._acc2sym.get(key)
        if s is not None:
            return s
        name = key.name if not key.indices else f"{key.name}[{','.join(print_expr(i) for i in key.indices)}]"
        kw: dict = {}
        if key.dtype in A.FLOAT_DTYPES:
            kw["real"] = True
        elif key.dtype == "bool" or key.dtype.startswith("u"):
            kw["integer"] = True
            kw["nonnegative"] = True
        else:
            kw["integer"] = True
        sign = self.signs.get(key.name)
        if key.dtype in A.FLOAT_DTYPES and self.finite is not None and key.name not in self.finite:
            kw = {"extended_real": True}
            if sign == "positive":
                kw["extended_positive"] = True
            elif sign == "nonnegative":
                kw["extended_nonnegative"] = True
        elif sign == "positive":
            kw["positive"] = True
        elif sign == "nonnegative":
            kw["nonnegative"] = True
        s = sp.Symbol(name, **kw)
        self._acc2sym[key] = s
        self._sym2acc[s] = key
        return s

    def index_symbol(self, name: str) -> sp.Symbol:
        s = self._var2sym.get(name)
        if s is not None:
            return s
        kw = {"integer": True}
        rg = self.ranges.get(name)
        if rg is not None and rg[0] >= 0:
            kw["nonnegative"] = True
        s = sp.Symbol(name, **kw)
        self._var2sym[name] = s
        self._sym2var[s] = name
        return s

    def access_of(self, s: sp.Symbol) -> Optional[A.Access]:
        return self._sym2acc.get(s)

    def is_bool_symbol(self, s) -> bool:
        acc = self._sym2acc.get(s)
        return acc is not None and acc.dtype == "bool"

    # -- LEIR -> SymPy ---------------------------------------------------------
    def to_sympy(self, e: A.Expr):
        """The SymPy value of ``e`` (a number expression; conditions are wrapped as 0/1)."""
        v = self._conv(e)
        if isinstance(v, sp.logic.boolalg.Boolean) and not isinstance(v, sp.Symbol):
            return sp.Piecewise((sp.S.One, v), (sp.S.Zero, True))
        return v

    def to_sympy_condition(self, e: A.Expr):
        """The SymPy boolean of a condition ``e``."""
        return self._cond(e)

    def _cond(self, e: A.Expr):
        v = self._conv(e)
        if isinstance(v, (sp.logic.boolalg.Boolean, bool)) and not isinstance(v, sp.Symbol):
            return v
        return sp.Ne(v, 0)

    def _num(self, e: A.Expr):
        return self.to_sympy(e)

    def _conv(self, e: A.Expr):
        if isinstance(e, A.Const):
            return self._const(e)
        if isinstance(e, A.Var):
            return self.index_symbol(e.name)
        if isinstance(e, A.Access):
            return self.symbol(e)
        if isinstance(e, A.Neg):
            return -self._num(e.operand)
        if isinstance(e, A.Compare):
            parts = []
            for op, lhs, rhs in zip(e.ops, e.operands, e.operands[1:]):
                parts.append(_CMP[op](self._num(lhs), self._num(rhs)))
            return parts[0] if len(parts) == 1 else sp.And(*parts)
        if isinstance(e, A.BinOp):
            if e.op == "&":
                return sp.And(self._cond(e.lhs), self._cond(e.rhs))
            if e.op == "|":
                return sp.Or(self._cond(e.lhs), self._cond(e.rhs))
            a, b = self._num(e.lhs), self._num(e.rhs)
            if e.op == "+":
                return a + b
            if e.op == "-":
                return a - b
            if e.op == "*":
                return a * b
            if e.op == "/":
                return a / b
            if e.op == "//":
                return sp.floor(a / b)
            if e.op == "%":
                return sp.Mod(a, b)
            if e.op == "**":
                return sp.Pow(a, b)
            raise NotRepresentable(f"operator {e.op}")
        if isinstance(e, A.Call):
            return self._call(e)
        raise NotRepresentable(f"not an expression: {e!r}")

    def _const(self, c: A.Const):
        v = c.value
        if isinstance(v, bool):
            return sp.Integer(int(v))
        if isinstance(v, int):
            self._int_lits.add(v)
            return sp.Integer(v)
        if math.isinf(v):
            return sp.oo if v > 0 else -sp.oo
        if math.isnan(v):
            raise NotRepresentable("nan literal")
        self._float_lits.add(v)
        fr = Fraction(v)
        if fr.denominator <= _SIMPLE_DEN and abs(fr.numerator) < _SIMPLE_NUM:
            return sp.Rational(fr.numerator, fr.denominator)
        return self._literal_symbol(v)

    def _literal_symbol(self, v: float) -> sp.Symbol:
        """An opaque positive symbol for a float literal such as ``1e-05``: exact, and
        SymPy treats it as a parameter instead of a 2**-69-denominator rational."""
        s = self._lit2sym.get(v)
        if s is None:
            s = sp.Symbol(repr(v), positive=True)
            self._lit2sym[v] = s
            self._sym2lit[s] = v
        return s

    def _call(self, e: A.Call):
        f = e.func
        if f == "if_then_else":
            c = self._cond(e.args[0])
            return sp.Piecewise((self._num(e.args[1]), c), (self._num(e.args[2]), True))
        if f in A.CAST_FUNCS:
            return cast_function(f)(self._num(e.args[0]))
        args = [self._num(a) for a in e.args]
        if f == "exp":
            return sp.exp(args[0])
        if f == "log":
            return sp.log(args[0])
        if f == "sqrt":
            return sp.sqrt(args[0])
        if f == "rsqrt":
            return sp.Pow(args[0], sp.Rational(-1, 2))
        if f == "abs":
            return sp.Abs(args[0])
        if f == "erf":
            return sp.erf(args[0])
        if f == "tanh":
            return sp.tanh(args[0])
        if f == "sigmoid":
            return sigmoid(args[0])
        if f == "floor":
            return sp.floor(args[0])
        if f == "ceil":
            return sp.ceiling(args[0])
        if f == "pow":
            return sp.Pow(args[0], args[1])
        if f == "max":
            return sp.Max(*args)
        if f == "min":
            return sp.Min(*args)
        raise NotRepresentable(f"function {f}")

    # -- SymPy -> LEIR ---------------------------------------------------------
    def from_sympy(self, s) -> A.Expr:
        """A LEIR expression for the SymPy value ``s`` (see the module docstring)."""
        if isinstance(s, (bool, sp.logic.boolalg.BooleanAtom)) or (
                isinstance(s, sp.logic.boolalg.Boolean) and not isinstance(s, sp.Symbol)):
            return self._bool_back(s)
        return self._back(sp.sympify(s))

    def _num_const(self, r) -> A.Expr:
        """A non-negative rational as a literal (or p/q)."""
        if r.is_Integer:
            n = int(r)
            if n > _MAX_INT:
                raise NotRepresentable(f"integer {n} does not fit in 64 bits")
            if float(n) in self._float_lits and n not in self._int_lits:
                return A.Const(float(n))
            return A.Const(n)
        f = _dyadic_float(r)
        if f is not None and (f in self._float_lits or r.q > 2**20):
            return A.Const(f)
        return A.BinOp("/", self._num_const(sp.Integer(r.p)), self._num_const(sp.Integer(r.q)))

    def _back(self, s) -> A.Expr:
        if s.is_Number:
            if s is sp.oo:
                return A.Const(math.inf)
            if s is sp.S.NegativeInfinity:
                return A.Neg(A.Const(math.inf))
            if s is sp.nan or s is sp.zoo or not s.is_real:
                raise NotRepresentable(f"{s} has no LEIR literal")
            if s.is_Float:
                v = float(s)
                return A.Neg(A.Const(-v)) if v < 0 else A.Const(v)
            if s < 0:
                return A.Neg(self._num_const(-s))
            return self._num_const(s)
        if s is sp.E:
            return A.Call("exp", (A.Const(1),))
        if s is sp.pi:
            return A.Const(math.pi)
        if s.is_Symbol:
            acc = self._sym2acc.get(s)
            if acc is not None:
                return acc
            var = self._sym2var.get(s)
            if var is not None:
                return A.Var(var)
            lit = self._sym2lit.get(s)
            if lit is not None:
                return A.Const(lit)
            raise NotRepresentable(f"unknown symbol {s}")
        if s.is_Add:
            return self._add(s)
        if s.is_Mul:
            return self._mul(s)
        if s.is_Pow:
            return self._pow(s)
        if isinstance(s, sp.Piecewise):
            return self._piecewise(s)
        if isinstance(s, (sp.Max, sp.Min)):
            args = [self._back(a) for a in s.args]
            return A.Call("max" if isinstance(s, sp.Max) else "min", tuple(args))
        if isinstance(s, sp.Mod):
            return A.BinOp("%", self._back(s.args[0]), self._back(s.args[1]))
        if isinstance(s, sp.floor):
            arg = s.args[0]
            num, den = arg.as_numer_denom()
            if den != 1 and _all_integer(num) and _all_integer(den):
                return A.BinOp("//", self._back(num), self._back(den))
            return A.Call("floor", (self._back(arg),))
        if isinstance(s, sp.ceiling):
            return A.Call("ceil", (self._back(s.args[0]),))
        if isinstance(s, CastBase):
            return A.Call(s.dtype, (self._back(s.args[0]),))
        fname = {sp.exp: "exp", sp.log: "log", sp.Abs: "abs", sp.erf: "erf", sp.tanh: "tanh", sigmoid: "sigmoid"}.get(s.func)
        if fname is not None:
            return A.Call(fname, tuple(self._back(a) for a in s.args))
        raise NotRepresentable(f"no LEIR spelling for {s.func.__name__}")

    def _add(self, s) -> A.Expr:
        terms = list(s.as_ordered_terms())
        lits = set(self._sym2lit)
        # constants (numbers and literal symbols) last, as SymPy prints numbers: x + 1e-05
        terms = [t for t in terms if not t.free_symbols <= lits] + [t for t in terms if t.free_symbols <= lits]
        neg = [t.could_extract_minus_sign() for t in terms]
        if neg[0] and not all(neg):
            k = neg.index(False)
            terms.insert(0, terms.pop(k))
            neg.insert(0, neg.pop(k))
        out = self._back(terms[0])
        for t, n in zip(terms[1:], neg[1:]):
            if n:
                out = A.BinOp("-", out, self._back(-t))
            else:
                out = A.BinOp("+", out, self._back(t))
        return out

    def _mul(self, s) -> A.Expr:
        coeff, factors = s.as_coeff_mul()
        sign = False
        if coeff.is_negative:
            sign = True
            coeff = -coeff
        nums, dens = [], []
        if coeff.is_Rational and not coeff.is_Integer:
            f = _dyadic_float(coeff)
            if f is not None and (f in self._float_lits or coeff.q > 2**20):
                nums.append(A.Const(f))
            else:
                if coeff.p != 1:
                    nums.append(self._num_const(sp.Integer(coeff.p)))
                dens.append(self._num_const(sp.Integer(coeff.q)))
        elif coeff != 1:
            nums.append(self._back(coeff))
        lits = set(self._sym2lit)
        # literal constants first, like SymPy's numeric coefficient: 0.5*x, not x*0.5
        factors = [f for f in factors if f in lits] + [f for f in factors if f not in lits]
        for f in factors:
            if f.is_Pow and f.exp.is_Rational and f.exp.is_negative:
                dens.append(self._back(f.base ** (-f.exp)))
            else:
                nums.append(self._back(f))
        if not nums:
            num: A.Expr = A.Const(1)
        else:
            num = nums[0]
            for x in nums[1:]:
                num = A.BinOp("*", num, x)
        if dens:
            den = dens[0]
            for x in dens[1:]:
                den = A.BinOp("*", den, x)
            if not nums and len(dens) == 1 and isinstance(den, A.Call) and den.func == "sqrt":
                out: A.Expr = A.Call("rsqrt", den.args)
            else:
                out = A.BinOp("/", num, den)
        else:
            out = num
        return A.Neg(out) if sign else out

    def _pow(self, s) -> A.Expr:
        b, e = s.base, s.exp
        if e == sp.S.Half:
            return A.Call("sqrt", (self._back(b),))
        if e == -sp.S.Half:
            return A.Call("rsqrt", (self._back(b),))
        if e.is_Rational and e.is_negative:
            return A.BinOp("/", A.Const(1), self._back(b ** (-e)))
        return A.BinOp("**", self._back(b), self._back(e))

    def _piecewise(self, s) -> A.Expr:
        pieces = list(s.args)
        last_val, last_cond = pieces[-1]
        if last_cond is not sp.true:
            raise NotRepresentable("Piecewise without an otherwise branch")
        out = self._back(last_val)
        for val, cond in reversed(pieces[:-1]):
            out = A.Call("if_then_else", (self._bool_back(cond), self._back(val), out))
        return out

    def _bool_back(self, c) -> A.Expr:
        if c is sp.true or c is True:
            return A.Compare(("==",), (A.Const(0), A.Const(0)))
        if c is sp.false or c is False:
            return A.Compare(("!=",), (A.Const(0), A.Const(0)))
        if isinstance(c, sp.And):
            args = [self._bool_back(a) for a in c.args]
            out = args[0]
            for a in args[1:]:
                out = A.BinOp("&", out, a)
            return out
        if isinstance(c, sp.Or):
            args = [self._bool_back(a) for a in c.args]
            out = args[0]
            for a in args[1:]:
                out = A.BinOp("|", out, a)
            return out
        if isinstance(c, sp.Not):
            inner = c.args[0]
            if isinstance(inner, sp.core.relational.Relational):
                op = _NEG_OP[_REL_OP[type(inner)]]
                return A.Compare((op,), (self._back(inner.lhs), self._back(inner.rhs)))
            if isinstance(inner, sp.And):
                return self._bool_back(sp.Or(*[sp.Not(a) for a in inner.args]))
            if isinstance(inner, sp.Or):
                return self._bool_back(sp.And(*[sp.Not(a) for a in inner.args]))
            raise NotRepresentable(f"no LEIR spelling for {c}")
        if isinstance(c, sp.core.relational.Relational):
            op = _REL_OP.get(type(c))
            if op is None:
                raise NotRepresentable(f"no LEIR spelling for {c}")
            if op == "!=" and c.rhs == 0 and self.is_bool_symbol(c.lhs):
                return self._back(c.lhs)
            return A.Compare((op,), (self._back(c.lhs), self._back(c.rhs)))
        raise NotRepresentable(f"no LEIR spelling for condition {c}")


def _all_integer(s) -> bool:
    return bool(s.is_integer)


# ---------------------------------------------------------------------------
# module-level helpers


def to_sympy(e: A.Expr, bridge: Optional[Bridge] = None):
    """(SymPy expression, bridge) for ``e``; pass the bridge to :func:`from_sympy`."""
    b = bridge or Bridge()
    return b.to_sympy(e), b


def from_sympy(s, bridge: Bridge) -> A.Expr:
    return bridge.from_sympy(s)


def same_tree(a: A.Expr, b: A.Expr) -> bool:
    """Structural equality that also distinguishes int and float literals."""
    return _key(a) == _key(b)


def _key(n):
    if isinstance(n, A.Const):
        return ("Const", type(n.value).__name__, n.value)
    if isinstance(n, tuple):
        return tuple(_key(x) for x in n)
    if hasattr(n, "__dataclass_fields__"):
        return (type(n).__name__,) + tuple(_key(getattr(n, f)) for f in n.__dataclass_fields__ if f != "span")
    return n

