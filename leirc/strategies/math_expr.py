"""Math-level strategies on one equation, backed by SymPy (:mod:`leirc.algebra`).

Every strategy here rewrites one expression of one statement and nothing else:

* for an assignment or a scan, the whole right-hand side;
* for a reduction or an in-place update ``X = X op e`` (also ``e op X``, ``max(X, e)``),
  only the operand ``e`` -- the accumulation form, and so the statement kind and its
  identity initialization, never change;
* with the optional argument ``at`` (a LEIR expression, e.g. ``at=exp(A^{f32,g}_{i,j}-M^{f32,g}_{i})``),
  only the first sub-expression (pre-order) of that expression that is equal to it.

A rewrite is applied only when SymPy proves it is an identity over the reals under the
stated domain assumptions: ``simplify(new - old) == 0`` with tensors as real symbols
(positive or non-negative only when :mod:`leirc.algebra.signs` proves it from the
program), index variables as integers. The new expression is converted back to LEIR and
converted *again* to SymPy for the proof, so the back conversion is checked too. A rewrite
is also rejected when it would divide by something that may be zero where the original
is defined, or take the log of something not provably positive
(:func:`leirc.algebra.prove.new_singularities`).

All of them are equal in real arithmetic wherever the original is defined (they may
define more: ``cancellation`` of ``(x*x - x)/x`` gives ``x - 1``, also at ``x = 0`` where
the original is NaN). Their numerics class says what floating point makes of that:

* ``exact-in-reals`` -- the rewrite regroups the original's own terms and factors
  (``factorization``, ``collect``, ``expand_collect``, ``powsimp``, ``expand_log``): the
  result differs by rounding, with an error bound of the same form as the original's, and
  no intermediate can overflow at magnitudes where the original's do not;
* ``approximate`` -- the rewrite computes a value the original does not (an exponential
  split into factors, a product of denominators, a foreign ``z``, an expanded square), which
  can overflow to inf/NaN or cancel catastrophically at ordinary magnitudes where the
  original is accurate: ``expand_powsimp`` on a softmax, ``exp(x)*exp(-max)``, overflows at
  logits of about 90 in f32. Each docstring names the risk. ``cancellation`` is
  ``exact-in-reals`` for an application that introduces no new exponential, logarithm or
  power (:meth:`Cancellation.numerics_for`).

The Step-TP reference runs these SymPy functions on subscript-stripped strings; its
``expand_log`` *combines* logarithms (``logcombine``) and its ``logsimp`` splits them, the
inverse of their names. Here ``logsimp`` combines and ``expand_log`` splits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Optional

from ..lang import ast as A
from ..lang.checker import StmtInfo
from ..lang.parser import parse
from ..lang.printer import print_expr
from ..lang.types import expr_type, is_float
from .base import Arg, Context, Rewrite, Site, Strategy, strategy
from .rewrite import find_stmt, iter_stmts, replace_at

# SymPy (and leirc.algebra, which imports it) is loaded on first use: importing the
# strategy registry must stay cheap for clients that never run a math strategy.


def _sympy():
    import sympy

    return sympy


# ---------------------------------------------------------------------------
# shared machinery


@dataclass
class Target:
    """The expression of a statement that a math strategy may rewrite."""

    ref: str
    stmt: A.Assign
    path: tuple
    info: StmtInfo
    expr: A.Expr
    rebuild: Callable[[A.Expr], A.Assign]
    where: str  # "operand" | "right-hand side"


def accumulation(st: A.Assign) -> Optional[tuple[A.Expr, Callable[[A.Expr], A.Expr]]]:
    """(operand, rebuild) for ``X = X op e``, ``X = e op X`` (op + *), ``X = X - e``,
    ``X = X / e`` and ``max/min(X, e)`` in either order; None otherwise."""
    x, v = st.target, st.value

    def is_x(e):
        return isinstance(e, A.Access) and e.name == x.name and e.indices == x.indices

    def free(e):
        return not any(isinstance(n, A.Access) and n.name == x.name for n in A.walk(e))

    if isinstance(v, A.BinOp) and v.op in ("+", "-", "*", "/"):
        if is_x(v.lhs) and free(v.rhs):
            return v.rhs, lambda n, v=v: replace(v, rhs=n)
        if v.op in ("+", "*") and is_x(v.rhs) and free(v.lhs):
            return v.lhs, lambda n, v=v: replace(v, lhs=n)
    if isinstance(v, A.Call) and v.func in ("max", "min") and len(v.args) == 2:
        a, b = v.args
        if is_x(a) and free(b):
            return b, lambda n, v=v: replace(v, args=(v.args[0], n))
        if is_x(b) and free(a):
            return a, lambda n, v=v: replace(v, args=(n, v.args[1]))
    return None


def math_target(s: Strategy, ctx: Context, ref: str) -> Target:
    try:
        st, path = find_stmt(ctx.kernel, ref)
    except KeyError:
        refs = ", ".join(r for r, _, _ in iter_stmts(ctx.kernel))
        raise s.na(f"no statement '{ref}' (statements: {refs})") from None
    for _, n in _subexprs(st.value):
        if isinstance(n, A.BinOp) and n.op in ("//", "%") and not is_float(expr_type(n) or "f32"):
            # SymPy's identities are proven over the reals: a regrouping that moves an
            # integer floor division or modulo (``(a*b)//c`` vs ``a*(b//c)``) is no identity
            raise s.na(f"'{print_expr(n)}' is an integer floor division or modulo; the algebra strategies "
                       f"prove identities over the reals and are not applied to it", st)
    info = ctx.result.info(st)
    if info.kind in ("reduce", "update"):
        acc = accumulation(st)
        if acc is None:
            if info.kind == "reduce":
                raise s.na(f"'{ref}' is a reduction written as a chain ({print_expr(st.value)}); only X = X op e "
                           f"reductions are rewritten, so that the accumulation stays intact", st)
            return Target(ref, st, path, info, st.value, lambda n, st=st: replace(st, value=n), "right-hand side")
        operand, rb = acc
        return Target(ref, st, path, info, operand, lambda n, st=st, rb=rb: replace(st, value=rb(n)), "operand")
    return Target(ref, st, path, info, st.value, lambda n, st=st: replace(st, value=n), "right-hand side")


def parse_expr(s: Strategy, text: str, argname: str) -> A.Expr:
    """A LEIR expression from an argument string."""
    r = parse(f"Zzq^{{f32,g}}={text};")
    if not r.ok or r.module is None or len(r.module.kernels[0].body) != 1:
        msg = "; ".join(d.message for d in r.diagnostics) if r.diagnostics else "not one expression"
        raise s.na(f"argument '{argname}': cannot parse {text!r} as an expression ({msg})")
    return A.strip_spans(r.module.kernels[0].body[0].value)


def _subexprs(e: A.Expr, path=()):
    yield path, e
    if isinstance(e, A.BinOp):
        yield from _subexprs(e.lhs, path + (0,))
        yield from _subexprs(e.rhs, path + (1,))
    elif isinstance(e, A.Neg):
        yield from _subexprs(e.operand, path + (0,))
    elif isinstance(e, A.Call):
        for i, a in enumerate(e.args):
            yield from _subexprs(a, path + (i,))
    elif isinstance(e, A.Compare):
        for i, a in enumerate(e.operands):
            yield from _subexprs(a, path + (i,))


def replace_subexpr(e: A.Expr, path: tuple, new: A.Expr) -> A.Expr:
    if not path:
        return new
    i, rest = path[0], path[1:]
    if isinstance(e, A.BinOp):
        return replace(e, lhs=replace_subexpr(e.lhs, rest, new)) if i == 0 else replace(e, rhs=replace_subexpr(e.rhs, rest, new))
    if isinstance(e, A.Neg):
        return replace(e, operand=replace_subexpr(e.operand, rest, new))
    if isinstance(e, A.Call):
        args = list(e.args)
        args[i] = replace_subexpr(args[i], rest, new)
        return replace(e, args=tuple(args))
    if isinstance(e, A.Compare):
        ops = list(e.operands)
        ops[i] = replace_subexpr(ops[i], rest, new)
        return replace(e, operands=tuple(ops))
    raise ValueError("bad path")  # pragma: no cover


def locate(s: Strategy, tgt: Target, at: str, pred: Optional[Callable[[A.Expr], bool]] = None,
           what: str = "sub-expression") -> tuple[tuple, A.Expr]:
    """(path, node) of the rewritten sub-expression: ``at`` if given, else the first node
    satisfying ``pred`` (pre-order), else the whole target expression."""
    if at:
        want = parse_expr(s, at, "at")
        for path, node in _subexprs(tgt.expr):
            if node == want:
                return path, node
        raise s.na(f"'{print_expr(want)}' does not occur in the {tgt.where} of {tgt.ref} ({print_expr(tgt.expr)})", tgt.stmt)
    if pred is None:
        return (), tgt.expr
    for path, node in _subexprs(tgt.expr):
        if pred(node):
            return path, node
    raise s.na(f"the {tgt.where} of {tgt.ref} ({print_expr(tgt.expr)}) has no {what}", tgt.stmt)


def tensor_signs_of(ctx: Context):
    """Sign facts of the kernel's tensors (:func:`leirc.algebra.signs.tensor_signs`), once
    per context."""
    from ..algebra.signs import tensor_signs

    return ctx.memo("math.signs", lambda: tensor_signs(ctx.result))


def bridge_for(ctx: Context, tgt: Target):
    from ..algebra.bridge import Bridge

    ranges = {l.var: (l.start, l.start + l.extent - 1) for l in tgt.info.loops}
    return Bridge(tensor_signs_of(ctx), ranges)


def finish(s: Strategy, ctx: Context, tgt: Target, new_expr: A.Expr) -> A.Kernel:
    """The kernel with the target expression replaced; rejected (NotApplicable) if it does
    not check or the statement kind changes."""
    new_stmt = tgt.rebuild(new_expr)
    kernel = replace_at(ctx.kernel, tgt.path, new_stmt)
    res = ctx.checked(kernel)  # remembered: the engine's re-check of this kernel is free
    errs = [d for d in res.diagnostics if d.is_error]
    if errs:
        raise s.na(f"the rewritten {tgt.ref} does not check: {errs[0].code} {errs[0].message}", tgt.stmt)
    st2, _ = find_stmt(kernel, tgt.ref)
    kind2 = res.info(st2).kind
    if tgt.info.kind == "reduce" and kind2 != "reduce":
        raise s.na(f"the rewrite would turn reduction {tgt.ref} into a {kind2}", tgt.stmt)
    return kernel


def prove(s: Strategy, tgt: Target, b, old_leir: A.Expr, new_leir: A.Expr, *, allow_singular=False):
    """Check that ``new_leir`` equals ``old_leir`` (SymPy) and adds no singularity."""
    from ..algebra.bridge import NotRepresentable
    from ..algebra.prove import new_singularities, prove_equal

    try:
        old = b.to_sympy(old_leir)
        new = b.to_sympy(new_leir)
    except NotRepresentable as e:
        raise s.na(f"cannot model the expression in SymPy: {e}", tgt.stmt) from None
    if not prove_equal(old, new):
        raise s.na(f"SymPy could not prove '{print_expr(new_leir)}' equal to '{print_expr(old_leir)}'", tgt.stmt)
    if not allow_singular:
        bad = new_singularities(old, new)
        if bad:
            raise s.na(f"the rewrite would need {bad[0]} != 0 (or > 0 under a log), which is not provable", tgt.stmt)


def _cache(ctx: Context) -> dict:
    return ctx.memo("math.results", dict)


def _key(name: str, args: dict) -> tuple:
    return (name,) + tuple(sorted((k, str(v)) for k, v in args.items()))


class CachedRewrite(Strategy):
    """A strategy whose one computation (``compute``) is cached on the context, so the
    sites' probes, ``plan`` and :meth:`numerics_for` share it."""

    def compute(self, ctx: Context, args: dict) -> A.Kernel:  # pragma: no cover - abstract
        raise NotImplementedError

    def _result(self, ctx, args):
        c = _cache(ctx)
        k = _key(self.name, args)
        if k not in c:
            try:
                c[k] = ("ok", self.compute(ctx, args))
            except Exception as e:  # NotApplicable, or a SymPy failure turned into one
                from .base import NotApplicable

                if not isinstance(e, NotApplicable):
                    e = self.na(f"SymPy failed: {type(e).__name__}: {e}")
                c[k] = ("na", e)
        tag, v = c[k]
        if tag == "na":
            raise v
        return v

    def plan(self, ctx, args):
        return Rewrite(self._result(ctx, args), self.numerics_for(ctx, args))

    def numerics_for(self, ctx, args):
        return self.numerics  # a subclass may look at the (cached) result


