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
  (:func:`inject_special`).

Every float input is drawn inside its *domain* (:func:`infer_domains`): an input that is the
argument of ``log``/``sqrt``/``rsqrt`` or the base of a ``pow`` with a non-integer exponent
is drawn positive, a divisor is drawn away from zero, and a domain given explicitly as
``(lo, hi)`` is drawn inside the open interval.

Integer inputs that the program uses as subscripts (``H_{C_{i}}``) are drawn from the range
that keeps every such use in bounds: for a subscript ``C`` (or ``C + k``/``C - k``) of a
dimension with extent n the range is [0, n) (shifted by -k/+k), intersected over all uses.
Other integer inputs are small: [0, 16) for ``uniform`` and unsigned types, [-8, 8] otherwise.
Booleans are fair coin flips. Inputs are drawn in signature order from
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
PROBE_DISTS = ("logits", "mixed", "zeros", "special")
DISTS = GRID_DISTS + PROBE_DISTS

#: typical magnitude of each distribution (the floor kept away from a domain's open bound
#: is 1e-3 of it)
_SCALE = {"uniform": 1.0, "normal": 1.0, "signed": 1.0, "large": 1e3, "small": 1e-3, "logits": 100.0,
          "mixed": 1e-3, "zeros": 1.0, "special": 1.0}


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


def random_inputs(kernel: A.Kernel, seed: int, dist: str = "uniform", domains: Optional[dict] = None) -> dict:
    """Random inputs for ``kernel`` (name -> array of the declared dtype and shape).
    ``domains`` (name -> Domain or (lo, hi)) replaces the inferred domain of the inputs it
    names; inputs it does not name get :func:`infer_domains`'s."""
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
    out = {}
    for p in kernel.inputs:
        shape = tuple(p.shape)
        dt = D.np_dtype(p.dtype)
        if p.dtype in A.FLOAT_DTYPES:
            dom = doms.get(p.name)
            x = _floats(rng, shape, dist, dt, dom is not None and dom.excludes_zero)
            if dom is not None:
                x = _fit(x, dom, dist, dt)
            a = np.asarray(x).astype(dt)
            if dom is not None:
                a = _inside(np.asarray(a), dom)
        elif p.dtype == "bool":
            a = np.asarray(rng.random(shape) < 0.5)
        else:
            if ranges is None:
                ranges = index_ranges(kernel)
            info = np.iinfo(dt)
            if p.name in ranges:
                lo, hi = ranges[p.name]
            elif dist == "uniform" or info.min == 0:
                lo, hi = 0, 16
            else:
                lo, hi = -8, 9
            lo, hi = max(lo, int(info.min)), min(hi, int(info.max) + 1)
            a = rng.integers(lo, hi, size=shape, dtype=np.int64).astype(dt)
        out[p.name] = np.asarray(a, dtype=dt, order="C")
    return out


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
