"""Deterministic random inputs for a kernel.

Distributions (floats; drawn in float64 and rounded to the input's dtype):

* ``uniform`` U[0,1) (KernelBench's ``torch.rand``), ``normal`` N(0,1), ``signed`` U[-1,1),
  ``large`` N(0,1)*1e3, ``small`` N(0,1)*1e-3 -- the *grid* distributions;
* ``logits`` U[-100,100): softmax-scale logits, where ``exp(x)`` overflows f32 (a rewrite
  such as ``exp(x)*exp(-max)`` breaks there while ``exp(x - max)`` does not);
* ``mixed`` random sign times 10^U(-3,3) (10^U(-2,2) for f16/bf16): every tensor spans
  several orders of magnitude, so elements far below max|x| matter;
* ``zeros`` N(0,1) with a quarter of the elements (and the first row) exactly zero,
  some of them -0.0;
* ``special`` N(0,1) with zeros sprinkled in: the base of the special-value probe, into
  which :mod:`leirc.verify` injects -inf/+inf/NaN where the reference stays finite
  (:func:`inject_special`);
* ``range`` the whole space at a *level* (``random_inputs(..., level=L)``, L = 0 widest):
  floats are random sign x 10^U(-E, E) with E the dtype's largest decimal exponent divided
  by 2^L (f32: 1e-38 .. 1e38 at level 0, 1e-19 .. 1e19 at level 1, ...), with zeros;
  integers spread over the dtype's full range at level 0 (log-uniform magnitudes, both
  signs) and over its low ``bits >> L`` bits at level L, one element in eight a boundary
  value (0, 1, -1, min, min+1, max-1, max of that range). :mod:`leirc.verify` tries the
  levels from 0 on and keeps the first where the reference is defined (no signed overflow)
  and finite: "as wide as the program allows";
* ``branches`` N(0,1) (small integers) plus, for every comparison of an input-derived value
  with a constant or another input (``>``, ``<``, ``==``, ``max``/``min``, the conditions of
  ``if_then_else``; see :func:`branch_points`), elements exactly at the threshold, one ulp
  on either side and far on either side, and elements of two compared inputs set equal.

Every float input is drawn inside its *domain* (:func:`infer_domains`): an input that is the
argument of ``log``/``sqrt``/``rsqrt`` or the base of a ``pow`` with a non-integer exponent
is drawn positive, a divisor is drawn away from zero, and a domain given explicitly as
``(lo, hi)`` is drawn inside the open interval.

Integer inputs that the program uses as subscripts (``H_{C_{i}}``) are drawn from the range
that keeps every such use in bounds: for a subscript ``C`` (or ``C + k``/``C - k``) of a
dimension with extent n the range is [0, n) (shifted by -k/+k), intersected over all uses.
Other integer inputs are small: [0, 16) for ``uniform`` and unsigned types, [-8, 8] otherwise
(the ``range`` and ``branches`` probes go beyond; an integer input used as a divisor never
draws 0 there). Booleans are fair coin flips. Inputs are drawn in signature order from
``numpy.random.default_rng(seed)``, so the same (kernel, seed, dist, domains) gives the
same arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..lang import ast as A
from . import dtypes as D

#: grid distributions (the ``verify --dists`` of earlier releases)
GRID_DISTS = ("uniform", "normal", "signed", "large", "small")
#: probe distributions: the regions where numerical rewrites and special-value semantics break
PROBE_DISTS = ("logits", "mixed", "zeros", "special", "range", "branches")
#: levels of the ``range`` probe (0: the dtype's whole range; each level halves the exponent span)
RANGE_LEVELS = 5
DISTS = GRID_DISTS + PROBE_DISTS

#: typical magnitude of each distribution (the floor kept away from a domain's open bound
#: is 1e-3 of it)
_SCALE = {"uniform": 1.0, "normal": 1.0, "signed": 1.0, "large": 1e3, "small": 1e-3, "logits": 100.0,
          "mixed": 1e-3, "zeros": 1.0, "special": 1.0, "range": 1.0, "branches": 1.0}


@dataclass(frozen=True)
class Domain:
    """Values an input may take: the open interval (lo, hi), and not 0 if ``nonzero``."""

    lo: float = -math.inf
    hi: float = math.inf
    nonzero: bool = False
    why: str = ""

    def __and__(self, other: "Domain") -> "Domain":
        why = "; ".join(w for w in (self.why, other.why) if w)
        return Domain(max(self.lo, other.lo), min(self.hi, other.hi), self.nonzero or other.nonzero, why)

    @property
    def excludes_zero(self) -> bool:
        return self.nonzero or self.lo >= 0 or self.hi <= 0

    def contains(self, v: float) -> bool:
        if math.isnan(v):
            return self.lo == -math.inf and self.hi == math.inf and not self.nonzero
        if v == 0 and self.nonzero:
            return False
        if math.isinf(v):  # an infinite bound admits the infinity (e.g. -inf padding)
            return (v < 0 and self.lo == -math.inf) or (v > 0 and self.hi == math.inf)
        return self.lo < v < self.hi


POSITIVE = Domain(0.0, math.inf)
NONZERO = Domain(nonzero=True)


def _shapes(kernel: A.Kernel) -> dict:
    shapes = {p.name: tuple(p.shape) for p in kernel.inputs + kernel.outputs}
    try:
        from ..lang.checker import check_kernel

        r = check_kernel(kernel)
        for n, t in r.tensors.items():
            if t.shape is not None:
                shapes.setdefault(n, tuple(t.shape))
    except Exception:  # pragma: no cover - the checker never raises on bad programs
        pass
    return shapes


def _offset_of(e: A.Expr, name: str) -> Optional[int]:
    """k if ``e`` is ``name_{...} + k`` (k may be negative or 0), else None."""
    if isinstance(e, A.Access) and e.name == name:
        return 0
    if isinstance(e, A.BinOp) and e.op in ("+", "-"):
        if isinstance(e.rhs, A.Const) and e.rhs.is_int:
            k = _offset_of(e.lhs, name)
            if k is not None:
                return k + (e.rhs.value if e.op == "+" else -e.rhs.value)
        if e.op == "+" and isinstance(e.lhs, A.Const) and e.lhs.is_int:
            k = _offset_of(e.rhs, name)
            if k is not None:
                return k + e.lhs.value
    return None


def index_ranges(kernel: A.Kernel) -> dict:
    """name -> (lo, hi) half-open range that keeps the subscript uses of each integer input
    in bounds (only inputs used inside subscripts appear)."""
    shapes = _shapes(kernel)
    int_inputs = {p.name for p in kernel.inputs if p.dtype in A.INT_DTYPES}
    ranges: dict = {}
    for node in A.walk(kernel):
        if not isinstance(node, A.Access):
            continue
        shape = shapes.get(node.name)
        if shape is None or len(shape) != len(node.indices):
            continue
        for d, idx in enumerate(node.indices):
            for sub in A.walk(idx):
                if isinstance(sub, A.Access) and sub.name in int_inputs:
                    k = _offset_of(idx, sub.name)
                    n = shape[d]
                    lo, hi = (0 - k, n - k) if k is not None else (0, n)
                    old = ranges.get(sub.name)
                    ranges[sub.name] = (lo, hi) if old is None else (max(old[0], lo), min(old[1], hi))
    return {n: (lo, hi) if hi > lo else (0, 1) for n, (lo, hi) in ranges.items()}


# ---------------------------------------------------------------------------
# domains


def _const_value(e: A.Expr) -> Optional[float]:
    if isinstance(e, A.Const):
        return float(e.value)
    if isinstance(e, A.Neg):
        v = _const_value(e.operand)
        return None if v is None else -v
    return None


def const_value(e: A.Expr) -> Optional[float]:
    """The value of a constant expression (a literal, possibly negated), else None."""
    return _const_value(e)


def _direct(e: A.Expr) -> Optional[str]:
    """The tensor whose sign decides the sign of ``e``: ``X``, a float cast of ``X``,
    ``X + c``/``c + X`` with c >= 0, ``X * c``/``X / c`` with c > 0 -- a positive X keeps
    e positive there -- else None."""
    while True:
        if isinstance(e, A.Access):
            return e.name
        if isinstance(e, A.Call) and e.func in A.FLOAT_DTYPES and len(e.args) == 1:
            e = e.args[0]
            continue
        if isinstance(e, A.BinOp) and e.op in ("+", "*", "/"):
            cr, cl = _const_value(e.rhs), _const_value(e.lhs)
            if e.op == "+" and cr is not None and cr >= 0:
                e = e.lhs
                continue
            if e.op == "+" and cl is not None and cl >= 0:
                e = e.rhs
                continue
            if e.op in ("*", "/") and cr is not None and cr > 0:
                e = e.lhs
                continue
            if e.op == "*" and cl is not None and cl > 0:
                e = e.rhs
                continue
        return None


def _copies(kernel: A.Kernel, inputs: set) -> dict:
    """Intermediates that are plain copies of one input (``T_{..} = X_{..}``, their only
    writer): a domain required of T is required of X."""
    writers: dict = {}
    for node in A.walk(kernel):
        if isinstance(node, A.Assign):
            writers.setdefault(node.target.name, []).append(node)
    out = {}
    for name, ws in writers.items():
        if name in inputs or len(ws) != 1:
            continue
        src = ws[0].value
        while isinstance(src, A.Call) and src.func in A.FLOAT_DTYPES and len(src.args) == 1:
            src = src.args[0]
        if isinstance(src, A.Access) and src.name in inputs:
            out[name] = src.name
    return out


def infer_domains(kernel: A.Kernel) -> dict:
    """name -> :class:`Domain` for the float inputs whose uses restrict them: the argument of
    ``log``/``sqrt``/``rsqrt`` and the base of ``pow``/``**`` with a non-integer or
    non-constant exponent must be positive; a divisor (``/``, ``//``, ``%``) must not be 0.
    Only uses where the input decides the sign of the operand (see :func:`_direct`) count;
    inputs without such uses are unrestricted (absent from the result)."""
    floats = {p.name for p in kernel.inputs if p.dtype in A.FLOAT_DTYPES}
    alias = _copies(kernel, floats)
    out: dict = {}

    def need(e: A.Expr, dom: Domain, why: str) -> None:
        n = _direct(e)
        n = alias.get(n, n)
        if n in floats:
            d = Domain(dom.lo, dom.hi, dom.nonzero, why)
            out[n] = d if n not in out else out[n] & d

    for node in A.walk(kernel):
        if isinstance(node, A.Call):
            if node.func in ("log", "sqrt", "rsqrt") and node.args:
                need(node.args[0], POSITIVE, f"argument of {node.func}")
            elif node.func == "pow" and len(node.args) == 2:
                c = _const_value(node.args[1])
                if c is None or c != int(c):
                    need(node.args[0], POSITIVE, "base of pow with a non-integer exponent")
                elif c < 0:
                    need(node.args[0], NONZERO, "base of pow with a negative exponent")
        elif isinstance(node, A.BinOp):
            if node.op in ("/", "//", "%"):
                need(node.rhs, NONZERO, f"divisor of {node.op}")
            elif node.op == "**":
                c = _const_value(node.rhs)
                if c is None or c != int(c):
                    need(node.lhs, POSITIVE, "base of ** with a non-integer exponent")
                elif c < 0:
                    need(node.lhs, NONZERO, "base of ** with a negative exponent")
    return out


def as_domain(d) -> Domain:
    """A :class:`Domain` from a Domain or an ``(lo, hi)`` pair (open interval)."""
    if isinstance(d, Domain):
        return d
    try:
        lo, hi = (float(x) for x in d)
    except (TypeError, ValueError):
        raise ValueError(f"a domain is a pair (lo, hi), got {d!r}") from None
    if math.isnan(lo) or math.isnan(hi) or not lo < hi:
        raise ValueError(f"empty domain ({lo:g}, {hi:g}): need lo < hi")
    return Domain(lo, hi, False, "given")


def _floor(dist: str, dt: np.dtype) -> float:
    """Smallest magnitude drawn next to an excluded 0/bound: 1e-3 of the distribution's
    scale, and never so small that its reciprocal overflows the dtype."""
    tiny = float(np.finfo(np.float32 if dt.itemsize <= 2 else dt).tiny) if dt.kind == "f" else 1e-30
    if dt.itemsize <= 2:
        tiny = 6.1e-5
    return max(1e-3 * _SCALE.get(dist, 1.0), math.sqrt(tiny))


def _fit(x: np.ndarray, dom: Domain, dist: str, dt: np.dtype) -> np.ndarray:
    """Map the draw ``x`` (float32 or float64) into ``dom``, keeping its spread."""
    fl = _floor(dist, dt)
    lo, hi = dom.lo, dom.hi
    if math.isfinite(lo) and math.isfinite(hi):
        s = _SCALE.get(dist, 1.0)
        u = x if dist == "uniform" else 0.5 + 0.5 * np.tanh(x / s)
        y = lo + (hi - lo) * np.clip(u, 1e-6, 1 - 1e-6)
    elif math.isfinite(lo):
        y = lo + np.maximum(np.abs(x), fl)
    elif math.isfinite(hi):
        y = hi - np.maximum(np.abs(x), fl)
    else:
        y = x
    if dom.nonzero:
        y = np.where(np.abs(y) < fl, np.where(y < 0, -fl, fl), y)
    return y


def _inside(a: np.ndarray, dom: Domain) -> np.ndarray:
    """After rounding to the dtype, values that left the open domain are moved just
    inside it."""
    if a.dtype.kind != "f" and not D.is_bf16(a.dtype):
        return a
    t = a.dtype
    if math.isfinite(dom.lo):
        lo = np.asarray(dom.lo).astype(t)
        lo_in = np.nextafter(lo, np.asarray(np.inf, dtype=t)) if lo <= dom.lo else lo
        a = np.where(a <= dom.lo, lo_in, a).astype(t)
    if math.isfinite(dom.hi):
        hi = np.asarray(dom.hi).astype(t)
        hi_in = np.nextafter(hi, np.asarray(-np.inf, dtype=t)) if hi >= dom.hi else hi
        a = np.where(a >= dom.hi, hi_in, a).astype(t)
    if dom.nonzero:
        a = np.where(a == 0, np.asarray(_floor("normal", t)).astype(t), a).astype(t)
    return a


def _floats(rng: np.random.Generator, shape, dist: str, dt: np.dtype, excludes_zero: bool) -> np.ndarray:
    # f32 and narrower inputs are drawn in float32: the values end up there anyway, and
    # drawing 6M float64 values to round them costs more than the kernel run
    ft = np.float32 if dt.itemsize <= 4 else np.float64
    if dist == "uniform":
        return rng.random(shape, dtype=ft)
    if dist == "normal":
        return rng.standard_normal(shape, dtype=ft)
    if dist == "signed":
        return rng.random(shape, dtype=ft) * 2.0 - 1.0
    if dist == "large":
        return rng.standard_normal(shape, dtype=ft) * 1e3
    if dist == "small":
        return rng.standard_normal(shape, dtype=ft) * 1e-3
    if dist == "logits":
        return rng.random(shape, dtype=ft) * 200.0 - 100.0
    if dist == "mixed":
        span = 2.0 if dt.itemsize <= 2 else 3.0
        mag = 10.0 ** (rng.random(shape, dtype=ft) * 2 * span - span)
        return np.where(rng.random(shape, dtype=ft) < 0.5, -mag, mag)
    if dist in ("zeros", "special"):
        x = rng.standard_normal(shape)
        zero = rng.random(shape) < (0.25 if dist == "zeros" else 0.1)
        neg = rng.random(shape) < 0.5
        if dist == "zeros" and len(shape) >= 2:
            zero[0] = True
        if not excludes_zero:
            x = np.where(zero, np.where(neg, -0.0, 0.0), x)
        return x
    raise ValueError(f"unknown distribution {dist!r} (expected one of {', '.join(DISTS)})")


#: largest decimal exponent drawn per float dtype by the ``range`` probe at level 0
_MAX_EXP10 = {"f16": 4, "bf16": 38, "f32": 38, "f64": 307}


def range_exponent(dtype: str, level: int) -> int:
    """E of the ``range`` probe: magnitudes 10^-E .. 10^E for ``dtype`` at ``level``."""
    return max(1, _MAX_EXP10.get(dtype, 38) >> max(0, int(level)))


def _range_floats(rng, shape, dtype: str, level: int, excludes_zero: bool) -> np.ndarray:
    e = range_exponent(dtype, level)
    mag = 10.0 ** (rng.random(shape) * 2 * e - e)
    x = np.where(rng.random(shape) < 0.5, -mag, mag)
    if not excludes_zero:
        x = np.where(rng.random(shape) < 1.0 / 16, 0.0, x)
    return x


def _range_ints(rng, shape, dt: np.dtype, level: int) -> np.ndarray:
    """Log-uniform magnitudes over the low ``bits >> level`` bits of ``dt``, both signs
    for signed types, one element in eight a boundary value of that range."""
    info = np.iinfo(dt)
    bits = max(4, (8 * dt.itemsize) >> max(0, int(level)))
    if info.min < 0:
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:
        lo, hi = 0, (1 << bits) - 1
    top = math.log2(hi + 1)
    mag = np.floor(np.exp2(rng.random(shape) * top)).astype(np.float64) - 1  # 0 .. hi
    mag = np.minimum(mag, hi)
    x = mag if lo == 0 else np.where(rng.random(shape) < 0.5, -mag - 1, mag)  # -hi-1 .. hi
    edges = np.array(sorted({lo, lo + 1, 0, 1, hi - 1, hi} | ({-1} if lo < 0 else set())), dtype=np.float64)
    pick = rng.random(shape) < 1.0 / 8
    x = np.where(pick, edges[rng.integers(0, len(edges), size=shape)], x)
    return np.clip(x, lo, hi).astype(np.int64).astype(dt)


def _int_divisors(kernel: A.Kernel) -> set:
    """Integer inputs that appear directly as a divisor (``//``, ``%``, ``/``): drawn
    without 0 by the wide probes, where a division by zero is the input's fault."""
    ints = {p.name for p in kernel.inputs if p.dtype in A.INT_DTYPES}
    out = set()
    for node in A.walk(kernel):
        if isinstance(node, A.BinOp) and node.op in ("/", "//", "%"):
            n = _direct(node.rhs)
            if n in ints:
                out.add(n)
    return out


def random_inputs(kernel: A.Kernel, seed: int, dist: str = "uniform", domains: Optional[dict] = None, *,
                  level: int = 0, also: tuple = ()) -> dict:
    """Random inputs for ``kernel`` (name -> array of the declared dtype and shape).
    ``domains`` (name -> Domain or (lo, hi)) replaces the inferred domain of the inputs it
    names; inputs it does not name get :func:`infer_domains`'s. ``level`` narrows the
    ``range`` distribution (0: widest; see the module docstring). ``also``: other kernels
    with the same inputs (a candidate verified against ``kernel``) whose comparisons the
    ``branches`` distribution plants values for too."""
    if dist not in DISTS:
        raise ValueError(f"unknown distribution {dist!r} (expected one of {', '.join(DISTS)})")
    seed = int(seed)
    if seed < 0:
        raise ValueError(f"a seed is a non-negative integer, got {seed}")
    doms = infer_domains(kernel)
    for n, d in (domains or {}).items():
        doms[n] = as_domain(d)
    rng = np.random.default_rng(seed)
    ranges = None
    wide = dist in ("range", "branches")
    divisors = _int_divisors(kernel) if wide else set()
    out = {}
    for p in kernel.inputs:
        shape = tuple(p.shape)
        dt = D.np_dtype(p.dtype)
        if p.dtype in A.FLOAT_DTYPES:
            dom = doms.get(p.name)
            excl = dom is not None and dom.excludes_zero
            if dist == "range":
                x = _range_floats(rng, shape, p.dtype, level, excl)
            else:
                x = _floats(rng, shape, "normal" if dist == "branches" else dist, dt, excl)
            if dom is not None:
                x = _fit(x, dom, dist, dt)
            with np.errstate(over="ignore"):
                a = np.asarray(x).astype(dt)
            if dom is not None:
                a = _inside(np.asarray(a), dom)
        elif p.dtype == "bool":
            a = np.asarray(rng.random(shape) < 0.5)
        else:
            if ranges is None:
                ranges = index_ranges(kernel)
            info = np.iinfo(dt)
            if dist == "range" and p.name not in ranges:
                a = _range_ints(rng, shape, dt, level)
            else:
                if p.name in ranges:
                    lo, hi = ranges[p.name]
                elif dist == "uniform" or info.min == 0:
                    lo, hi = 0, 16
                else:
                    lo, hi = -8, 9
                lo, hi = max(lo, int(info.min)), min(hi, int(info.max) + 1)
                a = rng.integers(lo, hi, size=shape, dtype=np.int64).astype(dt)
                if wide and p.name in ranges and a.size and hi - lo >= 2:
                    # the two ends of an index range, where an off-by-one shows
                    flat = a.reshape(-1)
                    flat[rng.integers(0, flat.size)] = lo
                    flat[rng.integers(0, flat.size)] = hi - 1
            if p.name in divisors:
                a = np.where(a == 0, np.ones((), dtype=dt), a).astype(dt)
        out[p.name] = np.asarray(a, dtype=dt, order="C")
    if dist == "branches":
        for k in (kernel, *also):
            _plant_branch_values(k, out, doms, rng)
    return out


# ---------------------------------------------------------------------------
# branch points


@dataclass(frozen=True)
class BranchSite:
    """One comparison of the program: ``lhs op rhs`` at ``line:col`` (``max``/``min`` are
    the comparison ``lhs > rhs`` / ``lhs < rhs`` that picks an operand)."""

    line: int
    col: int
    text: str
    op: str
    lhs: A.Expr
    rhs: A.Expr


_FLIP = {">": "<", "<": ">", ">=": "<=", "<=": ">=", "==": "==", "!=": "!="}


def branch_sites(kernel: A.Kernel) -> list:
    """Every comparison of two values of which at least one reads a tensor: the links of a
    comparison chain, two-operand ``max``/``min`` (pairwise for more operands)."""
    from ..lang.printer import print_expr

    out = []

    def reads_tensor(e) -> bool:
        return any(isinstance(n, A.Access) for n in A.walk(e))

    def add(node, op, a, b, text):
        if reads_tensor(a) or reads_tensor(b):
            sp = getattr(node, "span", None)
            out.append(BranchSite(getattr(sp, "line", 0) or 0, getattr(sp, "col", 0) or 0, text, op, a, b))

    for node in A.walk(kernel):
        if isinstance(node, A.Compare):
            for op, a, b in zip(node.ops, node.operands, node.operands[1:]):
                add(node, op, a, b, f"{print_expr(a)} {op} {print_expr(b)}")
        elif isinstance(node, A.Call) and node.func in ("max", "min") and len(node.args) >= 2:
            op = ">" if node.func == "max" else "<"
            for a, b in zip(node.args, node.args[1:]):
                add(node, op, a, b, f"{node.func}({print_expr(a)}, {print_expr(b)})")
    return out


def invert(e: A.Expr):
    """(tensor name, access, forward, inverse) when ``e`` is a strictly monotone function of
    one tensor element -- ``X``, ``-X``, a cast, ``X + c``, ``X - c``, ``c - X``,
    ``X * c``, ``X / c`` (c a nonzero constant) -- else None. ``forward`` maps the tensor's
    values to ``e``'s, ``inverse`` a value of ``e`` back to the tensor's."""
    if isinstance(e, A.Access):
        return e.name, e, (lambda x: x), (lambda t: t)
    if isinstance(e, A.Neg):
        r = invert(e.operand)
        if r is None:
            return None
        n, acc, f, g = r
        return n, acc, (lambda x: -f(x)), (lambda t: g(-t))
    if isinstance(e, A.Call) and e.func in A.CAST_FUNCS and e.func != "bool" and len(e.args) == 1:
        # a cast is monotone (a widening one exactly; a narrowing integer cast wraps, and the
        # planted values then only miss the boundary)
        return invert(e.args[0])
    if isinstance(e, A.BinOp) and e.op in ("+", "-", "*", "/"):
        cr, cl = _const_value(e.rhs), _const_value(e.lhs)
        if cr is not None and cl is None:
            r = invert(e.lhs)
            if r is None or (e.op in ("*", "/") and cr == 0):
                return None
            n, acc, f, g = r
            if e.op == "+":
                return n, acc, (lambda x: f(x) + cr), (lambda t: g(t - cr))
            if e.op == "-":
                return n, acc, (lambda x: f(x) - cr), (lambda t: g(t + cr))
            if e.op == "*":
                return n, acc, (lambda x: f(x) * cr), (lambda t: g(t / cr))
            return n, acc, (lambda x: f(x) / cr), (lambda t: g(t * cr))
        if cl is not None and cr is None and e.op in ("+", "-", "*"):
            r = invert(e.rhs)
            if r is None or (e.op == "*" and cl == 0):
                return None
            n, acc, f, g = r
            if e.op == "+":
                return n, acc, (lambda x: cl + f(x)), (lambda t: g(t - cl))
            if e.op == "-":
                return n, acc, (lambda x: cl - f(x)), (lambda t: g(cl - t))
            return n, acc, (lambda x: cl * f(x)), (lambda t: g(t / cl))
    return None


def branch_points(kernel: A.Kernel) -> tuple[dict, list]:
    """(input name -> thresholds in the input's own values, [(input, input)] pairs compared
    elementwise) for the comparisons of :func:`branch_sites` whose one side is a monotone
    function of an input (:func:`invert`) and whose other side is a constant or another
    input."""
    inputs = {p.name for p in kernel.inputs if p.dtype != "bool"}
    thresholds: dict = {}
    pairs: list = []
    for site in branch_sites(kernel):
        a, b = site.lhs, site.rhs
        ra, rb = invert(a), invert(b)
        ca, cb = _const_value(a), _const_value(b)
        for r, c in ((ra, cb), (rb, ca)):
            if r is not None and c is not None and r[0] in inputs:
                try:
                    t = float(r[3](c))
                except (ZeroDivisionError, OverflowError):
                    continue
                if math.isfinite(t):
                    lst = thresholds.setdefault(r[0], [])
                    if t not in lst:
                        lst.append(t)
        if ra is not None and rb is not None and ra[0] in inputs and rb[0] in inputs and ra[0] != rb[0]:
            pr = (ra[0], rb[0])
            if pr not in pairs:
                pairs.append(pr)
    return thresholds, pairs


#: most thresholds per input the branches probe plants
MAX_THRESHOLDS = 8
#: relative step of "one ulp" per float dtype (the spacing just above 1)
_EPS = {"f16": 2.0**-10, "bf16": 2.0**-7, "f32": 2.0**-23, "f64": 2.0**-52}


def _plant_branch_values(kernel: A.Kernel, out: dict, doms: dict, rng: np.random.Generator) -> None:
    """Write the threshold values of :func:`branch_points` and :func:`sum_points` into
    ``out`` (in place)."""
    thresholds, pairs = branch_points(kernel)
    params = {p.name: p for p in kernel.inputs}
    for name, ts in thresholds.items():
        _plant_thresholds(out, params[name], ts, doms.get(name), rng)
    for x, y in pairs:
        ax, ay = out[x], out[y]
        if ax.shape != ay.shape or ax.dtype != ay.dtype or ax.size == 0:
            continue
        eq = rng.random(ax.shape) < 0.125
        ax[eq] = ay[eq]
    for ra, rb, sign, c in sum_points(kernel):
        _plant_sum(out, params, doms, rng, ra, rb, sign, c)


def _plant_thresholds(out: dict, p, ts: list, dom, rng) -> None:
    """Values at, one ulp around and far around each threshold ``ts`` of input ``p``."""
    a = out[p.name]
    if a.size == 0:
        return
    flat = a.reshape(-1)
    vals = []
    for t in ts[:MAX_THRESHOLDS]:
        if p.dtype in A.FLOAT_DTYPES:
            eps = _EPS.get(p.dtype, 2.0**-23)
            step = max(abs(t) * 2 * eps, 1e-30)
            far = max(1.0, abs(t))
            cands = (t, t + step, t - step, t + far, t - far)
            vals += [v for v in cands if dom is None or dom.contains(v)]
        else:
            info = np.iinfo(a.dtype)
            ti = int(math.floor(t))
            far = max(1, abs(ti))
            vals += [v for v in (ti, ti + 1, ti - 1, ti + far, ti - far) if info.min <= v <= info.max]
    if not vals:
        return
    # one element in four gets a planted value, cycled so that each value appears
    pick = np.flatnonzero(rng.random(flat.size) < 0.25)
    if pick.size == 0:
        pick = np.array([int(rng.integers(flat.size))])
    with np.errstate(over="ignore"):
        planted = np.asarray([vals[i % len(vals)] for i in range(pick.size)], dtype=np.float64)
        flat[pick] = planted.astype(a.dtype)


def sum_points(kernel: A.Kernel) -> list:
    """``(X, Y, sign, c)`` for each comparison of ``f(X) + g(Y)`` (``sign`` +1) or
    ``f(X) - g(Y)`` (-1) with a constant ``c``, where f and g are monotone in one element of
    two different inputs read with the same subscripts (a saturation test such as
    ``i32(A) + i32(B) > 255``). Returned as (X's inversion, Y's forward) pairs."""
    inputs = {p.name for p in kernel.inputs if p.dtype != "bool"}
    out = []
    for site in branch_sites(kernel):
        for e, other in ((site.lhs, site.rhs), (site.rhs, site.lhs)):
            c = _const_value(other)
            if c is None or not (isinstance(e, A.BinOp) and e.op in ("+", "-")):
                continue
            ra, rb = invert(e.lhs), invert(e.rhs)
            if (ra is None or rb is None or ra[0] == rb[0] or ra[0] not in inputs or rb[0] not in inputs
                    or ra[1].indices != rb[1].indices):
                continue
            out.append((ra, rb, 1 if e.op == "+" else -1, c))
    return out


def _plant_sum(out: dict, params: dict, doms: dict, rng, ra, rb, sign: int, c: float) -> None:
    """One element in four of X set so that f(X) +- g(Y) lands on ``c``, one step above or
    one step below it (elementwise, X and Y of one shape)."""
    x, y = ra[0], rb[0]
    ax, ay = out[x], out[y]
    if ax.shape != ay.shape or ax.size == 0:
        return
    with np.errstate(all="ignore"):
        gy = rb[2](ay.astype(np.float64))
        target = (c - gy) if sign > 0 else (gy + c)  # f(X) = c -+ g(Y)
        want = np.asarray(ra[3](target), dtype=np.float64)
    if params[x].dtype in A.FLOAT_DTYPES:
        step = np.maximum(np.abs(want) * 2 * _EPS.get(params[x].dtype, 2.0**-23), 1e-30)
    else:
        want = np.floor(want)
        step = np.ones_like(want)
    offset = rng.integers(-1, 2, size=ax.shape)  # at, above, below
    cand = want + offset * step
    pick = (rng.random(ax.shape) < 0.25) & np.isfinite(cand)
    if ax.dtype.kind in "iu":
        info = np.iinfo(ax.dtype)
        pick &= (cand >= info.min) & (cand <= info.max)
    dom = doms.get(x)
    if dom is not None:
        pick &= np.vectorize(dom.contains, otypes=[bool])(cand) if cand.size else pick
    if pick.any():
        with np.errstate(over="ignore"):
            ax[pick] = cand[pick].astype(ax.dtype)


#: special values tried by :func:`inject_special`, in order
SPECIAL_VALUES = (-math.inf, math.inf, math.nan)


def inject_special(inputs: dict, name: str, value: float, seed: int, salt: int = 0) -> dict:
    """A copy of ``inputs`` where about 1 in 16 elements (at least one) of float input
    ``name`` is ``value``; positions come from ``default_rng((seed, size, salt))``, so
    different salts give (mostly) different positions."""
    a = np.array(inputs[name], copy=True)
    if a.size == 0:
        return dict(inputs)
    rng = np.random.default_rng([int(seed), a.size, 7, int(salt)])
    m = rng.random(a.shape) < 1.0 / 16
    m.reshape(-1)[int(rng.integers(a.size))] = True
    a[m] = value
    out = dict(inputs)
    out[name] = a
    return out