def _sites_by_stmt(s: CachedRewrite, ctx: Context, extra: Optional[Callable] = None, limit: int = 4) -> list[Site]:
    """A site per statement where the strategy applies (with its default arguments, or
    with the argument domains ``extra(ctx, ref) -> {name: [values]}``, which a
    cursor-restricted listing defers)."""
    out = []
    for ref, st, _ in ctx.stmts():
        doms = extra(ctx, ref) if extra else {}
        if extra and not any(doms.values()):
            continue
        desc = f"{s.name} on {ref}"
        if doms and ctx.lazy:
            out.append(Site(s.name, {"stmt": ref}, description=desc,
                            resolve=lambda ref=ref, doms=doms: _good_values(s, ctx, ref, doms, limit) or
                            {k: [] for k in doms}))
            continue
        good = _good_values(s, ctx, ref, doms, limit)
        if good is not None:
            out.append(Site(s.name, {"stmt": ref}, good, desc))
    return out


def _good_values(s: CachedRewrite, ctx: Context, ref: str, doms: dict, limit: int) -> Optional[dict]:
    """The values of ``doms`` (one argument varied at a time) with which ``s`` applies to
    ``ref``, at most ``limit`` per argument; ``{}`` when it applies without them, None when
    it does not apply at all."""
    from .base import NotApplicable, parse_args

    combos = [{}] if not doms else [{k: v} for k, vs in doms.items() for v in vs]
    good: dict = {}
    for combo in combos:
        try:
            args = parse_args(s, {"stmt": ref, **combo})
            s.check(ctx, args)
        except NotApplicable:
            continue
        if not combo:
            return {}
        for k, v in combo.items():
            good.setdefault(k, []).append(v)
    if not good:
        return None
    return {k: v[:limit] for k, v in good.items()}


# ---------------------------------------------------------------------------
# SymPy rewrites of one expression


_STMT = Arg("stmt", "stmt", "statement to rewrite, e.g. N0.S0")
_AT = Arg("at", "expr", "optional: rewrite only this sub-expression (LEIR text, first occurrence)", default="")


class SympyRewrite(CachedRewrite):
    """Base: ``transform(sympy_expr, bridge, args) -> sympy_expr`` applied to the target."""

    #: "hard": max/min/if_then_else/... are atoms for the transform; "all": exp and log too
    opaque = "hard"
    #: reject results with more exp calls than the original (a transparent exp lets SymPy's
    #: polynomial machinery split exp(a - b) into exp(a)/exp(b): that is expand_powsimp)
    no_exp_growth = False
    #: only for expressions that divide by something (cancellation, apart)
    needs_fraction = False

    def transform(self, e, b, args: dict):  # pragma: no cover - abstract
        raise NotImplementedError

    def precheck(self, ctx: Context, tgt: Target, args: dict) -> None:
        """Preconditions that need the program (not only the expression); raise NotApplicable."""

    def deep(self, e, fn):
        """``fn`` applied to ``e`` with the opaque functions as atoms (arguments transformed too)."""
        from ..algebra.prove import OPAQUE_ALL, OPAQUE_HARD, deep_apply

        return deep_apply(e, fn, OPAQUE_ALL if self.opaque == "all" else OPAQUE_HARD)

    def compute(self, ctx, args):
        from ..algebra.bridge import NotRepresentable, same_tree

        tgt = math_target(self, ctx, args["stmt"])
        path, node = locate(self, tgt, args.get("at", ""))
        b = bridge_for(ctx, tgt)
        try:
            old = b.to_sympy(node)
        except NotRepresentable as e:
            raise self.na(f"cannot model the expression in SymPy: {e}", tgt.stmt) from None
        if self.needs_fraction and not _has_denominator(old):
            raise self.na(f"'{print_expr(node)}' divides by nothing; {self.name} needs a fraction", tgt.stmt)
        self.precheck(ctx, tgt, args)
        new = self.transform(old, b, args)
        if new == old:
            raise self.na(f"{self.name} does not change '{print_expr(node)}'", tgt.stmt)
        try:
            new_leir = b.from_sympy(new)
        except NotRepresentable as e:
            raise self.na(f"the result has no LEIR form: {e}", tgt.stmt) from None
        if same_tree(new_leir, node):
            raise self.na(f"{self.name} does not change '{print_expr(node)}'", tgt.stmt)
        if self.no_exp_growth:
            n_old, n_new = _count_exp(old), _count_exp(new)
            if n_new > n_old:
                raise self.na(f"{self.name} would split exponentials ({n_old} -> {n_new} exp calls); "
                              f"splitting exp(a - b) is expand_powsimp", tgt.stmt)
        prove(self, tgt, b, node, new_leir)
        return finish(self, ctx, tgt, replace_subexpr(tgt.expr, path, new_leir))

    def sites(self, ctx):
        return _sites_by_stmt(self, ctx)


def _transcendentals(e: A.Expr) -> set:
    """The exp/log/pow-like sub-expressions of ``e`` (spans stripped): the values whose
    range a rewrite can change. Powers with a literal integer exponent are products."""
    out = set()
    for n in A.walk(e):
        if isinstance(n, A.Call) and n.func in ("exp", "log", "pow", "sqrt", "rsqrt", "sigmoid", "tanh", "erf"):
            out.add(A.strip_spans(n))
        elif isinstance(n, A.BinOp) and n.op == "**" and not (isinstance(n.rhs, A.Const) and n.rhs.is_int):
            out.add(A.strip_spans(n))
    return out


def _has_denominator(e) -> bool:
    return any(x.is_Pow and x.exp.is_negative and not x.base.is_Number for x in _sympy().preorder_traversal(e))


def _count_exp(e) -> int:
    sp = _sympy()
    return sum(1 for x in sp.preorder_traversal(e) if isinstance(x, sp.exp))


def _on_symbol(s: Strategy, b, text: str, e, argname: str = "on"):
    from ..algebra.bridge import NotRepresentable

    tgt_expr = parse_expr(s, text, argname)
    try:
        x = b.to_sympy(tgt_expr)
    except NotRepresentable as err:
        raise s.na(f"argument '{argname}': {err}") from None
    if not e.has(x):
        raise s.na(f"argument '{argname}': '{print_expr(tgt_expr)}' does not occur in '{e}'")
    return x


def _access_candidates(ctx: Context, ref: str) -> list[str]:
    try:
        st, _ = find_stmt(ctx.kernel, ref)
    except KeyError:
        return []
    seen, out = set(), []
    for n in A.walk(st.value):
        if isinstance(n, A.Access) and n.name != st.target.name:
            t = print_expr(A.strip_spans(n))
            if t not in seen:
                seen.add(t)
                out.append(t)
    return out


@strategy("factorization", level="math", numerics="exact-in-reals", args=[_STMT, _AT])
class Factorization(SympyRewrite):
    """Factor a polynomial or rational expression (SymPy ``factor``): ``a*b + a*c`` -> ``a*(b + c)``.

    Function applications (``exp``, ``log``, ``max``, ``if_then_else``, ...) are atoms whose
    arguments are factored recursively, so unlike the Step-TP reference (SymPy ``sqf`` on the
    raw string, which turns ``exp(A-D)`` into ``exp(A)*exp(-D)``) exponentials are never split:
    that split is ``expand_powsimp``. Exact in the reals; fewer multiplications, but a
    factored difference can cancel catastrophically differently from the expanded one.

    Before: \\kernel k(A:f32[8],B:f32[8],C:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=A^{f32,g}_{i}*B^{f32,g}_{i}+A^{f32,g}_{i}*C^{f32,g}_{i};];}
    Args: stmt=N0.S0
    After: \\kernel k(A:f32[8],B:f32[8],C:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=A^{f32,g}_{i}*(B^{f32,g}_{i}+C^{f32,g}_{i});];}
    """

    opaque = "all"

    def transform(self, e, b, args):
        sp = _sympy()
        return self.deep(e, sp.factor)


@strategy("expand_factorization", level="math", numerics="approximate", args=[_STMT, _AT])
class ExpandFactorization(SympyRewrite):
    """Multiply out products and integer powers of sums (SymPy ``expand``, the inverse of factorization).

    ``(x - g)**2`` -> ``x**2 - 2*x*g + g**2``. Exponentials and logarithms are not split
    (``expand_powsimp``/``expand_log`` do that). Exact in the reals but approximate in
    floating point: the expanded form can lose all significant digits to cancellation (the
    reference's LayerNorm variance ``A**2 - 2*A*G + G**2`` is the textbook example), and
    the squares overflow where the difference did not; more operations are executed.

    Before: \\kernel k(X:f32[8],M:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=(X^{f32,g}_{i}-M^{f32,g}_{i})**2;];}
    Args: stmt=N0.S0
    After: \\kernel k(X:f32[8],M:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=M^{f32,g}_{i}**2-2*M^{f32,g}_{i}*X^{f32,g}_{i}+X^{f32,g}_{i}**2;];}
    """

    opaque = "all"

    def transform(self, e, b, args):
        sp = _sympy()
        return self.deep(e, lambda x: sp.expand(x, power_exp=False, power_base=False, log=False))


@strategy("cancellation", level="math", numerics="approximate", args=[_STMT, _AT])
class Cancellation(SympyRewrite):
    """Write a rational expression as one fraction p/q with common factors cancelled (SymPy ``cancel``).

    ``exp`` is transparent, so ``(exp(x) - exp(-x))/(exp(x) + exp(-x))`` becomes
    ``(exp(2*x) - 1)/(exp(2*x) + 1)`` as in the reference. Where the original divides by
    zero the result may be defined (a cancelled factor's zeros disappear). Approximate when
    the result has an exponential, logarithm or power the original does not: the example
    overflows for x > 44 in f32 (``exp(2*x)``) where the original did not; otherwise (plain
    polynomial cancellation such as the one below) exact-in-reals.

    Before: \\kernel k(X:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=(X^{f32,g}_{i}**2-1)/(X^{f32,g}_{i}+1);];}
    Args: stmt=N0.S0
    After: \\kernel k(X:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=X^{f32,g}_{i}-1;];}
    """

    no_exp_growth = True
    needs_fraction = True

    def transform(self, e, b, args):
        sp = _sympy()
        return self.deep(e, sp.cancel)

    def numerics_for(self, ctx, args):
        new = self._result(ctx, args)
        ref = args["stmt"]
        before = _transcendentals(find_stmt(ctx.kernel, ref)[0].value)
        after = _transcendentals(find_stmt(new, ref)[0].value)
        return "exact-in-reals" if after <= before else "approximate"


@strategy("expand_cancellation", level="math", numerics="approximate",
          args=[_STMT, Arg("z", "expr", "factor to multiply numerator and denominator by; must be provably non-zero"), _AT])
class ExpandCancellation(SympyRewrite):
    """Multiply numerator and denominator of a fraction by a non-zero ``z`` and expand (the inverse of cancellation).

    ``(exp(2*x) - 1)/(exp(2*x) + 1)`` with ``z=exp(-x)`` -> ``(exp(x) - exp(-x))/(exp(x) + exp(-x))``.
    ``z`` must be provably non-zero (an ``exp``, a positive constant, a tensor the sign
    analysis proves positive) and finite (as for ``additive_split``: no tensor that may
    hold ``-inf`` padding); otherwise the rewrite is rejected. Exact in the reals,
    approximate in floating point: numerator and denominator are scaled by ``z`` and
    overflow or underflow where the original did not.

    Before: \\kernel k(X:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=(exp(2*X^{f32,g}_{i})-1)/(exp(2*X^{f32,g}_{i})+1);];}
    Args: stmt=N0.S0 z=exp(-X^{f32,g}_{i})
    After: \\kernel k(X:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=(exp(X^{f32,g}_{i})-exp(-X^{f32,g}_{i}))/(exp(X^{f32,g}_{i})+exp(-X^{f32,g}_{i}));];}
    """

    def precheck(self, ctx, tgt, args):
        require_finite(self, ctx, tgt, parse_expr(self, args["z"], "z"),
                       "multiplying numerator and denominator by an infinite z gives inf/inf = NaN",
                       claim="finite and non-zero")

    def transform(self, e, b, args):
        sp = _sympy()
        from ..algebra.bridge import NotRepresentable
        from ..algebra.prove import is_nonzero

        z_leir = parse_expr(self, args["z"], "z")
        try:
            z = b.to_sympy(z_leir)
        except NotRepresentable as err:
            raise self.na(f"argument 'z': {err}") from None
        if not is_nonzero(z) or z.is_finite is not True:
            raise self.na(f"argument 'z': cannot prove '{print_expr(z_leir)}' is finite and non-zero")
        p, q = sp.fraction(sp.together(e))
        if q == 1:
            raise self.na(f"'{e}' is not a fraction")

        def mul_out(x):
            return sp.expand(sp.powsimp(sp.expand(x * z)))

        return sp.Mul(mul_out(p), sp.Pow(mul_out(q), -1), evaluate=False)


@strategy("apart", level="math", numerics="approximate",
          args=[_STMT, Arg("on", "expr", "variable (access or index) of the partial fraction decomposition; "
                                         "optional when the expression has one", default=""), _AT])
class Apart(SympyRewrite):
    """Split a fraction into a sum of simpler fractions in one variable (SymPy ``apart``; the inverse of together).

    ``(d*(a-g) + e*s)/s`` on ``d`` -> ``d*(a-g)/s + e``. The denominators of the result
    divide the original's, so it is defined wherever the original is. Exact in the reals,
    approximate in floating point: the separate fractions can cancel catastrophically
    (``1/(x*(x+1))`` -> ``1/x - 1/(x+1)`` loses every digit for large x); more divisions
    are executed.

    Before: \\kernel k(A:f32[8],D:f32[8],E:f32[8],S:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=(D^{f32,g}_{i}*A^{f32,g}_{i}+E^{f32,g}_{i}*S^{f32,g}_{i})/S^{f32,g}_{i};];}
    Args: stmt=N0.S0 on=D^{f32,g}_{i}
    After: \\kernel k(A:f32[8],D:f32[8],E:f32[8],S:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=A^{f32,g}_{i}*D^{f32,g}_{i}/S^{f32,g}_{i}+E^{f32,g}_{i};];}
    """

    opaque = "all"
    needs_fraction = True

    def transform(self, e, b, args):
        sp = _sympy()
        if args.get("on"):
            x = _on_symbol(self, b, args["on"], e)
            return self.deep(e, lambda t: sp.apart(t, x))
        syms = sorted(e.free_symbols, key=str)
        if len(syms) != 1:
            raise self.na(f"'{e}' has several variables; give 'on' (one of {', '.join(map(str, syms))})")
        return self.deep(e, sp.apart)

    def sites(self, ctx):
        return _sites_by_stmt(self, ctx, lambda c, r: {"on": _access_candidates(c, r)})


@strategy("together", level="math", numerics="approximate", args=[_STMT, _AT])
class Together(SympyRewrite):
    """Bring a sum of fractions over one common denominator (SymPy ``together``).

    ``d*(a-g)/s + e`` -> ``(d*(a-g) + e*s)/s`` (the reference's LayerNorm output). The new
    denominator is a product of the old ones. Exact in the reals, approximate in floating
    point: the product of denominators can overflow or underflow where the separate
    fractions did not.

    Before: \\kernel k(A:f32[8],D:f32[8],E:f32[8],S:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=D^{f32,g}_{i}*A^{f32,g}_{i}/S^{f32,g}_{i}+E^{f32,g}_{i};];}
    Args: stmt=N0.S0
    After: \\kernel k(A:f32[8],D:f32[8],E:f32[8],S:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=(A^{f32,g}_{i}*D^{f32,g}_{i}+E^{f32,g}_{i}*S^{f32,g}_{i})/S^{f32,g}_{i};];}
    """

    no_exp_growth = True

    def transform(self, e, b, args):
        sp = _sympy()
        return self.deep(e, sp.together)


@strategy("powsimp", level="math", numerics="exact-in-reals", args=[_STMT, _AT])
class Powsimp(SympyRewrite):
    """Combine powers with a common base or exponent (SymPy ``powsimp``): ``exp(a)*exp(b)`` -> ``exp(a + b)``.

    Combinations that need positivity (``x**a*y**a`` -> ``(x*y)**a``) happen only when
    the signs are proven. Exact in the reals; usually removes overflow (``exp(A)*exp(-D)``
    -> ``exp(A - D)``), fewer transcendental calls.

    Before: \\kernel k(A:f32[8],D:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=exp(A^{f32,g}_{i})*exp(-D^{f32,g}_{i});];}
    Args: stmt=N0.S0
    After: \\kernel k(A:f32[8],D:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=exp(A^{f32,g}_{i}-D^{f32,g}_{i});];}
    """

    def transform(self, e, b, args):
        sp = _sympy()
        return self.deep(e, lambda x: sp.powsimp(x, deep=True))


@strategy("expand_powsimp", level="math", numerics="approximate", args=[_STMT, _AT])
class ExpandPowsimp(SympyRewrite):
    """Split powers of sums and products (the inverse of powsimp): ``exp(a - b)`` -> ``exp(a)*exp(-b)``.

    This is what the Step-TP reference's ``factorization`` produced on softmax. Splits of
    ``(x*y)**a`` need positivity and happen only when proven. Exact in the reals,
    approximate in floating point: ``exp(a)`` overflows (a > 88 in f32) where
    ``exp(a - b)`` did not, so a softmax ``exp(x - max)`` rewritten to
    ``exp(x)*exp(-max)`` is inf*0 = NaN at logits of about 90.

    Before: \\kernel k(A:f32[8],D:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=exp(A^{f32,g}_{i}-D^{f32,g}_{i});];}
    Args: stmt=N0.S0
    After: \\kernel k(A:f32[8],D:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=exp(A^{f32,g}_{i})*exp(-D^{f32,g}_{i});];}
    """

    def transform(self, e, b, args):
        sp = _sympy()
        return self.deep(e, lambda x: sp.expand(x, deep=True, power_exp=True, power_base=True, mul=False,
                                                multinomial=False, log=False, basic=False))


@strategy("logsimp", level="math", numerics="approximate", args=[_STMT, _AT])
class Logsimp(SympyRewrite):
    """Combine logarithms (SymPy ``logcombine``): ``log(a) + log(b)`` -> ``log(a*b)``.

    Only where the arguments are provably positive (``force=False``). The Step-TP reference
    names this rewrite ``expand_log`` and its inverse ``logsimp``, the opposite of what the
    names say; leirc uses the names in their plain meaning. Exact in the reals,
    approximate in floating point: the product inside the log can overflow or underflow
    where the separate logs did not.

    Before: \\kernel k(A:f32[4,8])->(Y:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[E^{f32,g}_{i}=E^{f32,g}_{i}+exp(A^{f32,g}_{i,j});];L^{4}_{i=0}L^{8}_{j=0}[Y^{f32,g}_{i,j}=log(E^{f32,g}_{i})-log(exp(A^{f32,g}_{i,j})+1);];}
    Args: stmt=N1.S0
    After: \\kernel k(A:f32[4,8])->(Y:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[E^{f32,g}_{i}=E^{f32,g}_{i}+exp(A^{f32,g}_{i,j});];L^{4}_{i=0}L^{8}_{j=0}[Y^{f32,g}_{i,j}=log(E^{f32,g}_{i}/(exp(A^{f32,g}_{i,j})+1));];}
    """

    def transform(self, e, b, args):
        sp = _sympy()
        return self.deep(e, lambda x: sp.logcombine(x, force=False))


@strategy("expand_log", level="math", numerics="exact-in-reals", args=[_STMT, _AT])
class ExpandLog(SympyRewrite):
    """Split logarithms of products and powers (SymPy ``expand_log``): ``log(a*b)`` -> ``log(a) + log(b)``.

    Only where the arguments are provably positive (``force=False``); ``log(exp(x))`` becomes
    ``x``. The Step-TP reference's ``expand_log`` does the opposite (it calls
    ``logcombine``); this is the direction the name says. Exact in the reals; avoids
    overflow of the product inside the log.

    Before: \\kernel k(A:f32[4,8])->(Y:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[E^{f32,g}_{i}=E^{f32,g}_{i}+exp(A^{f32,g}_{i,j});];L^{4}_{i=0}L^{8}_{j=0}[Y^{f32,g}_{i,j}=log(exp(A^{f32,g}_{i,j})*E^{f32,g}_{i});];}
    Args: stmt=N1.S0
    After: \\kernel k(A:f32[4,8])->(Y:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[E^{f32,g}_{i}=E^{f32,g}_{i}+exp(A^{f32,g}_{i,j});];L^{4}_{i=0}L^{8}_{j=0}[Y^{f32,g}_{i,j}=A^{f32,g}_{i,j}+log(E^{f32,g}_{i});];}
    """

    def transform(self, e, b, args):
        sp = _sympy()
        return self.deep(e, lambda x: sp.expand_log(x, deep=True, force=False))


@strategy("collect", level="math", numerics="exact-in-reals",
          args=[_STMT, Arg("on", "expr", "the common factor to collect (LEIR text, e.g. an access)"), _AT])
class Collect(SympyRewrite):
    """Collect the terms of a sum that share a factor (SymPy ``collect``): ``a*x + b*x`` -> ``(a + b)*x``.

    Exact in the reals; one multiplication instead of several, but the sum is rounded
    before the product.

    Before: \\kernel k(D:f32[8],J:f32[8],E:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=D^{f32,g}_{i}*J^{f32,g}_{i}+E^{f32,g}_{i}*J^{f32,g}_{i};];}
    Args: stmt=N0.S0 on=J^{f32,g}_{i}
    After: \\kernel k(D:f32[8],J:f32[8],E:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=J^{f32,g}_{i}*(D^{f32,g}_{i}+E^{f32,g}_{i});];}
    """

    def transform(self, e, b, args):
        sp = _sympy()
        x = _on_symbol(self, b, args["on"], e)
        return sp.collect(e, x)

    def sites(self, ctx):
        return _sites_by_stmt(self, ctx, lambda c, r: {"on": _access_candidates(c, r)})


@strategy("expand_collect", level="math", numerics="exact-in-reals",
          args=[_STMT, Arg("on", "expr", "the collected factor to distribute (LEIR text)"), _AT])
class ExpandCollect(SympyRewrite):
    """Distribute a collected factor over its coefficient sum (the inverse of collect): ``(a + b)*x`` -> ``a*x + b*x``.

    Only the terms that contain ``on`` are multiplied out. Exact in the reals; more
    multiplications.

    Before: \\kernel k(D:f32[8],J:f32[8],E:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=(D^{f32,g}_{i}+E^{f32,g}_{i})*J^{f32,g}_{i};];}
    Args: stmt=N0.S0 on=J^{f32,g}_{i}
    After: \\kernel k(D:f32[8],J:f32[8],E:f32[8])->(Y:f32[8]){L^{8}_{i=0}[Y^{f32,g}_{i}=D^{f32,g}_{i}*J^{f32,g}_{i}+E^{f32,g}_{i}*J^{f32,g}_{i};];}
    """

    def transform(self, e, b, args):
        sp = _sympy()
        x = _on_symbol(self, b, args["on"], e)
        return sp.Add(*[sp.expand_mul(t, deep=False) if t.has(x) else t for t in sp.Add.make_args(e)])

    def sites(self, ctx):
        return _sites_by_stmt(self, ctx, lambda c, r: {"on": _access_candidates(c, r)})


# ---------------------------------------------------------------------------
# splits that introduce an existing value z (built on the LEIR tree, proven in SymPy)


def finite_tensors(ctx: Context) -> set:
    """Tensors proven finite in real arithmetic (:func:`leirc.algebra.signs.tensor_finite`),
    cached on the context."""
    from ..algebra.signs import tensor_finite

    return ctx.memo("math.finite", lambda: tensor_finite(ctx.result, tensor_signs_of(ctx)))


def require_finite(s: Strategy, ctx: Context, tgt: Target, z: A.Expr, what: str, claim: str = "finite") -> None:
    """NotApplicable unless ``z`` is provably finite: built from finite literals, kernel
    inputs (real numbers by the exact-in-reals contract) and tensors whose every write is
    finite, with divisions and logarithms only where the divisor or argument is provably
    non-zero or positive. ``-inf`` padding, or a tensor that may hold it, is rejected."""
    from ..algebra.bridge import Bridge, NotRepresentable
    from ..algebra.signs import is_finite_real

    fin = finite_tensors(ctx)
    ranges = {l.var: (l.start, l.start + l.extent - 1) for l in tgt.info.loops}
    try:
        zs = Bridge(tensor_signs_of(ctx), ranges, fin).to_sympy(z)
    except NotRepresentable as e:
        raise s.na(f"argument 'z': {e}") from None
    if not is_finite_real(zs):
        maybe_inf = sorted({a.name for a in A.walk(z) if isinstance(a, A.Access) and a.name not in fin})
        why = (f"'{', '.join(maybe_inf)}' may hold an infinity (an inf literal, a division or log it cannot "
               f"prove safe)" if maybe_inf else "the value may be infinite or NaN")
        raise s.na(f"argument 'z': cannot prove '{print_expr(z)}' is {claim}: {why}; {what}", tgt.stmt)


def _z_arg(s: Strategy, ctx: Context, tgt: Target, b, text: str, what: str):
    from ..algebra.bridge import NotRepresentable

    z = parse_expr(s, text, "z")
    try:
        zs = b.to_sympy(z)
    except NotRepresentable as e:
        raise s.na(f"argument 'z': {e}") from None
    require_finite(s, ctx, tgt, z, what)
    return z, zs


def _split_z_candidates(ctx: Context, ref: str, previous: bool = True) -> list[str]:
    """Accesses of the statement, plus (``previous``) the reference's favourite: the
    previous element along the innermost loop, guarded, ``if_then_else(j-1<0,0,A_{i,j-1})``."""
    out = _access_candidates(ctx, ref)
    if not previous:
        return out
    st, path = find_stmt(ctx.kernel, ref)
    loops = ctx.result.info(st).loops
    if not loops or loops[-1].start != 0:
        return out
    v = loops[-1].var
    for n in A.walk(st.value):
        if isinstance(n, A.Access) and n.name != st.target.name and n.indices and n.indices[-1] == A.Var(v):
            prev = replace(A.strip_spans(n), indices=n.indices[:-1] + (A.BinOp("-", A.Var(v), A.Const(1)),))
            guard = A.Compare(("<",), (A.BinOp("-", A.Var(v), A.Const(1)), A.Const(0)))
            t = print_expr(A.Call("if_then_else", (guard, A.Const(0), prev)))
            if t not in out:
                out.append(t)
    return out


_Z = Arg("z", "expr", "the value to introduce (LEIR text, e.g. an access such as D^{f32,g}_{i})")


@strategy("exponential_split", level="math", numerics="approximate", args=[_STMT, _Z, _AT])
class ExponentialSplit(CachedRewrite):
    """Split ``exp(x - y)`` into ``exp(x - z)*exp(z - y)`` around a value ``z`` (``exp(u)`` -> ``exp(u - z)*exp(z)``).

    The building block of the online-softmax rescaling: with ``z`` the running maximum,
    ``exp(x - m_new) = exp(x - m_old)*exp(m_old - m_new)``. ``at`` selects the ``exp`` call
    (default: the first one); ``z`` must be finite and must differ from ``x`` and ``y`` (the
    reference's degenerate ``exp(A-D)*exp(D-D)`` is rejected); "finite" is proved as for
    ``additive_split``. Exact in the reals, approximate in floating point: either factor
    can overflow although the product would not.

    Before: \\kernel k(A:f32[4,8],D:f32[4],M:f32[4])->(Y:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[Y^{f32,g}_{i,j}=exp(A^{f32,g}_{i,j}-D^{f32,g}_{i});];}
    Args: stmt=N0.S0 z=M^{f32,g}_{i}
    After: \\kernel k(A:f32[4,8],D:f32[4],M:f32[4])->(Y:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[Y^{f32,g}_{i,j}=exp(A^{f32,g}_{i,j}-M^{f32,g}_{i})*exp(M^{f32,g}_{i}-D^{f32,g}_{i});];}
    """

    def compute(self, ctx, args):
        tgt = math_target(self, ctx, args["stmt"])
        path, node = locate(self, tgt, args.get("at", ""), lambda n: isinstance(n, A.Call) and n.func == "exp",
                            "exp(...) call")
        if not (isinstance(node, A.Call) and node.func == "exp"):
            raise self.na(f"'{print_expr(node)}' is not an exp(...) call", tgt.stmt)
        b = bridge_for(ctx, tgt)
        z, _ = _z_arg(self, ctx, tgt, b, args["z"], "an infinite z gives exp(inf)*exp(-inf) = inf*0 = NaN")
        u = node.args[0]
        if isinstance(u, A.BinOp) and u.op == "-":
            x, y = u.lhs, u.rhs
            if z == x or z == y:
                raise self.na(f"z = '{print_expr(z)}' is a side of '{print_expr(u)}'; the split would multiply by exp(0)", tgt.stmt)
            new = A.BinOp("*", A.Call("exp", (A.BinOp("-", x, z),)), A.Call("exp", (A.BinOp("-", z, y),)))
        else:
            if z == u:
                raise self.na(f"z = '{print_expr(z)}' is the whole exponent; the split would multiply by exp(0)", tgt.stmt)
            new = A.BinOp("*", A.Call("exp", (A.BinOp("-", u, z),)), A.Call("exp", (z,)))
        prove(self, tgt, b, node, new)
        return finish(self, ctx, tgt, replace_subexpr(tgt.expr, path, new))

    def sites(self, ctx):
        return _sites_by_stmt(self, ctx, lambda c, r: {"z": _split_z_candidates(c, r)})


@strategy("multiplicative_split", level="math", numerics="approximate", args=[_STMT, _Z, _AT])
class MultiplicativeSplit(CachedRewrite):
    """Rewrite ``x`` as ``x/z*z`` for a value ``z`` that is provably non-zero.

    A rescaling step (divide by one normalizer, multiply by another) used by streaming
    rewrites. ``z = 0`` would turn x into NaN, so ``z`` must be provably non-zero under the
    sign facts of :mod:`leirc.algebra.signs` (an ``exp(...)``, a positive literal, a sum of
    exponentials, ...); the reference accepts any neighbour value (``x/F_{tx-1}*F_{tx-1}``),
    which is NaN wherever it is 0. ``z`` must also be provably finite (as for
    ``additive_split``). ``at`` selects x (default: the whole operand or right-hand side).
    Exact in the reals, approximate in floating point: ``x/z`` can overflow or underflow.

    Before: \\kernel k(A:f32[4,8])->(Y:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[E^{f32,g}_{i}=E^{f32,g}_{i}+exp(A^{f32,g}_{i,j});];L^{4}_{i=0}L^{8}_{j=0}[Y^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];}
    Args: stmt=N1.S0 z=E^{f32,g}_{i}
    After: \\kernel k(A:f32[4,8])->(Y:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[E^{f32,g}_{i}=E^{f32,g}_{i}+exp(A^{f32,g}_{i,j});];L^{4}_{i=0}L^{8}_{j=0}[Y^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2/E^{f32,g}_{i}*E^{f32,g}_{i};];}
    """

    def compute(self, ctx, args):
        tgt = math_target(self, ctx, args["stmt"])
        path, node = locate(self, tgt, args.get("at", ""))
        b = bridge_for(ctx, tgt)
        from ..algebra.prove import is_nonzero

        z, zs = _z_arg(self, ctx, tgt, b, args["z"], "an infinite z gives x/inf*inf = 0*inf = NaN")
        if not is_nonzero(zs):
            raise self.na(f"cannot prove z = '{print_expr(z)}' is non-zero (x/z*z is NaN where z = 0)", tgt.stmt)
        new = A.BinOp("*", A.BinOp("/", node, z), z)
        prove(self, tgt, b, node, new)
        return finish(self, ctx, tgt, replace_subexpr(tgt.expr, path, new))

    def sites(self, ctx):
        return _sites_by_stmt(self, ctx, lambda c, r: {"z": _split_z_candidates(c, r, previous=False)})


@strategy("additive_split", level="math", numerics="approximate", args=[_STMT, _Z, _AT])
class AdditiveSplit(CachedRewrite):
    """Rewrite ``x`` as ``x + z - z`` for a finite value ``z``.

    A re-association step: later rewrites (collect, cancellation, fusion) can pair ``x + z``
    and ``-z`` with other terms. ``z`` must be provably finite (``inf - inf`` is NaN):
    built from finite literals, kernel inputs (real numbers, the exact-in-reals reading) and
    intermediates whose every write is finite (:func:`leirc.algebra.signs.tensor_finite`),
    dividing only by what is provably non-zero; a ``-inf`` padded tensor (max pooling) or
    anything read from it is rejected. For a reduction only the operand changes
    (``S = S + (x + z - z)``), so the accumulation keeps its form. ``at`` selects x
    (default: the whole operand or right-hand side). Exact in the reals, approximate in
    floating point: ``x + z`` rounds to the precision of ``z`` (every digit of x is lost
    when ``|z|`` is much larger) and can overflow before ``z`` is subtracted.

    Before: \\kernel k(A:f32[4,8],G:f32[4])->(S:f32[4]){L^{4}_{i=0}L^{8}_{j=0}[S^{f32,g}_{i}=S^{f32,g}_{i}+A^{f32,g}_{i,j};];}
    Args: stmt=N0.S0 z=G^{f32,g}_{i}
    After: \\kernel k(A:f32[4,8],G:f32[4])->(S:f32[4]){L^{4}_{i=0}L^{8}_{j=0}[S^{f32,g}_{i}=S^{f32,g}_{i}+(A^{f32,g}_{i,j}+G^{f32,g}_{i}-G^{f32,g}_{i});];}
    """

    def compute(self, ctx, args):
        tgt = math_target(self, ctx, args["stmt"])
        path, node = locate(self, tgt, args.get("at", ""))
        b = bridge_for(ctx, tgt)
        z, _ = _z_arg(self, ctx, tgt, b, args["z"], "an infinite z gives x + inf - inf = NaN")
        new = A.BinOp("-", A.BinOp("+", node, z), z)
        prove(self, tgt, b, node, new)
        return finish(self, ctx, tgt, replace_subexpr(tgt.expr, path, new))

    def sites(self, ctx):
        return _sites_by_stmt(self, ctx, lambda c, r: {"z": _split_z_candidates(c, r)})
